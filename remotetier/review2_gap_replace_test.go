package remotetier

import (
	"context"
	"testing"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestReplaceOverRecordedGap: a compacted partition whose root records a
// lost gap — written while the uploader did not know the partition was
// compacted (a release before 05b79b2, a sidecar whose metadata source
// gives no cleanup.policy while the cleaner-offset-checkpoint does not
// name the partition yet, or a topic changed from delete to compact) —
// where the cleaner later merges the segments on both sides of the gap
// into one. The cleaned segment covers the gap's offsets, so Replace's
// root failed validation ("gaps overlaps segment") on every pass: not a
// conflict but an error, which stopped the partition's commit, so nothing
// after it ([40, 49]) was ever uploaded.
func TestReplaceOverRecordedGap(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	src := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	// Not known compacted yet: the cleaner's hole [15, 19] between
	// [0, 14] and [20, 29] is taken for a loss.
	src.p.Compacted, src.p.CleanedUpTo = false, 0
	src.p.Segments = []SegmentMeta{src.segment(0, 15, 20, ccRecords(t, 0, ccSeq("k", 0, 15, "v")...))}
	u := upUploader(t, mem, src, Options{})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	src.p.Segments = append(src.p.Segments, src.segment(20, 30, 30, ccRecords(t, 20, ccSeq("k", 20, 30, "v")...)))
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if m := upLoad(t, mem, "c", 0); len(m.Gaps) != 1 || m.Gaps[0].BaseOffset != 15 || m.Gaps[0].LastOffset != 19 {
		t.Fatalf("setup: gaps %+v, want [15, 19] recorded", m.Gaps)
	}
	// Now known compacted; the cleaner merged [0, 20) and [20, 30) into one
	// segment (k3 dropped), and [30, 40) and [40, 50) rolled.
	merged := append(append(append(ccSeq("k", 0, 3, "v"), "-"), ccSeq("k", 4, 15, "v")...), "-", "-", "-", "-", "-")
	merged = append(merged, ccSeq("k", 20, 30, "v")...)
	src.p.Compacted, src.p.CleanedUpTo = true, 30
	src.logs = map[int64][]byte{}
	src.p.Segments = []SegmentMeta{
		src.segment(0, 30, 30, ccRecords(t, 0, merged...)),
		src.segment(30, 40, 40, ccRecords(t, 30, ccSeq("k", 30, 40, "v")...)),
		src.segment(40, 50, 50, ccRecords(t, 40, ccSeq("k", 40, 50, "v")...)),
	}
	for pass := range 3 {
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	m := upLoad(t, mem, "c", 0)
	if m.NextOffset() != 50 {
		t.Fatalf("committed end %d, want 50: the partition's uploads stalled", m.NextOffset())
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if recs, _ := ecConsume(t, mem, "c"); ecHas(recs, "3:k3=v") {
		t.Errorf("the remote tier still serves k3, which the cleaner dropped: %v", recs)
	}
	upCheckConsistent(t, mem, "c", 0)
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}
