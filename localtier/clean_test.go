package localtier

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// cleanFixture is a flushed log of 4 segments (3 batches of 2 records each)
// plus an active one.
func cleanFixture(t *testing.T, fsys vfs.FS, clock *fakeClock) *Log {
	t.Helper()
	cfg := testConfig(t, map[string]string{"cleanup.policy": "compact", "index.interval.bytes": "100"})
	l, _ := openTestLog(t, fsys, "/d/t-0", cfg, clock, -1)
	for s := 0; s < 4; s++ {
		for b := 0; b < 3; b++ {
			if _, err := l.Append(batchOf(t, 2, 50, clock.t.UnixMilli(), codec.None)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(batchOf(t, 2, 50, clock.t.UnixMilli(), codec.None)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

// offsets reads the record offsets of the whole log.
func offsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	for _, r := range readAll(t, l) {
		out = append(out, r.Offset)
	}
	return out
}

// cleanFirst3 replaces the first three segments by one keeping the batches
// of the first two whose base offset is a multiple of 4, and nothing of the
// third (so ReplaceSegments must add its sentinel).
func cleanFirst3(l *Log) error {
	v := l.CleanerView()
	old := v.Segments[:3]
	c, err := l.NewCleanedSegment(old[0].BaseOffset)
	if err != nil {
		return err
	}
	for _, s := range old[:2] {
		err := l.ScanSegment(s, s.BaseOffset, true, func(_ int64, b record.Batch) error {
			if b.BaseOffset()%4 == 0 {
				return c.Append(b)
			}
			return nil
		})
		if err != nil {
			return errors.Join(err, c.Abort())
		}
	}
	return l.ReplaceSegments(c, old)
}

func TestReplaceSegments(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	mem := vfs.NewMem()
	l := cleanFixture(t, mem, clock)
	defer l.Close()
	if err := cleanFirst3(l); err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 1, 4, 5, 8, 9, 18, 19, 20, 21, 22, 23, 24, 25}
	if got := offsets(t, l); !slices.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	segs := l.Segments()
	if len(segs) != 3 || segs[0].BaseOffset != 0 || segs[1].BaseOffset != 18 {
		t.Fatalf("segments %+v", segs)
	}
	// The sentinel: an empty batch at the last offset of the third segment.
	if segs[0].NextOffset != 18 {
		t.Fatalf("cleaned segment ends at %d, want 18", segs[0].NextOffset)
	}
	// Reads in a gap land on the next batch.
	res, err := l.Read(2, 1000, true)
	if err != nil || record.Batch(res.Data).BaseOffset() != 4 {
		t.Fatalf("read in a gap: %v", err)
	}
	for _, name := range listNames(t, mem, "/d/t-0") {
		if isTempName(name) {
			t.Fatalf("temporary file %s left behind", name)
		}
	}
	// The files open to the same log.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openTestLog(t, mem, "/d/t-0", l.cfg, clock, -1)
	defer l2.Close()
	if got := offsets(t, l2); !slices.Equal(got, want) {
		t.Fatalf("reopened: offsets %v, want %v", got, want)
	}
}

func listNames(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestReplaceSegmentsChangedLog: a segment that left the log (retention)
// between planning and the swap refuses the replace and leaves nothing.
func TestReplaceSegmentsChangedLog(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	mem := vfs.NewMem()
	l := cleanFixture(t, mem, clock)
	defer l.Close()
	v := l.CleanerView()
	c, err := l.NewCleanedSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteSegments(6); err != nil {
		t.Fatal(err)
	}
	if err := l.ReplaceSegments(c, v.Segments[:2]); !errors.Is(err, ErrSegmentChanged) {
		t.Fatalf("replace after retention: %v", err)
	}
	if err := l.ScanSegment(v.Segments[0], 0, false, func(int64, record.Batch) error { return nil }); !errors.Is(err, ErrSegmentChanged) {
		t.Fatalf("scan of a deleted segment: %v", err)
	}
	for _, name := range listNames(t, mem, "/d/t-0") {
		if isTempName(name) {
			t.Fatalf("temporary file %s left behind", name)
		}
	}
}

// TestReplaceSegmentsCrashAtEveryStep fails (and, separately, cuts power
// at) each filesystem operation of a replace in turn. Reopening must give
// exactly the old log or exactly the new one.
func TestReplaceSegmentsCrashAtEveryStep(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	// The two acceptable outcomes.
	mem := vfs.NewMem()
	l := cleanFixture(t, mem, clock)
	cfg := l.cfg
	oldOffsets := offsets(t, l)
	if err := cleanFirst3(l); err != nil {
		t.Fatal(err)
	}
	newOffsets := offsets(t, l)
	_ = l.Close()
	outcome := func(fsys vfs.FS) string {
		l, _, err := OpenLog(fsys, "/d/t-0", LogOptions{Config: cfg, RecoveryPoint: -1, Now: clock.Now})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l.Close()
		got := offsets(t, l)
		switch {
		case slices.Equal(got, oldOffsets):
			return "old"
		case slices.Equal(got, newOffsets):
			return "new"
		}
		t.Fatalf("reopened log is neither old nor new: %v", got)
		return ""
	}
	seen := map[string]int{}
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		var armed bool
		var n int64
		var crash *vfs.MemFS
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if !armed {
				return nil
			}
			n++
			if n-1 == i {
				crash = mem.CrashClone()
				return vfs.ErrInjected
			}
			return nil
		}))
		l := cleanFixture(t, efs, clock)
		armed = true
		err := cleanFirst3(l)
		armed = false
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		_ = l.Close()
		if err == nil {
			if crash != nil {
				t.Fatalf("op %d was injected but the replace reported success", i)
			}
			if o := outcome(mem); o != "new" {
				t.Fatalf("successful replace reopens to the %s log", o)
			}
			t.Logf("replace succeeded once op %d was past its %d operations; outcomes %v", i, n, seen)
			if seen["old"] == 0 || seen["new"] == 0 {
				t.Fatalf("crash points never produced both outcomes: %v", seen)
			}
			return
		}
		seen["restart "+outcome(mem)]++
		seen[outcome(crash)]++
	}
}

func TestCleanedSegmentTxnIndexAndOrder(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	mem := vfs.NewMem()
	l := cleanFixture(t, mem, clock)
	defer l.Close()
	c, err := l.NewCleanedSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	b := batchOf(t, 2, 10, 1, codec.None)
	record.Batch(b).SetBaseOffset(4)
	if err := c.Append(b); err != nil {
		t.Fatal(err)
	}
	record.Batch(b).SetBaseOffset(2)
	if err := c.Append(b); err == nil {
		t.Fatal("an out-of-order batch was accepted")
	}
	if err := c.AppendAbortedTxn(index.AbortedTxn{ProducerID: 1, FirstOffset: 4, LastOffset: 5, LastStableOffset: 4}); err != nil {
		t.Fatal(err)
	}
	if c.NextOffset() != 6 || c.Size() != int64(len(b)) {
		t.Fatalf("next %d size %d", c.NextOffset(), c.Size())
	}
	names := fmt.Sprint(listNames(t, mem, "/d/t-0"))
	for _, suf := range []string{".log.cleaned", ".index.cleaned", ".timeindex.cleaned", ".txnindex.cleaned"} {
		if !slices.ContainsFunc(listNames(t, mem, "/d/t-0"), func(n string) bool { return n == FilenamePrefix(0)+suf }) {
			t.Fatalf("no %s in %s", suf, names)
		}
	}
}
