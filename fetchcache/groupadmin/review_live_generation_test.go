package groupadmin

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/groups"
)

// TestReviewDescribeLiveGeneration: in the fetch service, describing an
// active group (HTTP /v1/groups/{g}, the CLI) shows the generation its
// coordinator formed, not 0: the live view carries it.
func TestReviewDescribeLiveGeneration(t *testing.T) {
	ctx := context.Background()
	store, c := newCoordinator(t)
	var gen int32
	for range 2 { // two generations: the second rebalance of a rejoin
		r := joinApp(ctx, c, "")
		if r = joinApp(ctx, c, r.MemberID); r.ErrorCode != 0 {
			t.Fatalf("join: %d", r.ErrorCode)
		}
		sq := kmsg.NewPtrSyncGroupRequest()
		sq.Version, sq.Group, sq.MemberID, sq.Generation = 5, "app", r.MemberID, r.Generation
		sq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte{}}}
		if sr := c.Sync(ctx, sq); sr.ErrorCode != 0 {
			t.Fatalf("sync: %d", sr.ErrorCode)
		}
		lq := kmsg.NewPtrLeaveGroupRequest()
		lq.Version, lq.Group = 5, "app"
		lq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
		if gen == 0 {
			c.Leave(lq) // the next join forms the next generation
		}
		gen = r.Generation
	}
	if gen < 2 {
		t.Fatalf("setup: generation %d", gen)
	}
	admin := &Admin{Store: store, Catalog: catalog{}, Live: CoordinatorLive{C: c}}
	d, err := admin.Describe(ctx, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != "coordinator" || d.State != groups.StateStable || d.Generation != gen {
		t.Fatalf("describe: source %s state %s generation %d, want coordinator Stable %d", d.Source, d.State, d.Generation, gen)
	}
}
