package remotetier

import (
	"context"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestCutPastCleanerHoleMarkedCompacted: a compacted partition's new
// leader holds its predecessor's cleaning in a segment its own cleaner has
// not been over (a replica that fetched the leader's log after the leader
// cleaned it, its cleaner checkpoint not past it yet): offsets 15 and 16
// have no record. Its segment [10, 30) crosses the committed end (15) and
// is cut there; the cut copy starts at the next batch (17), as it may in a
// compacted partition, but it was committed as not compacted with base
// offset 15, which bucket verify reports as corrupt (the first batch must
// start at the base of a segment that is not compacted).
func TestCutPastCleanerHoleMarkedCompacted(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	old.p.Segments = []SegmentMeta{old.segment(0, 15, 15, ccRecords(t, 0, ccSeq("k", 0, 15, "v")...))}
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	lead.p.CleanedUpTo = 0
	recs := append(append(ccSeq("k", 10, 15, "v"), "-", "-"), ccSeq("k", 17, 30, "v")...)
	lead.p.Segments = []SegmentMeta{lead.segment(10, 30, 30, ccRecords(t, 10, recs...))}
	if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if m := upLoad(t, mem, "c", 0); m.NextOffset() != 30 {
		t.Fatalf("committed end %d, want 30", m.NextOffset())
	}
	if vr, err := VerifyBucket(ctx, mem, DefaultVerifyOptions()); err != nil || len(vr.Problems) != 0 {
		t.Fatalf("bucket verify: %v, problems %+v", err, vr.Problems)
	}
	if got, _ := ecConsume(t, mem, "c"); len(got) != 28 {
		t.Fatalf("the remote tier serves %v", got)
	}
}
