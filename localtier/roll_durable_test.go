package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A compacted log whose last rolled segment ends (after cleaning) below the
// base offset of the empty active segment: offsets up to the active base
// were handed out. After an unclean restart with an older recovery point
// the loader deletes the empty active segment, so the log end offset moves
// back and the next append reuses offsets consumers already passed. Kafka's
// LogLoader keeps the empty segment (its readNextOffset is the base).
func TestReviewEmptyActiveAfterCompactedSegmentKeepsLogEnd(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"cleanup.policy": "compact"})
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, batchOf(t, 2, 10, clock.t.UnixMilli(), codec.None))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset() // 6
	v := l.CleanerView()
	c, err := l.NewCleanedSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ScanSegment(v.Segments[0], 0, true, func(_ int64, b record.Batch) error {
		if b.BaseOffset() == 0 {
			return c.Append(b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.ReplaceSegments(c, v.Segments[:1]); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := l.LogEndOffset(); got != end {
		t.Fatalf("log end after cleaning = %d, want %d", got, end)
	}
	// kill -9 before the recovery point checkpoint caught up.
	l2, rep := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	defer l2.Close()
	t.Logf("recovery: %+v, segments %+v", rep, l2.Segments())
	if got := l2.LogEndOffset(); got != end {
		t.Fatalf("log end after restart = %d, want %d: offsets %d..%d would be handed out again", got, end, got, end-1)
	}
	_ = l.Close()
}

// A roll makes the data below the new segment durable before the new
// segment's file: after a power failure the records appended before the
// roll are all there, and the log end is the new segment's base (an empty
// segment is never a roll whose data was lost).
func TestRollFlushesDataBelowNewSegment(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, batchOf(t, 2, 10, clock.t.UnixMilli(), codec.None))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := l.RecoveryPoint(); got != 6 {
		t.Fatalf("recovery point after roll = %d, want 6", got)
	}
	crashed := mem.CrashClone()
	_ = l.Close()
	l2, rep := openTestLog(t, crashed, "/d/t-0", cfg, clock, 0)
	defer l2.Close()
	if got := l2.LogEndOffset(); got != 6 {
		t.Fatalf("log end after power failure = %d, want 6 (recovery %+v)", got, rep)
	}
	res, err := l2.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	it := record.NewIter(res.Data)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		n += int(b.LastOffsetDelta()) + 1
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if n != 6 {
		t.Fatalf("read %d records after power failure, want 6", n)
	}
}
