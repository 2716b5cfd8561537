package kafkasrv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// TestReviewFetchMinBytes: a Fetch with min_bytes above the data there is
// waits, as Kafka's DelayedFetch does, until the bytes reach min_bytes
// (answered then, before its max wait, with everything there) or its max
// wait passes (answered with what there is); not at once with the first
// bytes, which gave a consumer with fetch.min.bytes many small responses.
func TestReviewFetchMinBytes(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 1, map[string]string{"internal.segment.bytes": "1048576"})
	l := e.Log("orders", 0)
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(20, ts0, "o"))
	const maxWait = 1500 * time.Millisecond
	addr := startKafka(t, e.Cat, KafkaOptions{MaxFetchWait: maxWait, FetchPollInterval: 10 * time.Millisecond})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()

	req := fetchOf(int32(maxWait/time.Millisecond), 1<<20, "orders", int32(0))
	req.MinBytes = 1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	have := batchBytes(resp)
	if have == 0 {
		t.Fatal("setup: no data")
	}

	// Less than min_bytes there, none coming: the max wait, then the data.
	req.MinBytes = int32(have * 10)
	start := time.Now()
	resp, err = req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < maxWait*3/4 || batchBytes(resp) != have || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("min_bytes %d with %d bytes there: answered after %v with %d bytes (error %d), want about the max wait %v and the %d bytes",
			req.MinBytes, have, took, batchBytes(resp), resp.Topics[0].Partitions[0].ErrorCode, maxWait, have)
	}

	// Enough arriving in a few steps during the wait: answered once the
	// bytes reach min_bytes, with all of them.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 12 {
			time.Sleep(40 * time.Millisecond)
			e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(20, ts0+int64(i+1)*1000, "p"))
		}
	}()
	start = time.Now()
	resp, err = req.RequestWith(ctx, cl)
	took := time.Since(start)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if got := batchBytes(resp); got < int(req.MinBytes) || took >= maxWait*3/4 {
		t.Fatalf("min_bytes %d, data arriving: answered after %v with %d bytes, want at least min_bytes before the max wait %v", req.MinBytes, took, got, maxWait)
	}

	// A read cut at a segment's end, more data after it: answered at once,
	// as Kafka answers a fetch behind the log's last segment.
	e.Topic("small", 1, nil) // 1 KiB segments
	e.Produce(e.Log("small", 0), fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(200, ts0, "s"))
	sreq := fetchOf(int32(maxWait/time.Millisecond), 1<<20, "small", int32(0))
	sreq.MinBytes = 1 << 20
	start = time.Now()
	resp, err = sreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= maxWait/2 || batchBytes(resp) == 0 {
		t.Fatalf("a read cut at a segment's end: answered after %v with %d bytes, want at once", took, batchBytes(resp))
	}
}
