package groupadmin

import (
	"context"
	"errors"
	"testing"

	"github.com/tiered/tiered/fetchcache/groups"
)

// joiningLive is a coordinator whose group gains a member after it was
// first asked: a consumer joins while a reset is being planned.
type joiningLive struct{ asked int }

func (l *joiningLive) LiveGroup(context.Context, string) (Live, bool) {
	l.asked++
	if l.asked == 1 {
		return Live{State: groups.StateEmpty}, true
	}
	return Live{State: groups.StateStable, Members: []Member{{MemberID: "m1"}}}, true
}

// TestReviewResetRefusedWhenMemberJoinsDuringPlan: in the fetch service, a
// reset executed while a consumer joined the group after the emptiness
// check (the plan reads every partition's offsets from the tier first) is
// refused, not written under the live consumer: Kafka's reset commits
// without membership, which its coordinator refuses once the group has
// members (UNKNOWN_MEMBER_ID), checked atomically with the write.
func TestReviewResetRefusedWhenMemberJoinsDuringPlan(t *testing.T) {
	ctx := context.Background()
	a, s := newAdmin(t, &joiningLive{})
	commit(t, s, "app", groups.StateEmpty, map[int32]int64{0: 5})
	if _, err := a.Reset(ctx, "app", ResetSpec{Topic: "orders", ToLatest: true, Execute: true}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Reset: %v, want %v", err, ErrNotEmpty)
	}
	if o, _ := s.Reload(ctx, "app"); o.Offsets[0].Offset != 5 {
		t.Fatalf("the reset was written under a live member: %+v", o.Offsets)
	}
}
