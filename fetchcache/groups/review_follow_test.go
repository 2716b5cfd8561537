package groups

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func leaveOne(h *harness, group, member string, instance *string) int16 {
	q := kmsg.NewPtrLeaveGroupRequest()
	q.Version = 5
	q.Group = group
	q.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member, InstanceID: instance}}
	return h.c.Leave(q).Members[0].ErrorCode
}

// TestReviewLastLeaveKeepsPendingMember: when the last member of a Stable
// group leaves while a member told MEMBER_ID_REQUIRED (KIP-394) has not yet
// come back with its id, the group becomes Empty with one generation bump,
// and the pending member's JoinGroup with its id is let in (Kafka keeps
// pending members until their session times out; they are not cleared when
// a generation completes). The group's generation advances once per
// completed rebalance.
func TestReviewLastLeaveKeepsPendingMember(t *testing.T) {
	t.Run("pending", testLastLeavePending)
	t.Run("generation", testLastLeaveGeneration)
	t.Run("sync-expiry", testSyncExpiryGeneration)
}

func testLastLeavePending(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	a, ja := h.newMember(g)
	ra := recv(t, ja)
	wantCode(t, "a sync", h.sync(g, a, ra.Generation, map[string]string{a: "A"}).ErrorCode, 0)
	// x is told its member id, then a leaves before x comes back with it.
	rx := h.c.Join(context.Background(), Client{ID: "cl"}, joinReq(g, "", nil))
	wantCode(t, "x's first join", rx.ErrorCode, kerr.MemberIDRequired.Code)
	wantCode(t, "a leaves", leaveOne(h, g, a, nil), 0)
	h.c.Tick()
	rx2 := recv(t, h.joinAsync(joinReq(g, rx.MemberID, nil)))
	wantCode(t, "x's join with its member id", rx2.ErrorCode, 0)
	if rx2.Generation != ra.Generation+2 {
		t.Fatalf("x joined generation %d; a's was %d, want %d (one bump as the group emptied, one for x's)", rx2.Generation, ra.Generation, ra.Generation+2)
	}
}

// testLastLeaveGeneration: without a pending member, the last member
// leaving bumps the generation once, as Kafka's initNextGeneration to
// Empty does.
func testLastLeaveGeneration(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g2 = "g2"
	b, jb := h.newMember(g2)
	rb := recv(t, jb)
	wantCode(t, "b sync", h.sync(g2, b, rb.Generation, map[string]string{b: "B"}).ErrorCode, 0)
	wantCode(t, "b leaves", leaveOne(h, g2, b, nil), 0)
	_, jc := h.newMember(g2)
	rc := recv(t, jc)
	if rc.Generation != rb.Generation+2 {
		t.Fatalf("c joined generation %d; b's was %d, want %d", rc.Generation, rb.Generation, rb.Generation+2)
	}
}

// testSyncExpiryGeneration: the last member removed for sending no
// SyncGroup within the rebalance timeout empties the group with one
// generation bump.
func testSyncExpiryGeneration(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	_, ja := h.newMember(g)
	ra := recv(t, ja) // and never syncs
	h.clk.Add(rebalance)
	h.c.Tick()
	_, jc := h.newMember(g)
	rc := recv(t, jc)
	if rc.Generation != ra.Generation+2 {
		t.Fatalf("c joined generation %d; a's was %d, want %d", rc.Generation, ra.Generation, ra.Generation+2)
	}
}

// TestReviewNoRejoinKeepsStaticMembers: a rebalance in which no member
// rejoins (the group's remaining members are static and offline) does not
// form a generation with a leader that never rejoined; as Kafka's
// onCompleteJoin, it waits another rebalance timeout, and the static
// members stay until their session timeout (or a LeaveGroup with their
// instance id) removes them, so a static member back within its session
// rejoins with its member id.
func TestReviewNoRejoinKeepsStaticMembers(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	ia := "inst-a"
	long := 60 * time.Second // a static member's session outlives restarts
	joinA := func(member string) *kmsg.JoinGroupRequest {
		q := joinReq(g, member, &ia)
		q.SessionTimeoutMillis = int32(long / time.Millisecond)
		return q
	}
	ra := recv(t, h.joinAsync(joinA("")))
	wantCode(t, "a join", ra.ErrorCode, 0)
	a := ra.MemberID
	wantCode(t, "a sync", h.sync(g, a, ra.Generation, map[string]string{a: "A"}).ErrorCode, 0)
	b, jb := h.newMember(g)
	h.clk.Add(time.Second)
	wantCode(t, "a heartbeat", h.heartbeat(g, a, ra.Generation, &ia), kerr.RebalanceInProgress.Code)
	rb := recv(t, h.joinAsync(joinA(a)))
	rbb := recv(t, jb)
	wantCode(t, "a rejoin", rb.ErrorCode, 0)
	wantCode(t, "b join", rbb.ErrorCode, 0)
	gen := rb.Generation
	wantCode(t, "a sync 2", h.sync(g, a, gen, map[string]string{a: "A", b: "B"}).ErrorCode, 0)
	wantCode(t, "b sync 2", h.sync(g, b, gen, nil).ErrorCode, 0)
	// a goes offline (a restart); b leaves: the rebalance waits for a.
	wantCode(t, "b leaves", leaveOne(h, g, b, nil), 0)
	for range 5 { // 50 s: past two rebalance timeouts, within a's session
		h.clk.Add(rebalance / 2)
		h.c.Tick()
	}
	r := recv(t, h.joinAsync(joinA(a)))
	wantCode(t, "a rejoins with its member id within its session", r.ErrorCode, 0)
	if r.LeaderID != a {
		t.Fatalf("a's rejoin: leader %q, want a %q", r.LeaderID, a)
	}
	wantCode(t, "a sync 3", h.sync(g, a, r.Generation, map[string]string{a: "A"}).ErrorCode, 0)

	// a goes offline for good; a member comes and goes: the wait ends
	// when a's session passes, and the group empties.
	c, jc := h.newMember(g)
	wantCode(t, "c leaves", leaveOne(h, g, c, nil), 0)
	wantCode(t, "c's join", recv(t, jc).ErrorCode, kerr.UnknownMemberID.Code)
	for range 7 {
		h.clk.Add(rebalance / 2)
		h.c.Tick()
	}
	h.c.mu.Lock()
	state, n := h.c.groups[g].state, len(h.c.groups[g].members)
	h.c.mu.Unlock()
	if state != StateEmpty || n != 0 {
		t.Fatalf("after a's session passed: state %s with %d members, want Empty", state, n)
	}
}

// TestReviewMetadataLimitCountsUTF16Units: offset.metadata.max.bytes
// (4096) bounds the commit metadata's length as Kafka measures it,
// String.length(), in UTF-16 code units (GroupMetadataManager's
// validateOffsetMetadataLength, OffsetMetadataManager's isMetadataInvalid),
// not in UTF-8 bytes: 3,000 "é" (6,000 bytes) are within it, 4,097 ASCII
// characters or 2,049 characters outside the BMP (4,098 units) are not.
func TestReviewMetadataLimitCountsUTF16Units(t *testing.T) {
	h := newHarness(t, nil, nil)
	for _, tc := range []struct {
		md   string
		want int16
	}{
		{strings.Repeat("é", 3000), 0},
		{strings.Repeat("x", 4096), 0},
		{strings.Repeat("€", 4096), 0},
		{strings.Repeat("x", 4097), kerr.OffsetMetadataTooLarge.Code},
		{strings.Repeat("😀", 2048), 0},
		{strings.Repeat("😀", 2049), kerr.OffsetMetadataTooLarge.Code},
	} {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version = 9
		q.Group, q.Generation = "s", -1
		md := tc.md
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1, Metadata: &md}}}}
		got := h.c.Commit(context.Background(), q, nil).Topics[0].Partitions[0].ErrorCode
		wantCode(t, fmt.Sprintf("metadata of %d bytes, %d runes", len(md), utf8.RuneCountInString(md)), got, tc.want)
	}
}
