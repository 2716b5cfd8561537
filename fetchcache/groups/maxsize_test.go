package groups

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMaxGroupSize: group.max.size bounds a group's members plus the ones
// told to come back with their member id (KIP-394), so a client looping on
// JoinGroup cannot grow a group without end: past the bound a new member
// gets GROUP_MAX_SIZE_REACHED and is not remembered; a member already told
// its id is still let in; an expired pending member frees its place.
func TestMaxGroupSize(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.MaxGroupSize = 3 })
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		r := h.c.Join(ctx, Client{ID: "c"}, joinReq("g", "", nil))
		if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
			t.Fatalf("join %d: %v %q, want MEMBER_ID_REQUIRED with an id", i, kerr.ErrorForCode(r.ErrorCode), r.MemberID)
		}
		ids = append(ids, r.MemberID)
	}
	for _, instance := range []*string{nil, new("static-1")} {
		r := h.c.Join(ctx, Client{ID: "c"}, joinReq("g", "", instance))
		if r.ErrorCode != kerr.GroupMaxSizeReached.Code || r.MemberID != "" {
			t.Fatalf("join past the bound (instance %v): %v %q, want GROUP_MAX_SIZE_REACHED and no id", instance, kerr.ErrorForCode(r.ErrorCode), r.MemberID)
		}
	}
	h.c.mu.Lock()
	g := h.c.lookup("g")
	n := len(g.members) + len(g.pending)
	h.c.mu.Unlock()
	if n != 3 {
		t.Fatalf("group holds %d members and pending ones, want 3", n)
	}
	// The session of every pending id passes; the first comes back anyway
	// before the coordinator forgets it: it was counted, so it is admitted.
	h.clk.Add(session + 1)
	done := make(chan int16, 1)
	go func() { done <- h.c.Join(ctx, Client{ID: "c"}, joinReq("g", ids[0], nil)).ErrorCode }()
	for deadline, joined := time.Now().Add(10*time.Second), false; !joined; time.Sleep(time.Millisecond) {
		h.c.mu.Lock()
		_, joined = h.c.lookup("g").members[ids[0]]
		h.c.mu.Unlock()
		if !joined && time.Now().After(deadline) {
			t.Fatal("the returning member never joined")
		}
	}
	// The two others never come back: the tick forgets them, the rebalance
	// completes with the one member, and there is room again.
	h.c.Tick()
	if code := <-done; code != 0 {
		t.Fatalf("pending member's rejoin: %v", kerr.ErrorForCode(code))
	}
	if r := h.c.Join(ctx, Client{ID: "c"}, joinReq("g", "", nil)); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("join after the pending ones expired: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestGroupIDTooLongForTheStore: a group id whose object key would pass
// the store's key length is answered INVALID_GROUP_ID by JoinGroup and
// OffsetCommit, not retried against the store for ever; the longest that
// fits is served.
func TestGroupIDTooLongForTheStore(t *testing.T) {
	h := newHarness(t, nil, nil)
	ctx := context.Background()
	fits := strings.Repeat("g", objstore.MaxKeyLen-len(Key("")))
	if len(Key(fits)) != objstore.MaxKeyLen {
		t.Fatalf("key of %d bytes, want %d", len(Key(fits)), objstore.MaxKeyLen)
	}
	for _, tc := range []struct {
		group string
		want  int16
	}{{fits + "g", kerr.InvalidGroupID.Code}, {strings.Repeat("é", 400), kerr.InvalidGroupID.Code}, {fits, kerr.MemberIDRequired.Code}} {
		if r := h.c.Join(ctx, Client{ID: "c"}, joinReq(tc.group, "", nil)); r.ErrorCode != tc.want {
			t.Fatalf("join of a %d-byte group id: %v, want %v", len(tc.group), kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Group, q.Generation = fits+"g", -1
	q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := h.c.Commit(ctx, q, nil); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("commit for a too long group id: %v, want INVALID_GROUP_ID", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
}
