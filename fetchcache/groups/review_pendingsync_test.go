package groups

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReviewMissedSyncRemovedOnceStable: a member that got its JoinGroup
// answer but sends no SyncGroup within the rebalance timeout is removed,
// and the group rebalances, also when the leader's SyncGroup made the
// group Stable meanwhile (Kafka's pending-sync expiry covers
// CompletingRebalance and Stable). The Java consumer heartbeats from its
// JoinGroup answer on, so without this a follower whose SyncGroup was lost
// stays a member with no assignment for good, and its partitions are read
// by nobody.
func TestReviewMissedSyncRemovedOnceStable(t *testing.T) {
	h, a, b, gen := secondGeneration(t)
	const g = "g"
	wantCode(t, "a sync", h.sync(g, a, gen, map[string]string{a: "A2", b: "B2"}).ErrorCode, 0)
	// b heartbeats (its session holds) but never sends SyncGroup.
	for range 2 {
		h.clk.Add(rebalance / 2)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, gen, nil), 0)
		wantCode(t, "b heartbeat", h.heartbeat(g, b, gen, nil), 0)
		h.c.Tick()
	}
	wantCode(t, "b heartbeat after missing SyncGroup", h.heartbeat(g, b, gen, nil), kerr.UnknownMemberID.Code)
	wantCode(t, "a heartbeat: rejoin", h.heartbeat(g, a, gen, nil), kerr.RebalanceInProgress.Code)
}

// TestReviewSyncOnceStableCounts: a follower whose SyncGroup comes after
// the leader's (the group is Stable by then: the usual order) has synced,
// and stays past the generation's rebalance timeout.
func TestReviewSyncOnceStableCounts(t *testing.T) {
	h, a, b, gen := secondGeneration(t)
	const g = "g"
	wantCode(t, "a sync", h.sync(g, a, gen, map[string]string{a: "A2", b: "B2"}).ErrorCode, 0)
	if s := h.sync(g, b, gen, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "B2" {
		t.Fatalf("b's sync once Stable: %+v", s)
	}
	for range 3 {
		h.clk.Add(rebalance / 2)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, gen, nil), 0)
		wantCode(t, "b heartbeat", h.heartbeat(g, b, gen, nil), 0)
		h.c.Tick()
	}
}
