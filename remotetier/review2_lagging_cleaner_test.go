package remotetier

import (
	"context"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestLaggingCleanerReplaceKeepsDeletedKeyDeleted: the old leader's
// cleaner dropped K=v (17) and, past delete.retention.ms, K's tombstone
// (35); its sidecar replaced both committed segments with the cleaned
// copies, so the remote tier holds no K. The new leader's cleaner lags:
// it has been over [0, 20) only (its checkpoint is 20), whose copy still
// holds K=v since the tombstone lies past what it cleaned. Replacing the
// committed [0, 19] with that copy brings K=v back with no tombstone after
// it in the bucket (the new leader's [20, 40), which has it, is not
// cleaned, so it replaces nothing): a deleted key served again, until the
// new leader's cleaner passes 40 and [0, 20) is replaced once more.
func TestLaggingCleanerReplaceKeepsDeletedKeyDeleted(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old, r0, r1 := ccDeletedKeyLog(t)
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The old leader cleans: K=v and then K's tombstone go.
	ccCleanDeletedKey(t, old, r0, r1)
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, table := ecConsume(t, mem, "c"); ecHas(recs, "17:K=v") || table["K"] != "" {
		t.Fatalf("setup: the remote tier serves %v", recs)
	}
	// The new leader: same rolls; its cleaner has been over [0, 20) only
	// (dropping nothing but x18's older copy, which it rewrote).
	lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	lead.p.CleanedUpTo = 20
	n0 := append([]string(nil), r0...)
	n0[18] = "-"
	lead.p.Segments = []SegmentMeta{
		lead.segment(0, 20, 20, ccRecords(t, 0, n0...)),
		lead.segment(20, 40, 40, ccRecords(t, 20, r1...)),
	}
	if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, table := ecConsume(t, mem, "c"); table["K"] != "" {
		t.Fatalf("the remote tier serves deleted key K=%s again (no tombstone after it): %v", table["K"], recs)
	}
}
