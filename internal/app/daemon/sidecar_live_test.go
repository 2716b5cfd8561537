package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/faultproxy"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
	"github.com/tiered/tiered/retention"
)

// liveBroker is one Kafka broker's log dir written by tiered's own engine
// (localtier: rolling, retention, the cleaner) with meta.properties, a
// replication-offset-checkpoint and a KRaft metadata log, as a sidecar
// finds a live broker's.
type liveBroker struct {
	id   int32
	dir  string
	logs *localtier.LogDir
	meta *kraftlog.Log
}

// liveCluster is three brokers whose partitions are replicated by writing
// the same batches to every replica (so their logs are byte for byte the
// same, as in-sync replicas' are), and the records written, by partition.
type liveCluster struct {
	t       *testing.T
	brokers []*liveBroker
	enc     record.Encoder
	// written holds every record appended, by "topic-partition", at the
	// offsets the logs gave them.
	written map[string][]testrecs.Rec
	ids     map[string]kraft.TopicID
}

func newLiveCluster(t *testing.T, root string) *liveCluster {
	t.Helper()
	c := &liveCluster{t: t, written: map[string][]testrecs.Rec{}, ids: map[string]kraft.TopicID{}}
	for id := int32(1); id <= 3; id++ {
		dir := filepath.Join(root, fmt.Sprintf("broker-%d", id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		props := fmt.Sprintf("#Kafka meta.properties\nversion=1\ncluster.id=tiered-live\nnode.id=%d\n", id)
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		b := &liveBroker{id: id, dir: dir}
		c.open(b)
		meta, err := kraftlog.Create(dir)
		if err != nil {
			t.Fatal(err)
		}
		b.meta = meta
		c.brokers = append(c.brokers, b)
	}
	var regs []kraft.Record
	for id := int32(1); id <= 3; id++ {
		regs = append(regs, kraftlog.RegisterBroker(id, 1))
	}
	c.metadata(regs...)
	t.Cleanup(func() {
		for _, b := range c.brokers {
			_ = b.logs.Close()
		}
	})
	return c
}

// open opens b's log dir with the engine.
func (c *liveCluster) open(b *liveBroker) {
	c.t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, b.dir, localtier.LogDirOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	b.logs = d
}

// metadata appends records to every broker's copy of the metadata log.
func (c *liveCluster) metadata(recs ...kraft.Record) {
	c.t.Helper()
	for _, b := range c.brokers {
		if _, err := b.meta.Append(recs...); err != nil {
			c.t.Fatal(err)
		}
	}
}

// createTopic creates topic on every broker (partition.metadata with a new
// topic ID) and registers it in the metadata with the given leaders.
func (c *liveCluster) createTopic(name string, leaders []int32, overrides map[string]string) {
	c.t.Helper()
	var id kraft.TopicID
	if _, err := rand.Read(id[:]); err != nil {
		c.t.Fatal(err)
	}
	c.ids[name] = id
	ov := map[string]string{"internal.segment.bytes": "6144", "index.interval.bytes": "512"}
	for k, v := range overrides {
		ov[k] = v
	}
	for _, b := range c.brokers {
		tp, err := b.logs.CreateTopic(name, len(leaders), ov)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, l := range tp.Partitions {
			if err := localtier.WritePartitionMetadata(vfs.Default, l.Dir(), localtier.TopicID(id)); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	recs := []kraft.Record{kraftlog.Topic(name, id)}
	for p, leader := range leaders {
		recs = append(recs, kraftlog.Partition(id, int32(p), leader, 0, 1, 2, 3))
	}
	for k, v := range overrides {
		if !strings.HasPrefix(k, "internal.") {
			recs = append(recs, kraftlog.TopicConfig(name, k, kraftlog.Value(v)))
		}
	}
	c.metadata(recs...)
}

// deleteTopic removes topic from the metadata and from every broker's log
// dir (as a broker does once the deletion is applied).
func (c *liveCluster) deleteTopic(name string) {
	c.t.Helper()
	c.metadata(kraftlog.RemoveTopic(c.ids[name]))
	for _, b := range c.brokers {
		if err := b.logs.Close(); err != nil {
			c.t.Fatal(err)
		}
		entries, err := os.ReadDir(b.dir)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), name+"-") {
				if err := os.RemoveAll(filepath.Join(b.dir, e.Name())); err != nil {
					c.t.Fatal(err)
				}
			}
		}
		if err := os.Remove(filepath.Join(b.dir, ".tiered", "topics", name+".json")); err != nil && !os.IsNotExist(err) {
			c.t.Fatal(err)
		}
		// The engine loads every partition directory it finds: the
		// metadata partition (kraftlog's) steps aside while it opens.
		meta, aside := filepath.Join(b.dir, kraft.MetadataDir), filepath.Join(b.dir, ".metadata-aside")
		if err := os.Rename(meta, aside); err != nil {
			c.t.Fatal(err)
		}
		c.open(b)
		if err := os.Rename(aside, meta); err != nil {
			c.t.Fatal(err)
		}
	}
	for k := range c.written {
		if strings.HasPrefix(k, name+"-") {
			delete(c.written, k)
		}
	}
}

// moveLeader makes leader the leader of topic's partition.
func (c *liveCluster) moveLeader(topic string, partition, leader int32) {
	c.t.Helper()
	c.metadata(kraftlog.LeaderChange(c.ids[topic], partition, leader))
}

// produce appends n records (keys from key, values tagged) with timestamps
// from ts on to every replica of topic-partition, in batches of 10.
func (c *liveCluster) produce(topic string, partition int32, n int, ts int64, key func(i int) string, tag string) {
	c.t.Helper()
	k := fmt.Sprintf("%s-%d", topic, partition)
	for start := 0; start < n; start += 10 {
		var rs []record.Record
		var recs []testrecs.Rec
		for i := start; i < min(start+10, n); i++ {
			r := testrecs.Rec{Timestamp: ts + int64(i), Key: []byte(key(i)),
				Value: []byte(fmt.Sprintf("%s-%d %s", tag, len(c.written[k])+len(recs), strings.Repeat("v", i%50)))}
			rs = append(rs, record.Record{Offset: int64(len(rs)), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value})
			recs = append(recs, r)
		}
		b, err := c.enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), rs)
		if err != nil {
			c.t.Fatal(err)
		}
		var first int64 = -1
		for _, br := range c.brokers {
			l, err := br.logs.Partition(topic, partition)
			if err != nil {
				c.t.Fatal(err)
			}
			info, err := l.Append(b)
			if err != nil {
				c.t.Fatal(err)
			}
			if first >= 0 && info.FirstOffset != first {
				c.t.Fatalf("replicas diverged: %s at %d and %d", k, first, info.FirstOffset)
			}
			first = info.FirstOffset
		}
		for i := range recs {
			recs[i].Offset = first + int64(i)
		}
		c.written[k] = append(c.written[k], recs...)
	}
}

// commit rolls every partition and publishes the high watermarks (every
// offset written is committed) and the other checkpoints.
func (c *liveCluster) commit() {
	c.t.Helper()
	for _, b := range c.brokers {
		hws := map[checkpoint.TopicPartition]int64{}
		for _, name := range b.logs.Topics() {
			tp, _ := b.logs.Topic(name)
			for i, l := range tp.Partitions {
				if l.LogEndOffset() > l.Segments()[len(l.Segments())-1].BaseOffset {
					if err := l.Roll(); err != nil {
						c.t.Fatal(err)
					}
				}
				hws[checkpoint.TopicPartition{Topic: name, Partition: int32(i)}] = l.LogEndOffset()
			}
		}
		if err := b.logs.Checkpoint(); err != nil {
			c.t.Fatal(err)
		}
		if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(b.dir, checkpoint.ReplicationOffsetFile), hws); err != nil {
			c.t.Fatal(err)
		}
	}
}

// liveSidecarConfig is the policy file the live test's sidecars share (the
// README's sidecar section shows the same shape).
const liveSidecarConfig = `sidecar:
  deleted_topic_retention: 0s
  topics:
    - {match: "orders", retention.ms: 3600000}
    - {match: "users"}
    - {match: "events"}
uploader:
  interval: 50ms
  gc_grace: 1h
`

// startLiveSidecar runs the sidecar of broker b over the bucket at url
// until the test ends.
func startLiveSidecar(t *testing.T, b *liveBroker, url, cfgFile string) *Sidecar {
	t.Helper()
	return startLiveSidecarLogging(t, b, url, cfgFile, testLogger(t, fmt.Sprintf("sidecar-%d", b.id)))
}

func startLiveSidecarLogging(t *testing.T, b *liveBroker, url, cfgFile string, logger *slog.Logger) *Sidecar {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessSidecar, File: cfgFile,
		Flags: map[string]string{"kafka-log-dir": b.dir, "bucket": url}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSidecar(context.Background(), SidecarOptions{Config: cfg, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Run)
	return s
}

// testLogger writes WARN and above to the test log, named.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("process", name)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// gatheredLabels reports whether s's registry has a series of name with
// the labels.
func gatheredLabels(t *testing.T, s *Sidecar, name string, labels map[string]string) bool {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return true
		}
	}
	return false
}

// readRemote reads [start, end) of topic-partition from the bucket.
func readRemote(t *testing.T, b objstore.Bucket, topic string, p int32, start, end int64) []testrecs.Rec {
	t.Helper()
	ctx := context.Background()
	rl, err := remotelog.OpenRemoteLog(ctx, b, "", topic, p, remotelog.ReaderOptions{})
	if err != nil {
		return nil
	}
	var out []testrecs.Rec
	var dec record.Decoder
	for off := start; off < end; {
		res, err := rl.Read(ctx, off, 1<<20)
		if err != nil || len(res.Data) == 0 {
			return out
		}
		recs, next := decodeBatches(t, &dec, res.Data, off, end)
		out = append(out, recs...)
		off = next
	}
	return out
}

// decodeBatches decodes the records of data (whole batches) in [from,
// end), and returns them with the offset after the last batch.
func decodeBatches(t *testing.T, dec *record.Decoder, data []byte, from, end int64) ([]testrecs.Rec, int64) {
	t.Helper()
	var out []testrecs.Rec
	next := from
	for len(data) > 0 {
		n := 12 + int(record.Batch(data).Length())
		recs, err := dec.Records(record.Batch(data[:n]))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Offset >= from && r.Offset < end {
				out = append(out, testrecs.Rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value})
			}
		}
		next = record.Batch(data[:n]).LastOffset() + 1
		data = data[n:]
	}
	return out, next
}

// startLiveFetch runs a fetch service over the bucket at url until the test
// ends and returns its Kafka address.
func startLiveFetch(t *testing.T, url string) string {
	t.Helper()
	return startLiveFetchService(t, url).KafkaAddr()
}

// startLiveFetchService runs a fetch service over the bucket at url until
// the test ends.
func startLiveFetchService(t *testing.T, url string) *Fetch {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessFetch,
		Flags: map[string]string{"bucket": url, "kafka": "127.0.0.1:0", "http": "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFetch(context.Background(), FetchOptions{Config: cfg, Logger: testLogger(t, "fetch")})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, f.Run)
	return f
}

// remoteRange reads the served range of topic-partition from the bucket
// (through the lineage the topic object names).
func remoteRange(t *testing.T, b objstore.Bucket, topic string, p int32) (start, end int64) {
	t.Helper()
	rl, err := remotelog.OpenRemoteLog(context.Background(), b, "", topic, p, remotelog.ReaderOptions{})
	if err != nil {
		return -1, -1
	}
	return rl.LogStartOffset(), rl.LogEndOffset()
}

// liveBucket makes a MinIO bucket and a fault proxy in front of it (with
// rules), and returns the bucket's URL through the proxy, for the
// sidecars, and a direct handle on it, for the test.
func liveBucket(t *testing.T, rules ...*faultproxy.Rule) (srv *testminio.Server, bucket string, proxy *faultproxy.Proxy, url string, direct objstore.Bucket) {
	t.Helper()
	srv = testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	bucket = srv.NewBucket(t)
	proxy, err := faultproxy.New(srv.Endpoint, faultproxy.Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	url = fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1&path_style=true", bucket, proxy.URL())
	if direct, err = objstore.Open(context.Background(), srv.URL(bucket, "")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	return srv, bucket, proxy, url, direct
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// TestSidecarLiveBrokers is the live-broker test: tiered's own engine
// writes three broker log dirs (replicated partitions, rolling, the
// broker's retention deleting what is tiered, a cleaner rewriting a
// compacted topic) with a KRaft metadata log each, while one sidecar per
// log dir uploads over one MinIO bucket — each partition by its leader
// only, a leader change moving it — applies the policy's remote retention,
// and sees a topic deleted and re-created. Every record of the served
// ranges is read back exactly through the fetch service (Kafka), no
// object is deleted twice, and nothing uploaded is lost but what remote
// retention removed.
func TestSidecarLiveBrokers(t *testing.T) {
	// Every request to MinIO goes through a proxy that records deletions.
	var mu sync.Mutex
	deletes := map[string]int{}
	srv, bucket, _, url, direct := liveBucket(t, &faultproxy.Rule{Match: func(r *http.Request) bool {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deletes[r.URL.Path]++
			mu.Unlock()
		}
		return false
	}})

	root := t.TempDir()
	c := newLiveCluster(t, root)
	c.createTopic("orders", []int32{1, 2, 3}, nil)
	c.createTopic("users", []int32{2}, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	c.createTopic("events", []int32{3}, nil)
	cfgFile := filepath.Join(root, "sidecar.yaml")
	if err := os.WriteFile(cfgFile, []byte(liveSidecarConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var sidecars []*Sidecar
	for _, b := range c.brokers {
		sidecars = append(sidecars, startLiveSidecar(t, b, url, cfgFile))
	}

	now := time.Now().UnixMilli()
	old := now - 3*3600_000 // older than the remote retention.ms (1h)
	seq := func(i int) string { return fmt.Sprintf("k%d", i) }
	for p := int32(0); p < 3; p++ {
		c.produce("orders", p, 150, old, seq, "old")
		c.commit() // the old records end in their own segments
		c.produce("orders", p, 200, now, seq, "new")
	}
	userKey := func(i int) string { return fmt.Sprintf("user-%d", i%17) }
	c.produce("users", 0, 300, now, userKey, "u")
	c.produce("events", 0, 120, now, seq, "old-events")
	c.commit()
	caughtUp := func(topic string, p int32) func() bool {
		return func() bool {
			want := c.written[fmt.Sprintf("%s-%d", topic, p)]
			_, end := remoteRange(t, direct, topic, p)
			return len(want) > 0 && end == want[len(want)-1].Offset+1
		}
	}
	for p := int32(0); p < 3; p++ {
		waitFor(t, 20*time.Second, fmt.Sprintf("orders-%d uploaded", p), caughtUp("orders", p))
	}
	waitFor(t, 20*time.Second, "users-0 uploaded", caughtUp("users", 0))
	waitFor(t, 20*time.Second, "events-0 uploaded", caughtUp("events", 0))

	// Remote retention (orders: retention.ms 1h) removes the old segments.
	for p := int32(0); p < 3; p++ {
		waitFor(t, 20*time.Second, fmt.Sprintf("orders-%d remote retention", p), func() bool {
			start, _ := remoteRange(t, direct, "orders", p)
			return start >= 150
		})
	}

	// Leadership: each sidecar lists only the partitions its broker leads.
	leads := func(s *Sidecar, topic string, p int32) bool {
		return gatheredLabels(t, s, "tiered_uploader_partition_lag_bytes", map[string]string{"topic": topic, "partition": fmt.Sprint(p)})
	}
	for i, s := range sidecars {
		for p := int32(0); p < 3; p++ {
			if got, want := leads(s, "orders", p), int(p) == i; got != want {
				t.Errorf("sidecar %d lists orders-%d: %v, want %v", i+1, p, got, want)
			}
		}
	}
	// The leader of orders-0 moves from broker 1 to broker 2; broker 2's
	// sidecar uploads what follows.
	c.moveLeader("orders", 0, 2)
	c.produce("orders", 0, 100, now, seq, "after-move")
	c.commit()
	waitFor(t, 20*time.Second, "orders-0 uploaded by its new leader", caughtUp("orders", 0))
	waitFor(t, 5*time.Second, "sidecar 1 drops orders-0", func() bool { return !leads(sidecars[0], "orders", 0) })
	if !leads(sidecars[1], "orders", 0) {
		t.Error("sidecar 2 does not list orders-0 after the leader moved to broker 2")
	}

	// The broker's retention deletes local segments once they are tiered;
	// the cleaner rewrites the compacted topic on every replica.
	c.produce("users", 0, 300, now+1000, userKey, "u2")
	c.commit()
	for _, b := range c.brokers {
		for p := int32(0); p < 3; p++ {
			l, err := b.logs.Partition("orders", p)
			if err != nil {
				t.Fatal(err)
			}
			_, end := remoteRange(t, direct, "orders", p)
			if _, err := l.DeleteSegments(min(end, l.Segments()[len(l.Segments())-1].BaseOffset)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := compactor.RunOnce(context.Background(), b.logs, compactor.PassOptions{Topic: "users", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	c.commit()
	leaderUsers, _ := c.brokers[1].logs.Partition("users", 0)
	wantUsers := testrecs.FromLog(t, leaderUsers)
	// A compacted topic's remote copy is a compaction of what was written:
	// every record served is the one written at its offset, and every
	// record the leader's cleaner kept is served (uncleaned older copies
	// may remain where the cleaner emptied whole segments: nothing to
	// upload replaces them, as Kafka's cleaner guarantees only the latest
	// value of each key).
	waitFor(t, 20*time.Second, "users-0 cleaned segments uploaded", func() bool {
		start, end := remoteRange(t, direct, "users", 0)
		return end == c.written["users-0"][len(c.written["users-0"])-1].Offset+1 && start == 0
	})
	checkCompaction(t, readRemote(t, direct, "users", 0, 0, c.written["users-0"][len(c.written["users-0"])-1].Offset+1),
		c.written["users-0"], wantUsers)

	// events is deleted and re-created under the same name.
	c.deleteTopic("events")
	c.createTopic("events", []int32{3}, nil)
	c.produce("events", 0, 80, now, seq, "NEW")
	c.commit()
	waitFor(t, 20*time.Second, "re-created events-0 uploaded", caughtUp("events", 0))

	// Every committed record of every served range reads back exactly
	// through the fetch service.
	addr := startLiveFetch(t, srv.URL(bucket, ""))
	for p := int32(0); p < 3; p++ {
		// Remote retention removed the old records' segments and nothing
		// newer: the served range starts exactly after them.
		if start, _ := remoteRange(t, direct, "orders", p); start != 150 {
			t.Errorf("orders-%d: remote log start %d, want 150 (only the segments older than retention.ms go)", p, start)
		}
		c.checkServed(t, direct, addr, "orders", p, c.written[fmt.Sprintf("orders-%d", p)])
	}
	start, end := remoteRange(t, direct, "users", 0)
	served := testrecs.ConsumeKgo(t, addr, "users", 0, kgo.NewOffset().At(start), len(readRemote(t, direct, "users", 0, start, end)))
	checkCompaction(t, served, c.written["users-0"], wantUsers)
	c.checkServed(t, direct, addr, "events", 0, c.written["events-0"])
	mu.Lock()
	dataDeletes := 0
	for k, n := range deletes {
		if n > 1 {
			t.Errorf("%s deleted %d times", k, n)
		}
		if strings.Contains(k, "/data/") {
			dataDeletes++
		}
	}
	mu.Unlock()
	if dataDeletes == 0 {
		t.Fatalf("no data object was deleted (remote retention, replaced segments, the old lineage): %v", deletes)
	}
	t.Logf("%d objects deleted, each once", len(deletes))
	rep, err := remotetier.VerifyBucket(context.Background(), direct, remotetier.DefaultVerifyOptions())
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("bucket verify: %v %+v", err, rep.Problems)
	}
}

// checkCompaction checks got is a compaction of written: each record the
// one written at its offset, in offset order, and every record of kept
// (the leader's cleaned log) among them.
func checkCompaction(t *testing.T, got, written, kept []testrecs.Rec) {
	t.Helper()
	at := map[int64]testrecs.Rec{}
	for _, r := range written {
		at[r.Offset] = r
	}
	seen := map[int64]bool{}
	prev := int64(-1)
	for _, r := range got {
		w, ok := at[r.Offset]
		if !ok || r.Offset <= prev || !sameRecs([]testrecs.Rec{r}, []testrecs.Rec{w}) {
			t.Fatalf("served record %v is not the one written at its offset (%v), or out of order", r, w)
		}
		seen[r.Offset], prev = true, r.Offset
	}
	for _, r := range kept {
		if !seen[r.Offset] {
			t.Fatalf("record %v the cleaner kept is not served (%d served)", r, len(got))
		}
	}
}

// checkServed consumes topic-partition's served range through the fetch
// service's Kafka listener at addr and compares it with want's records in
// that range.
func (c *liveCluster) checkServed(t *testing.T, b objstore.Bucket, addr, topic string, p int32, want []testrecs.Rec) {
	t.Helper()
	start, end := remoteRange(t, b, topic, p)
	exp := within(want, start, end)
	if len(exp) == 0 {
		t.Fatalf("%s-%d: nothing served in [%d, %d)", topic, p, start, end)
	}
	got := testrecs.ConsumeKgo(t, addr, topic, p, kgo.NewOffset().At(start), len(exp))
	testrecs.Same(t, got, exp, false)
}

// within keeps the records in [start, end).
func within(recs []testrecs.Rec, start, end int64) []testrecs.Rec {
	var out []testrecs.Rec
	for _, r := range recs {
		if r.Offset >= start && r.Offset < end {
			out = append(out, r)
		}
	}
	return out
}

func sameRecs(a, b []testrecs.Rec) bool {
	return slices.EqualFunc(a, b, func(x, y testrecs.Rec) bool {
		return x.Offset == y.Offset && x.Timestamp == y.Timestamp && testrecs.SameBytes(x.Key, y.Key) && testrecs.SameBytes(x.Value, y.Value)
	})
}

// TestSidecarUploadStalledLoss: the sidecar's uploads fail (a fault proxy
// in front of MinIO refuses every PUT) while the broker's own retention
// (retention.bytes) deletes segments that were never uploaded. Once the
// bucket answers again the hole is reported — a gap in the manifest,
// tiered_uploader_segments_lost_total, an ERROR line — and the fetch
// service answers a read inside it as Kafka answers a deleted range
// (OFFSET_OUT_OF_RANGE; HTTP 416), serving the offsets on both sides.
func TestSidecarUploadStalledLoss(t *testing.T) {
	srv, bucket, proxy, url, direct := liveBucket(t)

	root := t.TempDir()
	c := newLiveCluster(t, root)
	const retBytes = 10000
	c.createTopic("payments", []int32{1}, map[string]string{"retention.bytes": fmt.Sprint(retBytes)})
	cfgFile := filepath.Join(root, "sidecar.yaml")
	if err := os.WriteFile(cfgFile, []byte("sidecar:\n  topics:\n    - {match: \"payments\"}\nuploader:\n  interval: 50ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs fetchkit.LogCapture
	s := startLiveSidecarLogging(t, c.brokers[0], url, cfgFile, logs.Logger())
	now := time.Now().UnixMilli()
	seq := func(i int) string { return fmt.Sprintf("p%d", i) }
	c.produce("payments", 0, 60, now, seq, "before")
	c.commit()
	waitFor(t, 20*time.Second, "first segments uploaded", func() bool {
		_, end := remoteRange(t, direct, "payments", 0)
		return end == c.written["payments-0"][len(c.written["payments-0"])-1].Offset+1
	})
	_, uploadedEnd := remoteRange(t, direct, "payments", 0)
	if got := gathered(t, s, "tiered_uploader_segments_lost_total"); got != 0 {
		t.Fatalf("segments_lost_total %v before any loss", got)
	}

	// The bucket stops taking writes; the broker keeps writing and its
	// retention.bytes deletes the oldest segments, uploaded or not.
	proxy.SetRules(&faultproxy.Rule{Match: faultproxy.Methods(http.MethodPut), Kind: faultproxy.InternalError})
	c.produce("payments", 0, 400, now+1000, seq, "during")
	c.commit()
	waitFor(t, 10*time.Second, "the stalled sidecar reports its lag", func() bool {
		return gatheredLabels(t, s, "tiered_uploader_partition_lag_bytes", map[string]string{"topic": "payments"}) &&
			gathered(t, s, "tiered_uploader_lag_bytes") > 0
	})
	for _, b := range c.brokers {
		if _, err := retention.RunOnce(context.Background(), b.logs, retention.PassOptions{Topic: "payments"}); err != nil {
			t.Fatal(err)
		}
	}
	c.commit()
	l, _ := c.brokers[0].logs.Partition("payments", 0)
	lostTo := l.LogStartOffset()
	if lostTo <= uploadedEnd {
		t.Fatalf("test setup: the broker's retention kept everything not uploaded (log start %d, uploaded to %d)", lostTo, uploadedEnd)
	}
	proxy.SetRules()

	var gap manifest.Gap
	waitFor(t, 20*time.Second, "the gap recorded in the manifest", func() bool {
		rl, err := remotelog.OpenRemoteLog(context.Background(), direct, "", "payments", 0, remotelog.ReaderOptions{})
		if err != nil {
			return false
		}
		gaps := rl.Manifest().Gaps
		if len(gaps) == 1 {
			gap = gaps[0]
		}
		return len(gaps) == 1
	})
	if gap.BaseOffset != uploadedEnd || gap.LastOffset != lostTo-1 {
		t.Fatalf("gap [%d, %d], want [%d, %d]", gap.BaseOffset, gap.LastOffset, uploadedEnd, lostTo-1)
	}
	if got := gathered(t, s, "tiered_uploader_segments_lost_total"); got < 1 {
		t.Fatalf("tiered_uploader_segments_lost_total = %v after the loss", got)
	}
	if lines := logs.Lines("level=ERROR", "data loss", "topic=payments", fmt.Sprintf("base_offset=%d", uploadedEnd)); len(lines) != 1 {
		t.Fatalf("ERROR lines for the loss: %q\nall logs:\n%s", lines, logs.String())
	}
	waitFor(t, 20*time.Second, "the rest uploaded", func() bool {
		_, end := remoteRange(t, direct, "payments", 0)
		return end == c.written["payments-0"][len(c.written["payments-0"])-1].Offset+1
	})

	f := startLiveFetchService(t, srv.URL(bucket, ""))
	cl := fetchkit.ByNameClient(t, f.KafkaAddr())
	for _, tc := range []struct {
		off  int64
		code int16
	}{{uploadedEnd - 1, 0}, {uploadedEnd, kerr.OffsetOutOfRange.Code}, {lostTo - 1, kerr.OffsetOutOfRange.Code}, {lostTo, 0}} {
		p := fetchkit.FetchOne(t, cl, "payments", 0, tc.off)
		if p.ErrorCode != tc.code || (tc.code == 0) != (len(p.RecordBatches) > 0) {
			t.Errorf("Kafka fetch at %d: %v with %d bytes, want %v", tc.off, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), kerr.ErrorForCode(tc.code))
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/topics/payments/partitions/0/records?offset=%d", f.HTTPAddr(), uploadedEnd))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || !strings.Contains(string(body), "OFFSET_OUT_OF_RANGE") {
		t.Fatalf("HTTP read inside the hole: %d %s", resp.StatusCode, body)
	}
	// What was uploaded on both sides of the hole reads back exactly.
	all := c.written["payments-0"]
	after := within(all, lostTo, all[len(all)-1].Offset+1)
	testrecs.Same(t, testrecs.ConsumeKgo(t, f.KafkaAddr(), "payments", 0, kgo.NewOffset().At(lostTo), len(after)), after, false)
	// Below it, a consumer reads up to the hole and is then told
	// OFFSET_OUT_OF_RANGE (franz-go resets and says it lost records),
	// never handed the records after it as if they followed.
	var dec record.Decoder
	got, _ := decodeBatches(t, &dec, fetchkit.FetchOne(t, cl, "payments", 0, 0).RecordBatches, 0, uploadedEnd)
	testrecs.Same(t, got, within(all, 0, uploadedEnd), false)
}
