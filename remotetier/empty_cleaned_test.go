package remotetier

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Ranges the log cleaner empties: every record of a segment superseded,
// the cleaner leaves an empty segment file, which no source offers for
// upload. The remote copy of that range must go too, or the remote tier
// keeps serving the records the cleaner dropped — and, once a later
// cleaning drops the key's tombstone, a deleted key's last value.

// ecAppend appends one batch of one record (nil value: a tombstone).
func ecAppend(t testing.TB, l *localtier.Log, key string, value []byte) {
	t.Helper()
	var e record.Encoder
	data, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None),
		[]record.Record{{Timestamp: upNow.UnixMilli(), Key: []byte(key), Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(data); err != nil {
		t.Fatal(err)
	}
}

// ecRecord is one record as a consumer of the remote tier sees it.
type ecRecord struct {
	Offset    int64
	Key       string
	Value     string // its first bytes
	Tombstone bool
}

func (r ecRecord) String() string {
	if r.Tombstone {
		return fmt.Sprintf("%d:%s=<tombstone>", r.Offset, r.Key)
	}
	return fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value)
}

// ecConsume reads a partition of the remote tier through RemoteLog (the
// reader under the fetch service) from its log start to its end, as a
// consumer from the earliest offset: every record, and the table it
// builds (the last value of each key, deleted keys absent).
func ecConsume(t testing.TB, bkt objstore.BucketReader, topic string) ([]ecRecord, map[string]string) {
	t.Helper()
	ctx := context.Background()
	rl, err := remotelog.OpenRemoteLog(ctx, bkt, "", topic, 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var recs []ecRecord
	table := map[string]string{}
	var dec record.Decoder
	off := int64(-1)
	for {
		from := max(off, 0)
		res, err := rl.Read(ctx, from, 1<<20)
		if err != nil {
			t.Fatalf("remote read at %d: %v", from, err)
		}
		if off < 0 {
			off = res.LogStartOffset
			continue
		}
		if len(res.Data) == 0 {
			return recs, table
		}
		it := record.NewIter(res.Data)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			rs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Offset < off {
					continue
				}
				er := ecRecord{Offset: r.Offset, Key: string(r.Key), Tombstone: r.Value == nil}
				if r.Value != nil {
					er.Value = string(r.Value[:min(len(r.Value), 2)])
					table[er.Key] = er.Value
				} else {
					delete(table, er.Key)
				}
				recs = append(recs, er)
			}
			off = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// ecLog makes the review's scenario in tiered's own log dir: a compacted
// topic "c" whose segment [0, 1) holds K=v1 and [1, 3) K's tombstone and
// X=x1 (too big to be cleaned in one group with it), then an active
// segment holding Y.
func ecLog(t testing.TB) (*localtier.LogDir, *localtier.Log) {
	t.Helper()
	d, l := ecTopic(t)
	ecAppend(t, l, "K", ecPad("v1", 'a'))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	ecAppend(t, l, "K", nil)
	ecAppend(t, l, "X", ecPad("x1", 'b'))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	ecAppend(t, l, "Y", []byte("y1"))
	return d, l
}

// ecTopic makes compacted topic "c" (segment.bytes 1000, everything
// cleanable, delete.retention.ms 1s) in a new log dir: its partition 0.
func ecTopic(t testing.TB) (*localtier.LogDir, *localtier.Log) {
	t.Helper()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "c", 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0",
		"internal.segment.bytes", "1000", "delete.retention.ms", "1000")
	return d, upPartition(t, d, "c", 0)
}

// ecPad is v padded to 602 bytes with c: two such records do not fit one
// segment.
func ecPad(v string, c byte) []byte { return append([]byte(v), bytes.Repeat([]byte{c}, 600)...) }

func ecClean(t testing.TB, d *localtier.LogDir, now time.Time) {
	t.Helper()
	if _, err := compactor.RunOnce(context.Background(), d, compactor.PassOptions{Force: true,
		Config: compactor.Config{Now: func() time.Time { return now }}}); err != nil {
		t.Fatal(err)
	}
}

// ecSource is the source of a mode over d: serve reads tiered's own log
// dir, sidecar reads it as a broker's log dir (its high watermarks
// published in replication-offset-checkpoint before each pass, as a
// broker writes them; the cleaner-offset-checkpoint is the one the
// cleaner wrote).
func ecSource(t testing.TB, mode string, d *localtier.LogDir) (Source, func()) {
	t.Helper()
	if mode == "serve" {
		return NewLocalSource(d, nil), func() {}
	}
	view, err := localtier.OpenBrokerView(vfs.Default, d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return NewBrokerSource(view, nil), func() { upBrokerHWs(t, d) }
}

func ecHas(recs []ecRecord, s string) bool {
	return slices.ContainsFunc(recs, func(r ecRecord) bool { return r.String() == s })
}

// TestEmptiedSegmentNotServed: the cleaner empties the segment holding
// K=v1 (its tombstone follows in the next segment): its remote copy is
// removed by the next upload pass, leaving a compaction gap (a read there
// gets the next batch). Then segment.bytes is lowered, so the next
// cleaning cannot merge the empty segment with its neighbour, and it
// drops the tombstone (delete.retention.ms passed): the remote tier must
// not serve K=v1 with no tombstone after it. Before the fix the empty
// segment was never offered (sources skip empty segments), the remote
// tier kept the uncleaned copy of [0, 0] for ever and, after the second
// cleaning, served K=v1 as live: a deleted key came back, in both modes.
func TestEmptiedSegmentNotServed(t *testing.T) {
	for _, mode := range []string{"serve", "sidecar"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			d, l := ecLog(t)
			src, publish := ecSource(t, mode, d)
			mem := objstore.NewMemory()
			u := upUploader(t, mem, src, Options{})
			pass := func(what string) Report {
				t.Helper()
				publish()
				rep, err := u.RunOnce(ctx)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return rep
			}
			if rep := pass("first pass"); rep.UploadedSegments != 2 {
				t.Fatalf("first pass: %+v", rep)
			}
			if recs, _ := ecConsume(t, mem, "c"); !ecHas(recs, "0:K=v1") {
				t.Fatalf("before cleaning: %v", recs)
			}

			ecClean(t, d, upNow)
			if segs := l.Segments(); segs[0].Size != 0 {
				t.Fatalf("the cleaner left segment 0 with %d bytes; the test needs it empty", segs[0].Size)
			}
			rep := pass("pass after the first cleaning")
			if rep.ReplacedSegments != 2 {
				t.Errorf("pass after the first cleaning: %d replaced, want 2 (segment 1 cleaned, [0, 0] emptied): %+v",
					rep.ReplacedSegments, rep.Partitions)
			}
			recs, _ := ecConsume(t, mem, "c")
			if ecHas(recs, "0:K=v1") || !ecHas(recs, "1:K=<tombstone>") {
				t.Errorf("after the first cleaning the remote tier serves %v; want K's tombstone and not K=v1", recs)
			}
			m := upLoad(t, mem, "c", 0)
			if segs := upAllSegments(t, mem, m); len(segs) != 1 || segs[0].BaseOffset != 1 || m.LogStartOffset != 0 {
				t.Errorf("manifest: log start %d, %d segments, the first at %d; want log start 0 and segment [1, 2] only",
					m.LogStartOffset, len(segs), segs[0].BaseOffset)
			}
			rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "c", 0, remotelog.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := rl.Read(ctx, 0, 1<<20)
			if err != nil {
				t.Fatalf("read in the emptied range: %v", err)
			}
			if it := record.NewIter(res.Data); func() bool { b, ok := it.Next(); return !ok || b.BaseOffset() != 1 }() {
				t.Error("a read at 0 does not get the batch at 1 (the next batch in a compaction gap)")
			}

			if err := d.AlterTopic("c", map[string]string{"internal.segment.bytes": "700"}, nil); err != nil {
				t.Fatal(err)
			}
			ecClean(t, d, upNow.Add(time.Hour))
			if segs := l.Segments(); segs[0].Size != 0 || segs[0].BaseOffset != 0 {
				t.Fatalf("the second cleaning merged the empty segment (%+v); the test needs it alone", segs[0])
			}
			pass("pass after the second cleaning")
			recs, table := ecConsume(t, mem, "c")
			if _, ok := table["K"]; ok || ecHas(recs, "0:K=v1") {
				t.Fatalf("the remote tier serves deleted key K: records %v", recs)
			}
			if table["X"] != "x1" || len(table) != 1 {
				t.Fatalf("remote table %v, want X=x1 alone (Y is in the active segment)", table)
			}
			upCheckConsistent(t, mem, "c", 0)
			if vr, err := VerifyBucket(ctx, mem, DefaultVerifyOptions()); err != nil || len(vr.Problems) != 0 {
				t.Fatalf("bucket verify: %v, problems %+v", err, vr.Problems)
			}
			if rep := pass("last pass"); rep.UploadedSegments+rep.ReplacedSegments != 0 || rep.Commits != 0 {
				t.Fatalf("a further pass changed the remote tier: %+v", rep)
			}
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}

// keyedBatch is a batch of n records from base (keys k<offset>).
func keyedBatch(t testing.TB, base int64, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: base + int64(i), Timestamp: upNow.UnixMilli(), Key: fmt.Appendf(nil, "k%d", base+int64(i)), Value: []byte("v")}
	}
	var enc record.Encoder
	data, err := enc.AppendBatch(nil, record.NewBatchSpec(base, codec.None), recs)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// cleanedPartition is partition c-0 of a compacted topic, cleaned and
// committed up to 100 at its source.
func cleanedPartition() Partition {
	return Partition{Topic: "c", Partition: 0, HighWatermark: 100, Compacted: true, CleanedUpTo: 100,
		IndexIntervalBytes: DefaultIndexIntervalBytes, SourceRetentionMs: -1, SourceRetentionBytes: -1}
}

// TestEmptiedRangeSpanningSegments: Kafka's cleaner cleans a group of
// several segments into one and, when no record of the group survives,
// swaps in an empty segment at the group's base (it writes no batch to
// keep the offsets, as tiered's engine does): the empty segment answers
// for every offset up to the next segment's base. The committed segments
// inside are removed, in one commit with the append that moves the
// committed end past them when they end there (a replace never moves the
// end back).
func TestEmptiedRangeSpanningSegments(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	part := cleanedPartition()
	src := &memSource{p: part, logs: map[int64][]byte{}}
	src.p.Segments = []SegmentMeta{
		src.segment(0, 10, 10, keyedBatch(t, 0, 10)),
		src.segment(10, 20, 20, keyedBatch(t, 10, 10)),
		src.segment(20, 30, 30, keyedBatch(t, 20, 10)),
	}
	u := upUploader(t, mem, src, Options{})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 3 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	// [0, 30) cleaned to nothing: one empty segment up to the active one
	// at 30. Removing the committed segments would move the end back: wait.
	src.p.Segments = nil
	src.p.Emptied = []SegmentMeta{{BaseOffset: 0, NextOffset: 0, NextBase: 30, MaxTimestamp: -1}}
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 {
		t.Fatalf("pass with the committed end emptied: %+v, %v", rep, err)
	}
	if m := upLoad(t, mem, "c", 0); m.NextOffset() != 30 || m.SegmentCount() != 3 {
		t.Fatalf("committed end %d with %d segments, want 30 with 3", m.NextOffset(), m.SegmentCount())
	}
	// A segment [30, 40) rolls: appended and the range removed, one commit.
	src.p.Segments = []SegmentMeta{src.segment(30, 40, 40, keyedBatch(t, 30, 10))}
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.Commits != 1 || rep.UploadedSegments != 1 || rep.ReplacedSegments != 1 {
		t.Fatalf("pass after the roll: %+v, %v", rep, err)
	}
	if c := rep.Partitions[0].Committed; !slices.ContainsFunc(c, func(s CommittedSegment) bool {
		return s.Emptied && s.BaseOffset == 0 && s.LastOffset == 29
	}) {
		t.Errorf("report: %+v, want [0, 29] emptied", c)
	}
	m := upLoad(t, mem, "c", 0)
	if segs := upAllSegments(t, mem, m); len(segs) != 1 || segs[0].BaseOffset != 30 || m.NextOffset() != 40 {
		t.Fatalf("segments %+v, end %d; want [30, 39] alone", segs, m.NextOffset())
	}
	recs, _ := ecConsume(t, mem, "c")
	if len(recs) != 10 || recs[0].Offset != 30 {
		t.Fatalf("the remote tier serves %v, want offsets 30..39", recs)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestEmptiedRangeKeptUnlessCleaned: an empty segment is no evidence
// unless the cleaner has been over its range: a partition that is not
// compacted, or a range above the cleaner checkpoint or the high
// watermark, keeps its committed segments.
func TestEmptiedRangeKeptUnlessCleaned(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Partition)
	}{
		{"not compacted", func(p *Partition) { p.Compacted = false }},
		{"above the cleaner checkpoint", func(p *Partition) { p.CleanedUpTo = 5 }},
		{"above the high watermark", func(p *Partition) { p.HighWatermark = 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			part := cleanedPartition()
			src := &memSource{p: part, logs: map[int64][]byte{}}
			src.p.Segments = []SegmentMeta{src.segment(0, 10, 10, keyedBatch(t, 0, 10)), src.segment(10, 20, 20, keyedBatch(t, 10, 10))}
			u := upUploader(t, mem, src, Options{})
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			src.p.Segments = src.p.Segments[1:]
			src.p.Emptied = []SegmentMeta{{BaseOffset: 0, NextOffset: 0, NextBase: 10, MaxTimestamp: -1}}
			tc.edit(&src.p)
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if n := upLoad(t, mem, "c", 0).SegmentCount(); n != 2 {
				t.Fatalf("%d segments committed, want both kept", n)
			}
		})
	}
}

// commitFault is a fault in a commit of partition c-0.
type commitFault struct {
	name  string
	fault func(c objstore.Call) *objstore.Fault
}

// commitFaults are the faults of a commit's root write (failing before or
// after it landed, reported as an error or as a lost race) and of the
// deletions after it.
func commitFaults() []commitFault {
	root, _ := manifest.ManifestKey("", "c", 0)
	return []commitFault{
		{"root write fails", func(c objstore.Call) *objstore.Fault {
			if c.Op == objstore.OpPut && c.Key == root {
				return &objstore.Fault{}
			}
			return nil
		}},
		{"root write lands, reported failed", func(c objstore.Call) *objstore.Fault {
			if c.Op == objstore.OpPut && c.Key == root {
				return &objstore.Fault{After: true}
			}
			return nil
		}},
		{"root write lands, reported lost race", func(c objstore.Call) *objstore.Fault {
			if c.Op == objstore.OpPut && c.Key == root {
				return &objstore.Fault{After: true, Err: objstore.ErrPreconditionFailed}
			}
			return nil
		}},
		{"deletes after the commit fail", func(c objstore.Call) *objstore.Fault {
			if c.Op == objstore.OpDelete {
				return &objstore.Fault{}
			}
			return nil
		}},
	}
}

// TestEmptiedRangeCommitFaults: the commit removing an emptied range goes
// through the manifest's commit protocol like any replace: a root write
// that fails (before or after it landed, reported as an error or as a
// lost race) and deletions after it that fail leave the bucket either
// before or after the commit, never in between; the next passes finish
// it, and garbage collection takes the objects left behind.
func TestEmptiedRangeCommitFaults(t *testing.T) {
	for _, tc := range commitFaults() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, l := ecLog(t)
			mem := objstore.NewMemory()
			if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			ecClean(t, d, upNow)
			if segs := l.Segments(); segs[0].Size != 0 {
				t.Fatalf("segment 0 has %d bytes after cleaning, want none", segs[0].Size)
			}
			faulty := true
			bkt := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
				if !faulty {
					return nil
				}
				return tc.fault(c)
			}))
			_, err := upUploader(t, bkt, NewLocalSource(d, nil), Options{Retry: Retry{Attempts: 1, Base: 1, Max: 1}}).RunOnce(ctx)
			if !isInjected(err) && !strings.Contains(fmt.Sprint(err), "precondition") {
				t.Fatalf("faulty pass: %v", err)
			}
			// Whatever the faulty pass did, the bucket is a committed state.
			upCheckConsistent(t, mem, "c", 0)
			for k := range upReferenced(t, mem, manifest.Key{Topic: "c", Partition: 0}) {
				if _, err := mem.Attributes(ctx, k); err != nil {
					t.Fatalf("object %s of the committed manifest: %v", k, err)
				}
			}
			faulty = false
			if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			recs, _ := ecConsume(t, mem, "c")
			if ecHas(recs, "0:K=v1") || !ecHas(recs, "1:K=<tombstone>") {
				t.Fatalf("the remote tier serves %v; want K's tombstone and not K=v1", recs)
			}
			if segs := upAllSegments(t, mem, upLoad(t, mem, "c", 0)); len(segs) != 1 || segs[0].BaseOffset != 1 {
				t.Fatalf("segments %+v, want [1, 2] alone", segs)
			}
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}
