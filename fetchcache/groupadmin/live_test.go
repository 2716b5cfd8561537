package groupadmin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestCoordinatorLive: the membership a real coordinator holds — member, client, the
// consumer assignment decoded — and delete through the coordinator, refused with members.
func TestCoordinatorLive(t *testing.T) {
	ctx := context.Background()
	store, c := newCoordinator(t)
	join := func(member string) *kmsg.JoinGroupResponse { return joinApp(ctx, c, member) }
	r := join("")
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %d", r.ErrorCode)
	}
	r = join(r.MemberID)
	if r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: []int32{0, 2}}}
	sq := kmsg.NewPtrSyncGroupRequest()
	sq.Version, sq.Group, sq.MemberID, sq.Generation = 5, "app", r.MemberID, r.Generation
	sq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: a.AppendTo(nil)}}
	if sr := c.Sync(ctx, sq); sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	cq := kmsg.NewPtrOffsetCommitRequest()
	cq.Version, cq.Group, cq.MemberID, cq.Generation = 9, "app", r.MemberID, r.Generation
	cq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	if cr := c.Commit(ctx, cq, nil); cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %d", cr.Topics[0].Partitions[0].ErrorCode)
	}
	live := CoordinatorLive{C: c}
	l, ok := live.LiveGroup(ctx, "app")
	if !ok || l.State != groups.StateStable || len(l.Members) != 1 {
		t.Fatalf("live: %+v %v", l, ok)
	}
	m := l.Members[0]
	if m.MemberID != r.MemberID || m.ClientID != "billing-1" || len(m.Assignment) != 1 || m.Assignment[0].Topic != "orders" || len(m.Assignment[0].Partitions) != 2 {
		t.Fatalf("member: %+v", m)
	}
	if _, ok := live.LiveGroup(ctx, "never"); ok {
		t.Fatal("a group that does not exist is live")
	}
	admin := &Admin{Store: store, Catalog: catalog{}, Live: live}
	if err := admin.Delete(ctx, "app"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete with a member: %v", err)
	}
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version, lq.Group = 5, "app"
	lq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	if lr := c.Leave(lq); lr.ErrorCode != 0 {
		t.Fatalf("leave: %d", lr.ErrorCode)
	}
	if err := admin.Delete(ctx, "app"); err != nil {
		t.Fatalf("delete after the member left: %v", err)
	}
	if names := live.Names(ctx); len(names) != 0 {
		t.Fatalf("groups after delete: %v", names)
	}
}

// newCoordinator is a coordinator (no initial rebalance delay) over a memory bucket.
func newCoordinator(t *testing.T) (*groups.Store, *groups.Coordinator) {
	t.Helper()
	store := groups.NewStore(objstore.NewMemory(), groups.StoreOptions{})
	c, err := groups.New(groups.Options{Store: store, InitialRebalanceDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Wait)
	return store, c
}

// joinApp sends a JoinGroup v9 of consumer client billing-1 (range, 10 s
// timeouts) for group "app" as member.
func joinApp(ctx context.Context, c *groups.Coordinator, member string) *kmsg.JoinGroupResponse {
	return joinAppWith(ctx, c, member, []byte{})
}

// joinAppWith is joinApp with the range protocol's metadata (the consumer's subscription).
func joinAppWith(ctx context.Context, c *groups.Coordinator, member string, metadata []byte) *kmsg.JoinGroupResponse {
	q := kmsg.NewPtrJoinGroupRequest()
	q.Version, q.Group, q.MemberID, q.ProtocolType = 9, "app", member, groups.ProtocolTypeConsumer
	q.SessionTimeoutMillis, q.RebalanceTimeoutMillis = 10000, 10000
	q.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: metadata}}
	return c.Join(ctx, groups.Client{ID: "billing-1", Host: "10.0.0.1"}, q)
}

// TestCoordinatorLiveDeleteOffsets: delete --topic in the fetch service goes through the
// coordinator's OffsetDelete, which knows the members' subscriptions: refused for a topic a
// member subscribes to (even one it is assigned no partition of yet), allowed for another;
// the group and its other offsets stay.
func TestCoordinatorLiveDeleteOffsets(t *testing.T) {
	ctx := context.Background()
	store, c := newCoordinator(t)
	if _, err := store.Update(ctx, "app", func(o *groups.Object) error {
		o.ProtocolType = groups.ProtocolTypeConsumer
		o.Offsets = []groups.Offset{{Topic: "orders", Partition: 0, Offset: 3, LeaderEpoch: -1}, {Topic: "payments", Partition: 0, Offset: 2, LeaderEpoch: -1}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"orders"}
	r := joinAppWith(ctx, c, "", meta.AppendTo(nil))
	if r = joinAppWith(ctx, c, r.MemberID, meta.AppendTo(nil)); r.ErrorCode != 0 {
		t.Fatalf("join: %d", r.ErrorCode)
	}
	cat := catalog{"orders": {{0, []int64{t0}}}, "payments": {{0, []int64{t0}}}}
	admin := &Admin{Store: store, Catalog: cat, Live: CoordinatorLive{C: c}}
	if _, err := admin.DeleteOffsets(ctx, "app", "orders"); !errors.Is(err, ErrSubscribedToTopic) {
		t.Fatalf("delete offsets of the subscribed topic: %v", err)
	}
	if d, err := admin.DeleteOffsets(ctx, "app", "payments"); err != nil || !slices.Equal(d.Partitions, []int32{0}) {
		t.Fatalf("delete offsets of another topic: %+v %v", d, err)
	}
	o, err := store.Reload(ctx, "app")
	if err != nil || o == nil || len(o.Offsets) != 1 || o.Offsets[0].Topic != "orders" {
		t.Fatalf("after: %+v %v", o, err)
	}
	if _, err := admin.DeleteOffsets(ctx, "none", "orders"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	// A catalog that cannot list its topics: nothing deleted, rather than only the
	// partitions the group had committed (one committed since would stay).
	down := &Admin{Store: store, Catalog: unlistable{cat}, Live: CoordinatorLive{C: c}}
	if d, err := down.DeleteOffsets(ctx, "app", "orders"); err == nil || !strings.Contains(err.Error(), "bucket down") {
		t.Fatalf("delete offsets with the catalog unreadable: %+v %v", d, err)
	}
	if o, err := store.Reload(ctx, "app"); err != nil || o == nil || len(o.Offsets) != 1 {
		t.Fatalf("after a refused delete: %+v %v", o, err)
	}
}

// unlistable is a catalog whose topic listing fails.
type unlistable struct{ catalog }

func (unlistable) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	return nil, errors.New("bucket down")
}
