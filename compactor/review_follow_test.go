package compactor

import (
	"fmt"
	"path"
	"testing"
)

// TestReviewCheckpointNotInSegmentGap: when the last segment the cleaner
// maps ends in an offset gap (offsets a cleaning removed: here 12-19 of the
// segment at 10), the cleaned-to offset is the next segment's base, as
// Kafka's buildOffsetMapForSegment moves the map's latest offset to the
// next segment's base minus one. A checkpoint left in the gap made the next
// plan count that segment both clean and dirty (a dirty ratio with nothing
// dirty), so a log with a low min.cleanable.dirty.ratio was cleaned again,
// every segment rewritten, on every pass.
func TestReviewCheckpointNotInSegmentGap(t *testing.T) {
	e := newEnv(t, map[string]string{"internal.segment.bytes": "100"})
	if err := e.dir.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{".log", ".index", ".timeindex", ".snapshot"} {
		_ = e.fs.Remove(path.Join("/data/t-0", fmt.Sprintf("%020d%s", 0, suf)))
	}
	e.writeRawSegment(0, kv("a", "1"), kv("b", "1"))
	e.writeRawSegment(10, kv("a", "2"), kv("c", "1"))
	e.writeRawSegment(20, kv("d", "1")) // active
	e.openDir()
	e.log = e.partition("t", 0)
	rep := e.pass(false)
	if rep.LogsCleaned != 1 || rep.Logs[0].CleanedToOffset != 20 {
		t.Fatalf("first pass: cleaned %d, to offset %v; want 1 log cleaned to 20\n%s", rep.LogsCleaned, rep.Logs, rep)
	}
	if got, want := show(e.read()), "1:b=1 10:a=2 11:c=1 20:d=1"; got != want {
		t.Fatalf("after cleaning: %s, want %s", got, want)
	}
	// Nothing new: nothing is dirty, and the log is not cleaned again.
	for i := range 2 {
		if rep := e.pass(false); rep.LogsCleaned != 0 || rep.MaxDirtyRatio != 0 {
			t.Fatalf("pass %d with nothing dirty: cleaned %d, max dirty ratio %v\n%s", i+2, rep.LogsCleaned, rep.MaxDirtyRatio, rep)
		}
	}
}
