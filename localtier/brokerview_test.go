package localtier

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// readOnlyFS is the OS filesystem behind an ErrorFS that fails the test,
// and the operation, on anything that could change the broker's dir.
// Closing a file is the one "mutating" kind a reader needs.
func readOnlyFS(t testing.TB) vfs.FS {
	var mu sync.Mutex
	return vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind.Mutates() && op.Kind != vfs.OpFileClose {
			mu.Lock()
			defer mu.Unlock()
			t.Errorf("broker view mutated the broker's dir: %v", op)
			return fmt.Errorf("%w: %v", vfs.ErrInjected, op)
		}
		return nil
	}))
}

// treeSum maps every path under dir to its mode, size and content hash.
func treeSum(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := fmt.Sprintf("%v %d %v", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out[p] = sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func brokerLogDirs(t testing.TB) []string {
	t.Helper()
	var dirs []string
	for _, pat := range []string{"kafka-tester/*/kraft-combined-logs", "kafka-connect-spooldir-fork/*/kafka-data"} {
		m, _ := filepath.Glob(filepath.Join(fixtureRoot, pat))
		dirs = append(dirs, m...)
	}
	if len(dirs) != 3 {
		t.Fatalf("found %d fixture log dirs, want 3", len(dirs))
	}
	return dirs
}

// scannedBatch is one batch of a log file as a plain scan sees it.
type scannedBatch struct {
	pos   int64
	bytes []byte
}

func scanFile(t testing.TB, path string) []scannedBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIter(data)
	it.Verify = true
	var out []scannedBatch
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		out = append(out, scannedBatch{int64(it.Pos() - b.Size()), append([]byte(nil), b...)})
	}
	if it.Err() != nil {
		t.Fatalf("%s: %v", path, it.Err())
	}
	return out
}

func openView(t testing.TB, dir string) *BrokerView {
	t.Helper()
	v, err := OpenBrokerView(readOnlyFS(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readAllView reads [from, hw) with Read, one call per maxBytes, and returns
// the concatenated batches.
func readAllView(t testing.TB, v *BrokerView, topic string, p int32, from, hw int64, maxBytes int) []byte {
	t.Helper()
	var out []byte
	off := from
	for off < hw {
		res, err := v.Read(topic, p, off, maxBytes, hw)
		if err != nil {
			t.Fatalf("read %s-%d at %d (hw %d): %v", topic, p, off, hw, err)
		}
		if res.LogEndOffset != hw {
			t.Fatalf("read: log end offset %d, want hw %d", res.LogEndOffset, hw)
		}
		if len(res.Data) == 0 {
			break
		}
		it := record.NewIter(res.Data)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.LastOffset() >= hw {
				t.Fatalf("read at %d returned offset %d at or beyond hw %d", off, b.LastOffset(), hw)
			}
			if b.LastOffset() < off {
				t.Fatalf("read at %d returned a batch ending at %d", off, b.LastOffset())
			}
			off = b.NextOffset()
		}
		if it.Err() != nil || it.Truncated() {
			t.Fatalf("read at %d returned a partial or bad batch: %v", off, it.Err())
		}
		out = append(out, res.Data...)
	}
	return out
}

// TestBrokerViewFixtures checks every API against the real broker log dirs.
func TestBrokerViewFixtures(t *testing.T) {
	for _, src := range brokerLogDirs(t) {
		t.Run(strings.TrimPrefix(src, fixtureRoot+"/"), func(t *testing.T) {
			dir := copyDir(t, src)
			before := treeSum(t, dir)
			v := openView(t, dir)

			parts, err := v.Partitions()
			if err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			var want []string
			for _, e := range entries {
				if e.IsDir() {
					want = append(want, e.Name())
				}
			}
			var got []string
			for _, p := range parts {
				got = append(got, filepath.Base(p.Dir))
				if p.Dir != filepath.Join(dir, fmt.Sprintf("%s-%d", p.Topic, p.Partition)) {
					t.Errorf("partition %s-%d has dir %s", p.Topic, p.Partition, p.Dir)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("partitions %v, want %v", got, want)
			}

			hws, err := v.HighWatermarks()
			if err != nil {
				t.Fatal(err)
			}
			wantHWs, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, checkpoint.ReplicationOffsetFile))
			if err != nil || len(wantHWs) == 0 {
				t.Fatalf("fixture checkpoint: %v (%d entries)", err, len(wantHWs))
			}
			if fmt.Sprint(hws) != fmt.Sprint(wantHWs) {
				t.Fatalf("high watermarks %v, want %v", hws, wantHWs)
			}
			if _, err := v.LogStartOffsets(); err != nil {
				t.Fatal(err)
			}

			for _, p := range parts {
				segs, err := v.Segments(p.Topic, p.Partition)
				if err != nil {
					t.Fatal(err)
				}
				logs, _ := filepath.Glob(filepath.Join(p.Dir, "*.log"))
				if len(segs) != len(logs) || len(segs) == 0 {
					t.Fatalf("%s: %d segments, want %d", p.Dir, len(segs), len(logs))
				}
				var fileBatches []byte
				for i, s := range segs {
					batches := scanFile(t, s.LogPath)
					wantNext, wantTS := s.BaseOffset, int64(record.NoTimestamp)
					for _, b := range batches {
						wantNext = record.Batch(b.bytes).NextOffset()
						wantTS = max(wantTS, record.Batch(b.bytes).MaxTimestamp())
						fileBatches = append(fileBatches, b.bytes...)
					}
					fi, _ := os.Stat(s.LogPath)
					_, idxErr := os.Stat(SegmentPath(p.Dir, s.BaseOffset, IndexSuffix))
					if s.NextOffset != wantNext || s.MaxTimestamp != wantTS || s.Size != fi.Size() ||
						s.Active != (i == len(segs)-1) || s.HasIndex != (idxErr == nil) {
						t.Errorf("%s: %+v; scan says next %d, max ts %d, size %d, index %v", s.LogPath, s, wantNext, wantTS, fi.Size(), idxErr == nil)
					}
				}
				tp := checkpoint.TopicPartition{Topic: p.Topic, Partition: p.Partition}
				hw, ok := hws[tp]
				if !ok {
					// KRaft's metadata log is not in the replication checkpoint.
					hw = segs[len(segs)-1].NextOffset
				} else if end := segs[len(segs)-1].NextOffset; hw != end {
					t.Errorf("%s: hw %d but the log ends at %d after a clean shutdown", p.Dir, hw, end)
				}
				got := readAllView(t, v, p.Topic, p.Partition, segs[0].BaseOffset, hw, 1)
				if !bytes.Equal(got, fileBatches) {
					t.Errorf("%s: reading to hw %d returned %d bytes, the files hold %d", p.Dir, hw, len(got), len(fileBatches))
				}
				if _, err := v.LeaderEpochs(p.Topic, p.Partition); err != nil {
					t.Error(err)
				}
			}
			if after := treeSum(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatal("the broker view changed the log dir")
			}
		})
	}
}

func TestBrokerViewKafkaTesterCheckpoints(t *testing.T) {
	dir := copyDir(t, filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"))
	v := openView(t, dir)
	hws, err := v.HighWatermarks()
	if err != nil {
		t.Fatal(err)
	}
	if len(hws) != 1 || hws[checkpoint.TopicPartition{Topic: "foo", Partition: 0}] != 3 {
		t.Fatalf("high watermarks %v, want foo-0 at 3", hws)
	}
	starts, err := v.LogStartOffsets()
	if err != nil {
		t.Fatal(err)
	}
	if len(starts) != 0 { // the broker checkpointed no entries
		t.Fatalf("log start offsets %v, want none", starts)
	}
	epochs, err := v.LeaderEpochs("__cluster_metadata", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []checkpoint.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 81}}; !slices.Equal(epochs, want) {
		t.Fatalf("leader epochs %v, want %v", epochs, want)
	}
	var ue *UnknownTopicOrPartitionError
	if _, err := v.LeaderEpochs("foo", 1); !errors.As(err, &ue) {
		t.Fatalf("leader epochs of a missing partition: %v", err)
	}
	if _, err := v.Segments("../foo", 0); !errors.As(err, &ue) {
		t.Fatalf("segments of a bad topic name: %v", err)
	}
	// foo-0 holds offsets 0..2 below hw 3; nothing is readable at or past it.
	res, err := v.Read("foo", 0, 3, 1<<20, 3)
	if err != nil || len(res.Data) != 0 {
		t.Fatalf("read at hw: %d bytes, %v", len(res.Data), err)
	}
	var oor *OffsetOutOfRangeError
	if _, err := v.Read("foo", 0, 4, 1<<20, 3); !errors.As(err, &oor) || oor.LogEndOffset != 3 {
		t.Fatalf("read past hw: %v", err)
	}
}

func TestOpenBrokerViewValidates(t *testing.T) {
	ro := readOnlyFS(t)
	root := t.TempDir()
	if _, err := OpenBrokerView(ro, filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBrokerView(ro, file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("file: %v", err)
	}
	junk := filepath.Join(root, "junk")
	for _, d := range []string{"junk/photos", "junk/meta.properties", "junk/foo-bar"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(junk, "foo-0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBrokerView(ro, junk); err == nil || !strings.Contains(err.Error(), "does not look like a Kafka log dir") {
		t.Fatalf("junk dir: %v", err)
	}
	for _, name := range []string{"meta.properties", "replication-offset-checkpoint", "orders-3"} {
		d := filepath.Join(root, "ok-"+name)
		var err error
		if name == "orders-3" {
			err = os.MkdirAll(filepath.Join(d, name), 0o755)
		} else if err = os.MkdirAll(d, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(d, name), nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := OpenBrokerView(ro, d)
		if err != nil {
			t.Fatalf("dir with %s: %v", name, err)
		}
		// A missing checkpoint reads as empty.
		if hws, err := v.HighWatermarks(); err != nil || (name != "replication-offset-checkpoint" && len(hws) != 0) {
			t.Fatalf("dir with %s: high watermarks %v, %v", name, hws, err)
		}
	}
}

func TestBrokerViewSkipsNonPartitions(t *testing.T) {
	dir := copyDir(t, filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"))
	for _, d := range []string{"foo-0.0a1b2c3d-delete", "foo-1.0a1b2c3d-future", "foo-2.0a1b2c3d-stray", "lost+found", "foo-01", ".tiered"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bar-0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	foo := filepath.Join(dir, "foo-0")
	for _, name := range []string{"00000000000000000099.log.deleted", "00000000000000000099.log.cleaned",
		"00000000000000000099.log.swap", "00000000000000000099.index.tmp", "00000000000000000098.log.tmp", "0000000000000000009.log"} {
		if err := os.WriteFile(filepath.Join(foo, name), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v := openView(t, dir)
	parts, err := v.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(parts) != fmt.Sprintf("[{__cluster_metadata 0 %s/__cluster_metadata-0} {foo 0 %s/foo-0}]", dir, dir) {
		t.Fatalf("partitions %v", parts)
	}
	segs, err := v.Segments("foo", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || segs[0].BaseOffset != 0 || segs[0].NextOffset != 3 || !segs[0].Active {
		t.Fatalf("segments %+v", segs)
	}
	var ue *UnknownTopicOrPartitionError
	if _, err := v.Segments("foo", 1); !errors.As(err, &ue) {
		t.Fatalf("segments of a -future dir's partition: %v", err)
	}
}

// brokerPartition writes a partition with tiered's log engine (which writes
// Kafka's formats) into a fresh log dir: segs segments of perSeg batches of
// recs records, every batch indexed. It returns the log dir and the open log,
// which plays the broker.
func brokerPartition(t testing.TB, segs, perSeg, recs, valueSize int) (string, *Log) {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, metaProperties), []byte("version=1\nnode.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, map[string]string{"index.interval.bytes": "100"})
	l, _ := openTestLog(t, vfs.Default, filepath.Join(root, "t-0"), cfg, &fakeClock{t: time.UnixMilli(1_700_000_000_000)}, 0)
	t.Cleanup(func() { _ = l.Close() })
	ts := int64(1_700_000_000_000)
	for s := 0; s < segs; s++ {
		if s > 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		for b := 0; b < perSeg; b++ {
			if _, err := l.Append(batchOf(t, recs, valueSize, ts, codec.None)); err != nil {
				t.Fatal(err)
			}
			ts += int64(recs) + 7
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return root, l
}

func appendFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkSegmentsAgainstScan compares Segments with a full scan of each file.
func checkSegmentsAgainstScan(t testing.TB, segs []BrokerSegment) {
	t.Helper()
	for i, s := range segs {
		next, ts := s.BaseOffset, int64(record.NoTimestamp)
		for _, b := range scanFile(t, s.LogPath) {
			next, ts = record.Batch(b.bytes).NextOffset(), max(ts, record.Batch(b.bytes).MaxTimestamp())
		}
		if s.NextOffset != next || s.MaxTimestamp != ts || s.Active != (i == len(segs)-1) {
			t.Errorf("segment %+v: scan says next offset %d, max timestamp %d", s, next, ts)
		}
	}
}

func TestBrokerViewSegmentsAndRolled(t *testing.T) {
	dir, _ := brokerPartition(t, 3, 20, 5, 40)
	v := openView(t, dir)
	segs, err := v.Segments("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[0].BaseOffset != 0 || segs[1].BaseOffset != 100 || segs[2].BaseOffset != 200 {
		t.Fatalf("segments %+v", segs)
	}
	for _, s := range segs {
		if !s.HasIndex || !s.HasTimeIndex || s.HasTxnIndex {
			t.Fatalf("segment %+v: index files", s)
		}
		if idx, _ := os.Stat(SegmentPath(filepath.Join(dir, "t-0"), s.BaseOffset, IndexSuffix)); idx.Size() < 10*8 {
			t.Fatalf("segment %d: index of %d bytes; the test wants many entries", s.BaseOffset, idx.Size())
		}
	}
	checkSegmentsAgainstScan(t, segs)
	// Twice: the second listing comes from the rolled-segment cache.
	again, err := v.Segments("t", 0)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(segs) {
		t.Fatalf("second listing %+v, %v", again, err)
	}
	for _, c := range []struct {
		hw   int64
		want []int64
	}{{0, nil}, {99, nil}, {100, []int64{0}}, {199, []int64{0}}, {200, []int64{0, 100}}, {1 << 40, []int64{0, 100}}} {
		rolled, err := v.RolledSegmentsBelow("t", 0, c.hw)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, s := range rolled {
			got = append(got, s.BaseOffset)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("rolled below %d: %v, want %v", c.hw, got, c.want)
		}
	}
}

func TestBrokerViewReadNeverPastHW(t *testing.T) {
	dir, _ := brokerPartition(t, 3, 3, 4, 30)
	v := openView(t, dir)
	var all []scannedBatch
	segs, _ := v.Segments("t", 0)
	for _, s := range segs {
		all = append(all, scanFile(t, s.LogPath)...)
	}
	end := segs[len(segs)-1].NextOffset
	for hw := int64(0); hw <= end+3; hw++ {
		var want []byte
		for _, b := range all {
			if record.Batch(b.bytes).NextOffset() <= hw {
				want = append(want, b.bytes...)
			}
		}
		for _, maxBytes := range []int{1, 300, 1 << 20} {
			got := readAllView(t, v, "t", 0, 0, hw, maxBytes)
			if !bytes.Equal(got, want) {
				t.Fatalf("hw %d, max bytes %d: read %d bytes, want %d", hw, maxBytes, len(got), len(want))
			}
		}
		// Every offset below hw reads the batch holding it first.
		for off := int64(0); off < hw && off < end; off++ {
			res, err := v.Read("t", 0, off, 1, hw)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Data) == 0 {
				if hw%4 == 0 || hw > end {
					t.Fatalf("hw %d: nothing read at %d", hw, off)
				}
				continue // the batch holding off straddles hw
			}
			b := record.Batch(res.Data)
			if b.BaseOffset() > off || b.LastOffset() < off || b.LastOffset() >= hw {
				t.Fatalf("hw %d: read at %d gave batch [%d, %d]", hw, off, b.BaseOffset(), b.LastOffset())
			}
		}
	}
	var oor *OffsetOutOfRangeError
	if _, err := v.Read("t", 0, 13, 100, 12); !errors.As(err, &oor) {
		t.Fatalf("read past hw: %v", err)
	}
	if _, err := v.Read("t", 0, -1, 100, 12); !errors.As(err, &oor) {
		t.Fatalf("read below start: %v", err)
	}
}

func TestBrokerViewRollsUnderneath(t *testing.T) {
	dir, l := brokerPartition(t, 1, 5, 3, 20)
	v := openView(t, dir)
	segs, err := v.Segments("t", 0)
	if err != nil || len(segs) != 1 || segs[0].NextOffset != 15 {
		t.Fatalf("segments %+v, %v", segs, err)
	}
	// The broker appends to the active segment, then rolls and appends.
	if _, err := l.Append(batchOf(t, 3, 20, 1_700_000_100_000, codec.None)); err != nil {
		t.Fatal(err)
	}
	segs, err = v.Segments("t", 0)
	if err != nil || len(segs) != 1 || segs[0].NextOffset != 18 || segs[0].MaxTimestamp != 1_700_000_100_002 {
		t.Fatalf("after append: %+v, %v", segs, err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batchOf(t, 2, 20, 1_700_000_100_010, codec.None)); err != nil {
		t.Fatal(err)
	}
	segs, err = v.Segments("t", 0)
	if err != nil || len(segs) != 2 || segs[0].Active || segs[0].NextOffset != 18 || !segs[1].Active || segs[1].BaseOffset != 18 || segs[1].NextOffset != 20 {
		t.Fatalf("after roll: %+v, %v", segs, err)
	}
	checkSegmentsAgainstScan(t, segs)
	if got := readAllView(t, v, "t", 0, 0, 20, 1<<20); len(got) == 0 {
		t.Fatal("nothing read")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// By hand now: a new segment file appears, and a batch lands at the end
	// of the one that was active (and of a rolled one: the cached end must
	// notice the size change).
	pdir := filepath.Join(dir, "t-0")
	b := batchOf(t, 4, 20, 1_700_000_100_020, codec.None)
	record.Batch(b).SetBaseOffset(20)
	appendFile(t, SegmentPath(pdir, 18, LogSuffix), b)
	b2 := append([]byte(nil), b...)
	record.Batch(b2).SetBaseOffset(24)
	if err := os.WriteFile(SegmentPath(pdir, 24, LogSuffix), b2, 0o644); err != nil {
		t.Fatal(err)
	}
	segs, err = v.Segments("t", 0)
	if err != nil || len(segs) != 3 || segs[1].NextOffset != 24 || segs[1].Active || segs[2].NextOffset != 28 || segs[2].HasIndex {
		t.Fatalf("after a hand-made roll: %+v, %v", segs, err)
	}
	checkSegmentsAgainstScan(t, segs)
	b3 := append([]byte(nil), b...)
	record.Batch(b3).SetBaseOffset(28)
	appendFile(t, SegmentPath(pdir, 18, LogSuffix), b3) // not what a broker does; the view must still see it
	segs, err = v.Segments("t", 0)
	if err != nil || segs[1].NextOffset != 32 {
		t.Fatalf("after appending to a rolled segment: %+v, %v", segs, err)
	}
}

func TestBrokerViewDeletedUnderneath(t *testing.T) {
	dir, l := brokerPartition(t, 5, 4, 3, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "t-0")
	v := openView(t, dir)
	segs, err := v.Segments("t", 0)
	if err != nil || len(segs) != 5 {
		t.Fatalf("segments %+v, %v", segs, err)
	}
	kafkaDelete := func(base int64) {
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			p := SegmentPath(pdir, base, suf)
			if err := os.Rename(p, p+DeletedSuffix); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Between the listing and the open.
	kafkaDelete(segs[0].BaseOffset)
	if _, err := v.OpenSegment("t", 0, segs[0].BaseOffset); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("open a deleted segment: %v", err)
	}
	var oor *OffsetOutOfRangeError
	if _, err := v.Read("t", 0, 0, 100, 60); !errors.As(err, &oor) || oor.LogStartOffset != 12 {
		t.Fatalf("read in a deleted segment: %v", err)
	}
	if got, err := v.Segments("t", 0); err != nil || len(got) != 4 || got[0].BaseOffset != 12 {
		t.Fatalf("segments after a delete: %+v, %v", got, err)
	}

	// In the middle of the read.
	r, err := v.OpenSegment("t", 0, segs[1].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	var buf [10]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		t.Fatal(err)
	}
	kafkaDelete(segs[1].BaseOffset)
	if _, err := io.ReadAll(r); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("read of a segment deleted mid-read: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Replaced mid-read, as the cleaner's .swap rename does.
	r, err = v.OpenSegment("t", 0, segs[2].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	p := segs[2].LogPath
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p+SwapSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+SwapSuffix, p); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("read of a segment replaced mid-read: %v", err)
	}
	_ = r.Close()

	// Truncated in place before the read: garbage past the new end is not
	// reported as corruption.
	r, err = v.OpenSegment("t", 0, segs[3].BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[3].LogPath, segs[3].Size/2); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("read of a segment truncated mid-read: %v", err)
	}
	_ = r.Close()

	if _, err := v.OpenSegment("t", 0, segs[4].BaseOffset); !errors.Is(err, ErrActiveSegment) {
		t.Fatalf("open the active segment: %v", err)
	}
}

func TestBrokerSegmentReader(t *testing.T) {
	// Big enough for several verify-and-buffer rounds.
	dir, l := brokerPartition(t, 2, 11, 10, 100_000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := openView(t, dir)
	segs, err := v.Segments("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := segs[0]
	if s.Size < 2*segmentReadChunk {
		t.Fatalf("segment of %d bytes is too small for the test", s.Size)
	}
	r, err := v.OpenSegment("t", 0, s.BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(s.LogPath)
	if !bytes.Equal(got, want) || r.Size() != int64(len(want)) {
		t.Fatalf("read %d bytes, file holds %d", len(got), len(want))
	}
	if st := r.Stats(); st.Batches != 11 || st.FirstOffset != 0 || st.NextOffset != s.NextOffset || st.MaxTimestamp != s.MaxTimestamp {
		t.Fatalf("stats %+v, segment %+v", st, s)
	}
	if r.Segment().NextOffset != segs[1].BaseOffset {
		t.Fatalf("segment %+v", r.Segment())
	}
	for suf, get := range map[string]func() ([]byte, error){IndexSuffix: r.OffsetIndex, TimeIndexSuffix: r.TimeIndex} {
		b, err := get()
		want, _ := os.ReadFile(SegmentPath(filepath.Dir(s.LogPath), 0, suf))
		if err != nil || !bytes.Equal(b, want) || len(b) == 0 {
			t.Fatalf("%s: %d bytes, %v; file has %d", suf, len(b), err, len(want))
		}
	}
	if b, err := r.TxnIndex(); b != nil || err != nil {
		t.Fatalf("txn index %d bytes, %v", len(b), err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after close succeeded")
	}

	// A flipped byte in the third batch's records is a checksum mismatch
	// naming the file and the batch position; the batches before it are
	// still delivered.
	batches := scanFile(t, s.LogPath)
	bad := append([]byte(nil), want...)
	bad[batches[2].pos+record.HeaderSize+50] ^= 0xff
	if err := os.WriteFile(s.LogPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = v.OpenSegment("t", 0, s.BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(r)
	var ce *record.CorruptError
	if !errors.As(err, &ce) || ce.File != s.LogPath || ce.Pos != batches[2].pos {
		t.Fatalf("corrupt batch: %v", err)
	}
	if !bytes.Equal(got, want[:batches[2].pos]) {
		t.Fatalf("delivered %d bytes before the bad batch at %d", len(got), batches[2].pos)
	}
	_ = r.Close()
}

func TestBrokerViewTornTail(t *testing.T) {
	dir, l := brokerPartition(t, 2, 5, 3, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := openView(t, dir)
	segs, _ := v.Segments("t", 0)
	active := segs[1]
	half := batchOf(t, 3, 20, 1_800_000_000_000, codec.None)
	record.Batch(half).SetBaseOffset(active.NextOffset)
	half = half[:len(half)/2]

	// The broker is mid-write on the active segment.
	appendFile(t, active.LogPath, half)
	got, err := v.Segments("t", 0)
	if err != nil || got[1].NextOffset != active.NextOffset || got[1].Size != active.Size+int64(len(half)) || got[1].MaxTimestamp != active.MaxTimestamp {
		t.Fatalf("segments with a torn active tail: %+v, %v", got, err)
	}
	data := readAllView(t, v, "t", 0, 0, 1<<40, 1<<20)
	if want := scanFile(t, active.LogPath); !bytes.HasSuffix(data, want[len(want)-1].bytes) {
		t.Fatal("reading to the end did not end with the last whole batch")
	}
	res, err := v.Read("t", 0, active.NextOffset, 1<<20, 1<<40)
	if err != nil || len(res.Data) != 0 {
		t.Fatalf("read at the torn tail: %d bytes, %v", len(res.Data), err)
	}

	// The same on a rolled segment is corruption.
	appendFile(t, segs[0].LogPath, half)
	var ce *record.CorruptError
	if _, err := v.Segments("t", 0); !errors.As(err, &ce) || ce.File != segs[0].LogPath || ce.Pos != segs[0].Size {
		t.Fatalf("segments with a torn rolled segment: %v", err)
	}
	r, err := v.OpenSegment("t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadAll(r); !errors.As(err, &ce) || ce.Pos != segs[0].Size {
		t.Fatalf("reading a torn rolled segment: %v", err)
	}
}

func TestBrokerViewPreallocatedIndex(t *testing.T) {
	dir, l := brokerPartition(t, 2, 30, 2, 60)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := openView(t, dir)
	want, _ := v.Segments("t", 0)
	pdir := filepath.Join(dir, "t-0")
	zeros := make([]byte, 10<<20)
	for _, s := range want {
		for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
			appendFile(t, SegmentPath(pdir, s.BaseOffset, suf), zeros)
		}
	}
	v = openView(t, dir) // no cache
	got, err := v.Segments("t", 0)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with preallocated indexes: %+v, %v; want %+v", got, err, want)
	}
	checkSegmentsAgainstScan(t, got)
	end := got[1].NextOffset
	for off := int64(0); off < end; off++ {
		res, err := v.Read("t", 0, off, 1, end)
		if err != nil || len(res.Data) == 0 {
			t.Fatalf("read at %d: %v", off, err)
		}
		if b := record.Batch(res.Data); b.BaseOffset() > off || b.LastOffset() < off {
			t.Fatalf("read at %d gave [%d, %d]", off, b.BaseOffset(), b.LastOffset())
		}
	}

	// The ends come from the indexes: with the first batch of every segment
	// made unreadable, listing and reading late offsets still work.
	for _, s := range got {
		f, err := os.OpenFile(s.LogPath, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{99}, 16); err != nil { // magic
			t.Fatal(err)
		}
		_ = f.Close()
	}
	v = openView(t, dir)
	if again, err := v.Segments("t", 0); err != nil || fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("segments did not use the indexes: %+v, %v", again, err)
	}
	for _, s := range got {
		if _, err := v.Read("t", 0, s.NextOffset-1, 1, end); err != nil {
			t.Fatalf("read at %d did not use the index: %v", s.NextOffset-1, err)
		}
		var ce *record.CorruptError
		if _, err := v.Read("t", 0, s.BaseOffset, 1, end); !errors.As(err, &ce) || ce.Pos != 0 || ce.File != s.LogPath {
			t.Fatalf("read of a broken first batch: %v", err)
		}
	}

	r, err := v.OpenSegment("t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	idx, err := r.OffsetIndex()
	if err != nil || len(idx) == 0 || len(idx)%8 != 0 || int64(len(idx)) >= 10<<20 {
		t.Fatalf("offset index %d bytes, %v", len(idx), err)
	}
}

// TestBrokerViewReadOnly runs every call through an FS that fails on any
// mutation, on a fixture and on a multi-segment partition, and checks that
// the trees are byte for byte unchanged.
func TestBrokerViewReadOnly(t *testing.T) {
	fixture := copyDir(t, filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"))
	multi, l := brokerPartition(t, 3, 5, 3, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fixture, multi} {
		before := treeSum(t, dir)
		v := openView(t, dir)
		parts, err := v.Partitions()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.HighWatermarks(); err != nil {
			t.Fatal(err)
		}
		if _, err := v.LogStartOffsets(); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if _, err := v.LeaderEpochs(p.Topic, p.Partition); err != nil {
				t.Fatal(err)
			}
			segs, err := v.Segments(p.Topic, p.Partition)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.RolledSegmentsBelow(p.Topic, p.Partition, 1<<40); err != nil {
				t.Fatal(err)
			}
			readAllView(t, v, p.Topic, p.Partition, segs[0].BaseOffset, segs[len(segs)-1].NextOffset, 100)
			for _, s := range segs[:len(segs)-1] {
				r, err := v.OpenSegment(p.Topic, p.Partition, s.BaseOffset)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, r); err != nil {
					t.Fatal(err)
				}
				for _, get := range []func() ([]byte, error){r.OffsetIndex, r.TimeIndex, r.TxnIndex} {
					if _, err := get(); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if after := treeSum(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s changed", dir)
		}
	}
}

// FuzzBrokerView feeds arbitrary bytes as a partition's log and offset index
// and runs every read path: none may panic or hang.
func FuzzBrokerView(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs/__cluster_metadata-0/00000000000000000000.log"))
	if err != nil {
		f.Fatal(err)
	}
	idx, _ := os.ReadFile(filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs/__cluster_metadata-0/00000000000000000000.index"))
	f.Add(seed, idx, int64(50))
	f.Add(seed[:len(seed)-7], append(idx, make([]byte, 64)...), int64(1000))
	f.Add([]byte{}, []byte{0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}, int64(3))
	f.Fuzz(func(t *testing.T, log, idx []byte, hw int64) {
		mem := vfs.NewMem()
		dir := "/kafka"
		pdir := dir + "/t-0"
		if err := mem.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{
			SegmentPath(pdir, 0, LogSuffix): log, SegmentPath(pdir, 0, IndexSuffix): idx, SegmentPath(pdir, 0, TimeIndexSuffix): idx,
			SegmentPath(pdir, 5000, LogSuffix): nil,
		} {
			fl, err := mem.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fl.Write(data); err != nil {
				t.Fatal(err)
			}
			_ = fl.Close()
		}
		v, err := OpenBrokerView(vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if op.Kind.Mutates() && op.Kind != vfs.OpFileClose {
				t.Fatalf("mutation %v", op)
			}
			return nil
		})), dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = v.Segments("t", 0)
		for off := int64(0); off < 5; off++ {
			if res, err := v.Read("t", 0, off, 100, hw); err == nil {
				it := record.NewIter(res.Data)
				for {
					b, ok := it.Next()
					if !ok {
						break
					}
					if b.NextOffset() > hw {
						t.Fatalf("read returned offset %d past hw %d", b.LastOffset(), hw)
					}
				}
			}
		}
		if r, err := v.OpenSegment("t", 0, 0); err == nil {
			_, _ = io.Copy(io.Discard, r)
			_, _ = r.OffsetIndex()
			_, _ = r.TimeIndex()
			_ = r.Close()
		}
	})
}

// TestBrokerViewConcurrentBroker lists and reads while the log engine (the
// broker here) appends and rolls: every listing is consistent with a scan
// and every read ends below the hw it was given.
func TestBrokerViewConcurrentBroker(t *testing.T) {
	dir, l := brokerPartition(t, 1, 1, 3, 50)
	v := openView(t, dir)
	done := make(chan struct{})
	errc := make(chan error, 1)
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	defer func() {
		stop()
		for range errc { // wait for the reader
		}
	}()
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			segs, err := v.Segments("t", 0)
			if err != nil {
				errc <- err
				return
			}
			for i := 1; i < len(segs); i++ {
				if segs[i-1].NextOffset != segs[i].BaseOffset || segs[i-1].Active {
					errc <- fmt.Errorf("inconsistent listing %+v", segs)
					return
				}
			}
			hw := segs[len(segs)-1].NextOffset
			for off := segs[0].BaseOffset; off < hw; {
				res, err := v.Read("t", 0, off, 2000, hw)
				if err != nil {
					errc <- err
					return
				}
				it := record.NewIter(res.Data)
				for {
					b, ok := it.Next()
					if !ok {
						break
					}
					if b.BaseOffset() != off || b.NextOffset() > hw {
						errc <- fmt.Errorf("read at %d (hw %d) gave [%d, %d]", off, hw, b.BaseOffset(), b.LastOffset())
						return
					}
					off = b.NextOffset()
				}
				if len(res.Data) == 0 {
					errc <- fmt.Errorf("read at %d below hw %d returned nothing", off, hw)
					return
				}
			}
		}
	}()
	for i := 0; i < 150; i++ {
		if i%25 == 24 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Append(batchOf(t, 3, 50, 1_700_000_000_000+int64(i), codec.None)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestBrokerViewPreallocatedActiveLog: with preallocate on (Kafka's
// log.preallocate) the broker creates the active segment's .log at its
// full size, zeros after the data, and trims it on roll. The view ends the
// active segment's data at the zeros: it lists the partition, plans its
// rolled segments and reads the active one, instead of failing them as
// corrupt on every pass. A rolled segment's zeros are still corruption.
func TestBrokerViewPreallocatedActiveLog(t *testing.T) {
	dir, l := brokerPartition(t, 2, 5, 3, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := openView(t, dir)
	before, err := v.Segments("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	active := before[1]
	if err := os.Truncate(active.LogPath, active.Size+1<<20); err != nil {
		t.Fatal(err)
	}
	segs, err := v.Segments("t", 0)
	if err != nil {
		t.Fatalf("segments with a preallocated active log: %v", err)
	}
	if len(segs) != 2 || segs[1].NextOffset != active.NextOffset {
		t.Fatalf("segments %+v, want the active one to end at %d", segs, active.NextOffset)
	}
	if rolled, err := v.RolledSegmentsBelow("t", 0, active.NextOffset); err != nil || len(rolled) != 1 {
		t.Fatalf("rolled segments %+v (%v), want the first", rolled, err)
	}
	res, err := v.Read("t", 0, active.BaseOffset, 1<<20, active.NextOffset)
	if err != nil || len(res.Data) != int(active.Size) {
		t.Fatalf("read of the preallocated active log: %d bytes (%v), want %d", len(res.Data), err, active.Size)
	}
	rolled := before[0]
	if err := os.Truncate(rolled.LogPath, rolled.Size+1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Read("t", 0, rolled.BaseOffset, 1<<30, active.NextOffset); !record.IsCorrupt(err) {
		t.Fatalf("read of a rolled segment with zeros after its data: %v, want corruption", err)
	}
}
