package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableStaticPair is group "g" Stable with two static members, leader l
// (assignment "L") and follower f (assignment "F"), in generation gen.
func stableStaticPair(t *testing.T, protocols ...string) (h *harness, l, f *kmsg.JoinGroupResponse, linst, finst *string, gen int32) {
	t.Helper()
	h = newHarness(t, nil, nil)
	const g = "g"
	ia, ib := "inst-a", "inst-b"
	ra := recv(t, h.joinAsync(joinReq(g, "", &ia, protocols...)))
	h.sync(g, ra.MemberID, ra.Generation, map[string]string{ra.MemberID: "x"})
	jb := h.joinAsync(joinReq(g, "", &ib, protocols...))
	h.waitMembers(g, 2)
	ra = recv(t, h.joinAsync(joinReq(g, ra.MemberID, &ia, protocols...)))
	rb := recv(t, jb)
	gen = ra.Generation
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || rb.Generation != gen || ra.LeaderID != ra.MemberID {
		t.Fatalf("static pair: a %+v b %+v", ra, rb)
	}
	sf := h.syncAsync(g, rb.MemberID, gen, nil)
	h.sync(g, ra.MemberID, gen, map[string]string{ra.MemberID: "L", rb.MemberID: "F"})
	recv(t, sf)
	return h, ra, rb, &ia, &ib, gen
}

// TestReviewStaticRestartWithNewMetadataNoRebalance: a static member that
// restarts (no member id) with subscription metadata other than its last
// join's — a consumer's metadata carries the partitions it owned, which a
// restarted one no longer does — replaces the old member without a
// rebalance as long as the group's protocol stays the one selected
// (KIP-345; Kafka's updateStaticMemberAndRebalance compares the selected
// protocol, not the metadata). The member's metadata is updated: the
// leader sees it at the next rebalance.
func TestReviewStaticRestartWithNewMetadataNoRebalance(t *testing.T) {
	h, l, f, _, finst, gen := stableStaticPair(t)
	const g = "g"
	before := testutilCount(h.c.m.rebalances)
	q := joinReq(g, "", finst)
	q.Protocols[0].Metadata = []byte("meta-range-owned-nothing")
	// Answered at once, not at the end of a rebalance.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := h.c.Join(ctx, Client{ID: "cl"}, q)
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == f.MemberID {
		t.Fatalf("restart with new metadata: %s gen %d (want %d) member %q", codeName(r.ErrorCode), r.Generation, gen, r.MemberID)
	}
	if got := testutilCount(h.c.m.rebalances); got != before {
		t.Fatalf("the static restart rebalanced (%v -> %v)", before, got)
	}
	if s := h.sync(g, r.MemberID, gen, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "F" {
		t.Fatalf("restart sync: %s %q, want F back", codeName(s.ErrorCode), s.MemberAssignment)
	}
	wantCode(t, "leader heartbeat", h.heartbeat(g, l.MemberID, gen, nil), 0)
	// The leader's next join (as leader it rebalances) lists the new
	// metadata.
	jl := h.joinAsync(joinReq(g, l.MemberID, nil))
	for h.c.Describe(context.Background(), g).State != StatePreparingRebalance {
		time.Sleep(time.Millisecond)
	}
	wantCode(t, "follower heartbeat", h.heartbeat(g, r.MemberID, gen, nil), kerr.RebalanceInProgress.Code)
	jf := h.joinAsync(q2(joinReq(g, r.MemberID, finst), "meta-range-owned-nothing"))
	rl := recv(t, jl)
	recv(t, jf)
	for _, m := range rl.Members {
		if m.MemberID == r.MemberID && string(m.ProtocolMetadata) != "meta-range-owned-nothing" {
			t.Fatalf("leader sees the restarted member's metadata %q", m.ProtocolMetadata)
		}
	}
}

func q2(q *kmsg.JoinGroupRequest, md string) *kmsg.JoinGroupRequest {
	q.Protocols[0].Metadata = []byte(md)
	return q
}

// TestReviewStaticRestartChangingProtocolRebalances: a static member that
// restarts with protocols that change the group's selected one does
// rebalance (Kafka's check), so the assignment matches the protocol.
func TestReviewStaticRestartChangingProtocolRebalances(t *testing.T) {
	h, l, _, _, finst, gen := stableStaticPair(t, "range", "roundrobin")
	const g = "g"
	jf := h.joinAsync(joinReq(g, "", finst, "roundrobin"))
	blocked(t, jf, "restart changing the protocol")
	wantCode(t, "leader heartbeat", h.heartbeat(g, l.MemberID, gen, nil), kerr.RebalanceInProgress.Code)
	rl := recv(t, h.joinAsync(joinReq(g, l.MemberID, nil, "range", "roundrobin")))
	rf := recv(t, jf)
	if rl.Generation != gen+1 || rf.Generation != gen+1 || *rl.Protocol != "roundrobin" {
		t.Fatalf("after the rebalance: leader %+v follower %+v", rl, rf)
	}
}
