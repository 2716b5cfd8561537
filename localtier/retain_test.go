package localtier

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// rolledLog appends n batches of 5 records (about 700 bytes each) to a log
// that rolls every ~2 KB, so it ends with several closed segments.
func rolledLog(t *testing.T, fsys vfs.FS, dir string, n int) *Log {
	t.Helper()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "2000"})
	l, _ := openTestLog(t, fsys, dir, cfg, clock, -1)
	for i := 0; i < n; i++ {
		mustAppend(t, l, batchOf(t, 5, 100, 1_700_000_000_000+int64(i*5), codec.None))
	}
	return l
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestDeleteSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := rolledLog(t, vfs.Default, dir, 20)
	segs := l.Segments()
	if len(segs) < 5 {
		t.Fatalf("want at least 5 segments, got %d", len(segs))
	}
	end := l.LogEndOffset()

	// upTo inside segment 0 deletes nothing.
	if got, err := l.DeleteSegments(segs[0].NextOffset - 1); err != nil || len(got) != 0 {
		t.Fatalf("DeleteSegments inside the first segment = %v, %v", got, err)
	}
	// upTo past the active segment's base is refused, nothing changes.
	if _, err := l.DeleteSegments(segs[len(segs)-1].BaseOffset + 1); !errors.Is(err, ErrDeleteActiveSegment) {
		t.Fatalf("deleting into the active segment: err = %v", err)
	}
	if got := l.Segments(); len(got) != len(segs) || l.LogStartOffset() != 0 {
		t.Fatalf("refused delete changed the log: %d segments, start %d", len(got), l.LogStartOffset())
	}

	// Delete the first two segments, with upTo between the second's end and
	// the third's end.
	deleted, err := l.DeleteSegments(segs[2].NextOffset - 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 || deleted[0].BaseOffset != segs[0].BaseOffset || deleted[1].BaseOffset != segs[1].BaseOffset {
		t.Fatalf("deleted %+v, want the first two segments", deleted)
	}
	if deleted[0].Size != segs[0].Size || deleted[1].MaxTimestamp != segs[1].MaxTimestamp {
		t.Fatalf("deleted infos %+v do not describe %+v", deleted, segs[:2])
	}
	if got := l.LogStartOffset(); got != segs[2].BaseOffset {
		t.Fatalf("log start offset = %d, want %d", got, segs[2].BaseOffset)
	}
	if l.RecoveryPoint() < l.LogStartOffset() {
		t.Fatalf("recovery point %d below log start %d", l.RecoveryPoint(), l.LogStartOffset())
	}
	for _, name := range dirNames(t, dir) {
		if strings.HasSuffix(name, DeletedSuffix) {
			t.Errorf("leftover %s", name)
		}
		for _, s := range segs[:2] {
			if strings.HasPrefix(name, FilenamePrefix(s.BaseOffset)) {
				t.Errorf("file %s of a deleted segment remains", name)
			}
		}
	}
	var oor *OffsetOutOfRangeError
	if _, err := l.Read(segs[2].BaseOffset-1, 1<<20, true); !errors.As(err, &oor) {
		t.Fatalf("read below the new log start: err = %v", err)
	}
	recs := readAll(t, l)
	if int64(len(recs)) != end-segs[2].BaseOffset || recs[0].Offset != segs[2].BaseOffset {
		t.Fatalf("read %d records from %d, want %d from %d", len(recs), recs[0].Offset, end-segs[2].BaseOffset, segs[2].BaseOffset)
	}

	// A lower log start never moves it back; upTo = the active base takes
	// every closed segment.
	active := segs[len(segs)-1].BaseOffset
	deleted, err = l.DeleteSegments(active)
	if err != nil || len(deleted) != len(segs)-3 {
		t.Fatalf("deleting every closed segment: %d deleted, %v", len(deleted), err)
	}
	if got := l.Segments(); len(got) != 1 || !got[0].Active || l.LogStartOffset() != active {
		t.Fatalf("after deleting every closed segment: %+v, start %d", got, l.LogStartOffset())
	}
	if deleted, err := l.DeleteSegments(0); err != nil || len(deleted) != 0 || l.LogStartOffset() != active {
		t.Fatalf("DeleteSegments(0) = %v, %v; start %d", deleted, err, l.LogStartOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteSegments(active); err == nil {
		t.Fatal("DeleteSegments on a closed log succeeded")
	}

	// Reopened with the checkpointed start, the log is what was left.
	l2, _ := openTestLog(t, vfs.Default, dir, l.Config(), &fakeClock{t: time.UnixMilli(1_700_000_000_000)}, -1)
	defer l2.Close()
	if l2.LogStartOffset() != active || l2.LogEndOffset() != end || len(l2.Segments()) != 1 {
		t.Fatalf("reopened: start %d end %d segments %d", l2.LogStartOffset(), l2.LogEndOffset(), len(l2.Segments()))
	}
}

// TestDeleteSegmentsInjectedErrors fails each filesystem operation of a
// deletion in turn. Every failure is the injected one, the log stays readable
// from its log start to its end, and after a restart the same records are
// there from the same start.
func TestDeleteSegmentsInjectedErrors(t *testing.T) {
	checked := 0
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		var armed atomic.Bool
		var seen atomic.Int64
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if armed.Load() && seen.Add(1)-1 == i {
				return vfs.ErrInjected
			}
			return nil
		}))
		l := rolledLog(t, efs, "/d/t-0", 16)
		segs := l.Segments()
		end := l.LogEndOffset()
		armed.Store(true)
		deleted, err := l.DeleteSegments(segs[3].BaseOffset)
		armed.Store(false)
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		if err == nil && len(deleted) != 3 {
			t.Fatalf("op %d: deleted %d segments", i, len(deleted))
		}
		if l.LogStartOffset() != segs[3].BaseOffset {
			t.Fatalf("op %d: log start %d, want %d", i, l.LogStartOffset(), segs[3].BaseOffset)
		}
		if recs := readAll(t, l); int64(len(recs)) != end-segs[3].BaseOffset {
			t.Fatalf("op %d: %d records readable", i, len(recs))
		}
		start := l.LogStartOffset()
		if cerr := l.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		l2, _, rerr := OpenLog(mem, "/d/t-0", LogOptions{Config: l.Config(), RecoveryPoint: -1, LogStartOffset: start})
		if rerr != nil {
			t.Fatalf("op %d: reopen: %v", i, rerr)
		}
		recs := readAll(t, l2)
		checked += len(recs)
		if l2.LogStartOffset() != start || int64(len(recs)) != end-start || recs[0].Offset != start {
			t.Fatalf("op %d: reopened start %d, %d records", i, l2.LogStartOffset(), len(recs))
		}
		// Segments a failed deletion left whole are below the log start: the
		// next pass deletes them, and no .deleted file survives the reopen.
		if _, err := l2.DeleteSegments(start); err != nil {
			t.Fatalf("op %d: finishing the deletion: %v", i, err)
		}
		if first := l2.Segments()[0].BaseOffset; first != start {
			t.Fatalf("op %d: first segment %d after finishing, want %d", i, first, start)
		}
		entries, err2 := mem.ReadDir("/d/t-0")
		if err2 != nil {
			t.Fatal(err2)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), DeletedSuffix) {
				t.Fatalf("op %d: %s survived", i, e.Name())
			}
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Logf("deletion succeeded once op %d was past its %d operations", i, seen.Load())
			if seen.Load() > i {
				t.Fatalf("op %d was injected but DeleteSegments succeeded", i)
			}
			reliability.Record(t, "disk: fail each fs operation of retention deletion", int(i)+1, checked, 0)
			return
		}
	}
}

func TestRetentionSegmentsTimestamps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := rolledLog(t, vfs.Default, dir, 6)
	defer l.Close()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute).UnixMilli()
	segs, err := l.RetentionSegments()
	if err != nil {
		t.Fatal(err)
	}
	plain := l.Segments()
	for i, s := range segs[:len(segs)-1] {
		if s.MaxTimestamp != plain[i].MaxTimestamp || s.MaxTimestamp < 1_700_000_000_000 {
			t.Errorf("segment %d: RetentionSegments max timestamp %d, Segments %d", i, s.MaxTimestamp, plain[i].MaxTimestamp)
		}
	}
	// The empty active segment has no record timestamp: its file's mtime stands in.
	last := segs[len(segs)-1]
	if plain[len(plain)-1].MaxTimestamp >= 0 || last.MaxTimestamp < before || last.MaxTimestamp > time.Now().Add(time.Minute).UnixMilli() {
		t.Fatalf("empty active segment: max timestamp %d (Segments: %d), want its mtime", last.MaxTimestamp, plain[len(plain)-1].MaxTimestamp)
	}
}

// Retention configs that contradict each other are refused with Kafka's
// message and nothing changes, on disk or in memory.
func TestAlterTopicRefusesBadRetention(t *testing.T) {
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.CreateTopic("orders", 1, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	overrides := filepath.Join(dir, metaDir, "topics", "orders.json")
	before, err := os.ReadFile(overrides)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"local.retention.ms": "2000"}, "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"},
		{map[string]string{"retention.bytes": "100", "local.retention.bytes": "101"}, "Invalid value 101 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 100"},
		{map[string]string{"local.retention.ms": "-1"}, "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 1000."},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{map[string]string{"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms"},
	} {
		err := d.AlterTopic("orders", tc.set, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AlterTopic(%v) = %v, want %q", tc.set, err, tc.want)
		}
	}
	after, err := os.ReadFile(overrides)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("overrides file changed: %s -> %s", before, after)
	}
	l, err := d.Partition("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Config(); c.RetentionMs != 1000 || c.LocalRetentionMs != -2 || c.RemoteStorageEnable {
		t.Fatalf("config changed: %+v", c)
	}
}
