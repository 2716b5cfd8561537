package groups

import (
	"testing"
)

// TestReviewFollowerSessionRestartsAtAssignment: a follower that sent its
// SyncGroup and waited for the leader's longer than its session timeout
// (within the rebalance timeout) keeps its membership once the assignment
// reaches it: its session restarts when the assignment is propagated, as
// Kafka's propagateAssignment reschedules every member's heartbeat. Without
// that, the next Tick expires it on the spot and the group rebalances again.
func TestReviewFollowerSessionRestartsAtAssignment(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	a, ja := h.newMember(g)
	recv(t, ja)
	h.sync(g, a, 1, map[string]string{a: "A"})
	b, jb := h.newMember(g)
	ra := recv(t, h.joinAsync(joinReq(g, a, nil)))
	rb := recv(t, jb)
	gen := ra.Generation
	if rb.Generation != gen || ra.LeaderID != a {
		t.Fatalf("generation: a %+v b %+v", ra, rb)
	}
	sb := h.syncAsync(g, b, gen, nil)
	blocked(t, sb, "b's sync before the leader's")
	// The leader takes longer than b's session (10 s) but less than the
	// rebalance timeout (20 s) to send its assignment; it heartbeats.
	h.clk.Add(session / 2)
	wantCode(t, "a heartbeat", h.heartbeat(g, a, gen, nil), 0)
	h.clk.Add(session/2 + session/4)
	wantCode(t, "a sync", h.sync(g, a, gen, map[string]string{a: "A2", b: "B2"}).ErrorCode, 0)
	if got := recv(t, sb); got.ErrorCode != 0 || string(got.MemberAssignment) != "B2" {
		t.Fatalf("b's assignment %+v", got)
	}
	h.c.Tick()
	wantCode(t, "b heartbeat right after its assignment", h.heartbeat(g, b, gen, nil), 0)
}
