package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
)

// recreateRetention is sidecar.deleted_topic_retention in the re-creation
// test: long enough to see the old lineage still there, short enough to
// see it go.
const recreateRetention = 4 * time.Second

// writeOrders writes topic orders, partition 0, into a fresh log dir at
// dir with localtier's engine: n records with values <tag>-N at offsets
// 0..n-1 in several rolled segments (none left in the active one), topic
// ID id in partition.metadata. It returns the partition directory.
func writeOrders(t *testing.T, dir, tag string, n int, id localtier.TopicID) string {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("orders", 1, map[string]string{"internal.segment.bytes": "16384"}); err != nil {
		t.Fatal(err)
	}
	l, err := d.Partition("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{Key: []byte("k-" + strconv.Itoa(i)), Value: []byte(tag + "-" + strconv.Itoa(i)), Timestamp: ts0 + int64(i)*10}
	}
	p := &producer{t: t}
	p.produce(l, codec.None, 20, recs)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := len(l.Segments()); got < 4 {
		t.Fatalf("%d segments, want several", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "orders-0")
	if err := localtier.WritePartitionMetadata(vfs.Default, pdir, id); err != nil {
		t.Fatal(err)
	}
	return pdir
}

func setHW(t *testing.T, brokerDir string, hw int64) {
	t.Helper()
	if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(brokerDir, checkpoint.ReplicationOffsetFile),
		map[checkpoint.TopicPartition]int64{{Topic: "orders", Partition: 0}: hw}); err != nil {
		t.Fatal(err)
	}
}

// lineageObjects lists the bucket's objects in topic orders' directories of
// lineage keyID (a topic ID's string form, "" = name-only).
func lineageObjects(t *testing.T, c *minio.Client, bucket, keyID string) []string {
	t.Helper()
	var out []string
	for k := range bucketKeys(t, c, bucket) {
		if pk, err := manifest.ParseKey(k); err == nil && pk.Topic == "orders" && pk.TopicID == keyID {
			out = append(out, k)
		}
	}
	return out
}

// topicObject reads orders' topic object through MinIO's client.
func topicObject(t *testing.T, c *minio.Client, bucket string) *manifest.TopicState {
	t.Helper()
	key, _ := manifest.TopicKey("", "orders")
	data, err := minioGet(t, c, bucket, key)
	if err != nil {
		return nil
	}
	s, err := manifest.DecodeTopic(key, data)
	if err != nil {
		t.Fatalf("topic object: %v", err)
	}
	return s
}

// lineageEnd is the next offset of orders-0's manifest in lineage keyID
// (-1 while it has none).
func lineageEnd(t *testing.T, c *minio.Client, bucket, keyID string) int64 {
	t.Helper()
	key, err := manifest.ManifestKeyID("", "orders", keyID, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := minioGet(t, c, bucket, key)
	if err != nil {
		return -1
	}
	m, err := manifest.DecodeRoot(key, data)
	if err != nil {
		t.Fatalf("manifest of lineage %q: %v", keyID, err)
	}
	return m.NextOffset()
}

// startProcess starts bin with args and env, and waits for a line
// containing ready on its stderr; the process is stopped (SIGTERM) when the
// test ends.
func startProcess(t *testing.T, bin string, env []string, ready string, args ...string) *lockedBuffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(stderr.String(), ready) })
	return stderr
}

// onlyNew checks that recs are exactly NEW-N at offsets from..to-1.
func onlyNew(t *testing.T, what string, recs []jsonRecord, from, to int64) {
	t.Helper()
	if int64(len(recs)) != to-from {
		t.Fatalf("%s: %d records, want %d (offsets %d to %d)", what, len(recs), to-from, from, to-1)
	}
	for i, r := range recs {
		off := from + int64(i)
		if r.Offset != off || r.Value == nil || *r.Value != "NEW-"+strconv.FormatInt(off, 10) {
			v := "<null>"
			if r.Value != nil {
				v = *r.Value
			}
			t.Fatalf("%s: record %d is offset %d value %q, want offset %d value NEW-%d", what, i, r.Offset, v, off, off)
		}
	}
}

func parseJSONLines(t *testing.T, what string, out []byte) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", what, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestTopicRecreation is issue 15's re-creation scenario with real
// processes over MinIO: topic orders is uploaded by a `tiered sidecar`
// (offsets 0-2799, values old-N, topic ID A in partition.metadata), then
// deleted and re-created under the same name with topic ID B and records
// NEW-N at 0-1999, as a broker does (the old directory renamed -delete, a
// new one in its place). After the sidecar records the re-creation, no
// interface — Kafka (franz-go and kcat against `tiered fetch`), HTTP
// (`consume --fetch`), `consume --bucket` and `replay --bucket` — returns a
// record of the old topic; the new topic's uploaded offsets read back
// exactly; the old lineage is still in the bucket right after and gone
// after sidecar.deleted_topic_retention.
func TestTopicRecreation(t *testing.T) {
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	bin := tiered(t)
	bucket := srv.NewBucket(t)
	url := srv.URL(bucket, "")
	mc := srv.Client()
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+testminio.AccessKey, "AWS_SECRET_ACCESS_KEY="+testminio.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true")
	root := t.TempDir()
	brokerDir := filepath.Join(root, "broker")
	idA := localtier.TopicID{0xa3, 0x70, 0x71, 0xeb, 0x2d, 0x10, 0x43, 0x1c, 0xb1, 0x4b, 0x61, 0x6b, 0x0d, 0xc0, 0xe2, 0x3b}
	idB := localtier.TopicID{0x56, 0xda, 0xa1, 0xfb, 0xf6, 0x8b, 0x4a, 0x91, 0xa7, 0xde, 0x32, 0xb8, 0x74, 0x69, 0xef, 0xf0}
	writeOrders(t, brokerDir, "old", 2800, idA)
	setHW(t, brokerDir, 2800)

	cfgFile := filepath.Join(root, "sidecar.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("sidecar:\n  deleted_topic_retention: %s\n", recreateRetention)), 0o644); err != nil {
		t.Fatal(err)
	}
	sidecarLog := startProcess(t, bin, env, "sidecar started", "sidecar", "--config", cfgFile, "--kafka-log-dir", brokerDir,
		"--bucket", url, "--interval", "100ms", "--topics", "orders")
	waitFor(t, 60*time.Second, func() bool { return lineageEnd(t, mc, bucket, idA.String()) == 2800 })
	// Before the re-creation, the bucket serves the old topic (what the
	// checks below must never see again).
	code, out, errs := runTiered(t, bin, "consume", "--bucket", url, "--topic", "orders", "--partition", "0", "--from-offset", "500", "--max-records", "1")
	if recs := parseJSONLines(t, "consume before", out); code != 0 || len(recs) != 1 || *recs[0].Value != "old-500" {
		t.Fatalf("before re-creation: exit %d, %s, %s", code, out, errs)
	}

	// A fetch service running across the re-creation, having served the
	// old topic: it must move to the new lineage on its own.
	early := testnet.LoopbackAddrs(t, 2)
	startProcess(t, bin, env, "fetch service started", "fetch", "--bucket", url, "--http", early[0], "--kafka", early[1])
	readAt500 := func(base string) string {
		code, out, _ := runTiered(t, bin, "consume", "--fetch", base, "--topic", "orders", "--partition", "0", "--from-offset", "500", "--max-records", "1")
		if recs := parseJSONLines(t, "consume --fetch 500", out); code == 0 && len(recs) == 1 && recs[0].Value != nil {
			return *recs[0].Value
		}
		return ""
	}
	if v := readAt500("http://" + early[0]); v != "old-500" {
		t.Fatalf("running fetch service before re-creation: offset 500 is %q", v)
	}

	// Delete and re-create as a broker does.
	newDir := filepath.Join(root, "new")
	newPart := writeOrders(t, newDir, "NEW", 2000, idB)
	if err := os.Rename(filepath.Join(brokerDir, "orders-0"), filepath.Join(brokerDir, "orders-0.0123456789abcdef0123456789abcdef-delete")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newPart, filepath.Join(brokerDir, "orders-0")); err != nil {
		t.Fatal(err)
	}
	setHW(t, brokerDir, 2000)
	waitFor(t, 60*time.Second, func() bool {
		s := topicObject(t, mc, bucket)
		return s != nil && s.Current != nil && s.Current.TopicID == idB.String() && lineageEnd(t, mc, bucket, idB.String()) == 2000
	})
	st := topicObject(t, mc, bucket)
	if len(st.Superseded) != 1 || st.Superseded[0].TopicID != idA.String() {
		t.Fatalf("topic object after re-creation: %+v", st)
	}
	supersededAt := time.UnixMilli(st.Superseded[0].SupersededMs)
	// The running fetch service follows within its manifest TTL (5 s).
	waitFor(t, 30*time.Second, func() bool { return readAt500("http://"+early[0]) == "NEW-500" })
	t.Logf("the fetch service running across the re-creation served the new lineage %s after the sidecar recorded it", time.Since(supersededAt).Round(100*time.Millisecond))
	if old := lineageObjects(t, mc, bucket, idA.String()); len(old) == 0 && time.Since(supersededAt) < recreateRetention {
		t.Fatal("the old lineage was removed before sidecar.deleted_topic_retention")
	}

	// consume --bucket: exactly the new records; past the new end (inside
	// the old range) nothing.
	code, out, errs = runTiered(t, bin, "consume", "--bucket", url, "--topic", "orders", "--partition", "0")
	if code != 0 {
		t.Fatalf("consume --bucket: exit %d: %s", code, errs)
	}
	onlyNew(t, "consume --bucket", parseJSONLines(t, "consume --bucket", out), 0, 2000)
	code, out, _ = runTiered(t, bin, "consume", "--bucket", url, "--topic", "orders", "--partition", "0", "--from-offset", "2500")
	if recs := parseJSONLines(t, "consume --bucket 2500", out); code == 0 || len(recs) != 0 {
		t.Fatalf("consume --bucket from offset 2500 (old range): exit %d, %d records", code, len(recs))
	}

	// inspect manifest: the served lineage.
	code, out, errs = runTiered(t, bin, "inspect", "manifest", "--bucket", url, "--topic", "orders", "--partition", "0", "--json")
	var im struct {
		TopicID    string `json:"topic_id"`
		NextOffset int64  `json:"next_offset"`
	}
	if err := json.Unmarshal(out, &im); code != 0 || err != nil || im.TopicID != idB.String() || im.NextOffset != 2000 {
		t.Fatalf("inspect manifest: exit %d, %+v, %v: %s", code, im, err, errs)
	}

	// replay --bucket over the whole time range.
	replayOut := filepath.Join(root, "replay.jsonl")
	from, to := time.UnixMilli(ts0-1000).UTC().Format(time.RFC3339), time.UnixMilli(ts0+60_000).UTC().Format(time.RFC3339)
	code, _, errs = runTiered(t, bin, "replay", "--bucket", url, "--topic", "orders", "--partition", "0", "--from", from, "--to", to, "--out", replayOut)
	if code != 0 {
		t.Fatalf("replay --bucket: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(replayOut)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew(t, "replay --bucket", parseJSONLines(t, "replay", data), 0, 2000)

	// The fetch service: HTTP and Kafka.
	addrs := testnet.LoopbackAddrs(t, 2)
	startProcess(t, bin, env, "fetch service started", "fetch", "--bucket", url, "--http", addrs[0], "--kafka", addrs[1])
	code, out, errs = runTiered(t, bin, "consume", "--fetch", "http://"+addrs[0], "--topic", "orders", "--partition", "0")
	if code != 0 {
		t.Fatalf("consume --fetch: exit %d: %s", code, errs)
	}
	onlyNew(t, "consume --fetch (HTTP)", parseJSONLines(t, "consume --fetch", out), 0, 2000)
	tresp, err := http.Get("http://" + addrs[0] + "/v1/topics")
	if err != nil {
		t.Fatal(err)
	}
	var tl struct {
		Topics []struct {
			Topic   string `json:"topic"`
			TopicID string `json:"topic_id"`
		} `json:"topics"`
	}
	err = json.NewDecoder(tresp.Body).Decode(&tl)
	tresp.Body.Close()
	if err != nil || len(tl.Topics) != 1 || tl.Topics[0].Topic != "orders" || tl.Topics[0].TopicID != idB.String() {
		t.Fatalf("HTTP /v1/topics: %+v, %v", tl, err)
	}
	resp, err := http.Get("http://" + addrs[0] + "/v1/topics/orders/partitions/0/records?offset=2500")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("HTTP read at offset 2500 (old range): status %d, want 416", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().At(0)}}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Topics["orders"].ID; got != kadm.TopicID(idB) {
		t.Fatalf("Kafka Metadata topic id %v, want %s", got, idB)
	}
	var kr []jsonRecord
	for len(kr) < 2000 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumed %d of 2000: %v", len(kr), ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("franz-go fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			kr = append(kr, jsonRecord{Offset: r.Offset, Value: &v})
		})
	}
	onlyNew(t, "franz-go (Kafka)", kr, 0, 2000)
	// Offset 2500 existed only in the old topic: out of range now.
	ocl, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().At(2500)}}), kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ocl.Close()
	var fetchErr error
	for fetchErr == nil {
		fs := ocl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no answer to a fetch at offset 2500")
		}
		fs.EachRecord(func(r *kgo.Record) { t.Fatalf("fetch at 2500 returned offset %d value %q", r.Offset, r.Value) })
		fs.EachError(func(_ string, _ int32, err error) { fetchErr = err })
	}
	if !errors.Is(fetchErr, kerr.OffsetOutOfRange) {
		t.Fatalf("fetch at offset 2500: %v, want OFFSET_OUT_OF_RANGE", fetchErr)
	}
	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		var got []jsonRecord
		for _, r := range runKcat(t, kcat, addrs[1], "orders", 0, "500") {
			v := string(r.Value)
			got = append(got, jsonRecord{Offset: r.Offset, Value: &v})
		}
		onlyNew(t, "kcat (Kafka)", got, 500, 2000)
	})

	// The old lineage goes after the retention; the new one stays whole.
	// The topic object keeps the removed lineage, with no partitions left,
	// so that a stale directory of its ID is still refused.
	waitFor(t, 60*time.Second, func() bool {
		s := topicObject(t, mc, bucket)
		return len(lineageObjects(t, mc, bucket, idA.String())) == 0 && s != nil &&
			len(s.Superseded) == 1 && s.Superseded[0].TopicID == idA.String() && s.Superseded[0].Partitions == 0
	})
	if gone := time.Since(supersededAt); gone < recreateRetention {
		t.Fatalf("old lineage removed %s after it was superseded, before the %s retention", gone, recreateRetention)
	}
	if !strings.Contains(sidecarLog.String(), "removed superseded topic lineage") {
		t.Fatalf("the sidecar did not log the removal:\n%s", sidecarLog.String())
	}
	code, out, errs = runTiered(t, bin, "consume", "--bucket", url, "--topic", "orders", "--partition", "0")
	if code != 0 {
		t.Fatalf("consume --bucket after the removal: exit %d: %s", code, errs)
	}
	onlyNew(t, "consume --bucket after the removal", parseJSONLines(t, "consume", out), 0, 2000)
}
