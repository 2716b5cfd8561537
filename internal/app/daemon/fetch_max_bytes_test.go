package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestServeFetchMaxBytes runs serve with kafka.fetch_max_bytes set to 4 KiB
// and sends a Fetch that allows 50 MiB: the answer carries whole batches
// within the listener's cap (here the first, about 3 KiB), not the six
// batches the client allowed; with the default cap the same Fetch gets all
// six. The cap is a listener setting, so the config must reach it.
func TestServeFetchMaxBytes(t *testing.T) {
	bin := tieredBin(t)
	const batches = 6
	fetchBytes := func(t *testing.T, cfg string) (got, batchesGot int) {
		t.Helper()
		dir := t.TempDir()
		cfgFile := filepath.Join(dir, "tiered.yaml")
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s := startProc(t, bin, nil, "serve", "--data-dir", filepath.Join(dir, "data"), "--config", cfgFile)
		defer s.stop()
		mustCmd(t, bin, "", "topic", "create", "--server", s.url(), "--topic", "capped")
		for b := range batches {
			var in strings.Builder
			for i := range 40 {
				fmt.Fprintf(&in, "{\"key\":\"k%d\",\"value\":%q}\n", i, strings.Repeat("v", 60))
			}
			if _, _, errs := runCmd(t, bin, in.String(), "produce", "--server", s.url(), "--topic", "capped", "--partition", "0"); !strings.Contains(errs, fmt.Sprintf("offsets %d-%d", b*40, b*40+39)) {
				t.Fatalf("produce batch %d: %q", b, errs)
			}
		}
		// serve's topics have IDs: a Fetch naming the topic is v12 at most.
		cl := fetchkit.ByNameClient(t, s.kafka)
		q := kmsg.NewPtrFetchRequest()
		q.ReplicaID = -1
		q.MaxWaitMillis = 100
		q.MinBytes = 1
		q.MaxBytes = 50 << 20
		q.SessionEpoch = -1
		qt := kmsg.NewFetchRequestTopic()
		qt.Topic = "capped"
		qp := kmsg.NewFetchRequestTopicPartition()
		qp.PartitionMaxBytes = 50 << 20
		qp.CurrentLeaderEpoch = -1
		qt.Partitions = append(qt.Partitions, qp)
		q.Topics = append(q.Topics, qt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := q.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("answer names %d topics", len(r.Topics))
		}
		rp := r.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "capped", Partition: 0}, &rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			t.Fatalf("decode the answer: %v", fp.Err)
		}
		if len(fp.Records)%40 != 0 || len(fp.Records) == 0 {
			t.Fatalf("%d records: not whole batches of 40", len(fp.Records))
		}
		return len(rp.RecordBatches), len(fp.Records) / 40
	}
	n, b := fetchBytes(t, "kafka:\n  fetch_max_bytes: 4KiB\n")
	if b != 1 || n > 4<<10 {
		t.Fatalf("kafka.fetch_max_bytes 4KiB: %d batches, %d bytes; want the first batch only", b, n)
	}
	if n, b := fetchBytes(t, "shutdown_timeout: 20s\n"); b != batches {
		t.Fatalf("default cap: %d batches (%d bytes), want all %d", b, n, batches)
	}
}
