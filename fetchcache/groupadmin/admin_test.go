package groupadmin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/remotetier/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// part is a partition of the fake catalog: records at offsets start.. with the given
// timestamps.
type part struct {
	start int64
	ts    []int64
}

func (p part) Offsets(context.Context) (fetchcache.Offsets, error) {
	end := p.start + int64(len(p.ts))
	return fetchcache.Offsets{LogStart: p.start, LogEnd: end, LastStable: end}, nil
}

func (p part) Read(context.Context, int64, int) ([]byte, error) {
	return nil, errors.New("not read by the admin")
}

func (p part) OffsetForTimestamp(_ context.Context, ts int64) (int64, int64, bool, error) {
	for i, t := range p.ts {
		if t >= ts {
			return p.start + int64(i), t, true, nil
		}
	}
	return 0, 0, false, nil
}

func (p part) AbortedTxns(context.Context, int64, int64) ([]fetchcache.AbortedTxn, error) {
	return nil, nil
}

type catalog map[string][]part

func (c catalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	var out []fetchcache.TopicInfo
	for name, ps := range c {
		ti := fetchcache.TopicInfo{Name: name}
		for i := range ps {
			ti.Partitions = append(ti.Partitions, int32(i))
		}
		out = append(out, ti)
	}
	return out, nil
}

func (c catalog) Partition(_ context.Context, topic string, p int32) (fetchcache.Partition, error) {
	ps, ok := c[topic]
	if !ok || p < 0 || int(p) >= len(ps) {
		return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: p}
	}
	return ps[p], nil
}

type liveMap map[string]Live

func (l liveMap) LiveGroup(_ context.Context, g string) (Live, bool) { v, ok := l[g]; return v, ok }

const t0 = int64(1_700_000_000_000)

// testCatalog: topic "orders", 3 partitions. p0: offsets 0..9 at t0, t0+10, ...; p1:
// offsets 100..104 (log start 100) at t0+5, t0+15, ...; p2: empty.
func testCatalog() catalog {
	ts := func(n int, base int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = base + int64(i)*10
		}
		return out
	}
	return catalog{"orders": {{0, ts(10, t0)}, {100, ts(5, t0+5)}, {0, nil}}}
}

func newAdmin(t *testing.T, live LiveSource) (*Admin, *groups.Store) {
	t.Helper()
	s := groups.NewStore(objstore.NewMemory(), groups.StoreOptions{})
	return &Admin{Store: s, Catalog: testCatalog(), Live: live, Now: func() time.Time { return time.UnixMilli(t0 + 1000) }}, s
}

func commit(t *testing.T, s *groups.Store, group, state string, offs map[int32]int64) {
	t.Helper()
	if _, err := s.Update(context.Background(), group, func(o *groups.Object) error {
		o.State, o.ProtocolType = state, "consumer"
		for p, off := range offs {
			o.Offsets = setOffset(o.Offsets, groups.Offset{Topic: "orders", Partition: p, Offset: off, LeaderEpoch: -1})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestResetTargets(t *testing.T) {
	at := func(ms int64) *time.Time { tm := time.UnixMilli(ms); return &tm }
	for _, tc := range []struct {
		name string
		spec ResetSpec
		want []int64 // new offset of p0, p1, p2
	}{
		{"earliest", ResetSpec{ToEarliest: true}, []int64{0, 100, 0}},
		{"latest", ResetSpec{ToLatest: true}, []int64{10, 105, 0}},
		// ListOffsets' rule: the first offset with timestamp >= T.
		{"datetime exact", ResetSpec{ToDatetime: at(t0 + 30)}, []int64{3, 103, 0}},
		{"datetime between", ResetSpec{ToDatetime: at(t0 + 31)}, []int64{4, 103, 0}},
		{"datetime before all", ResetSpec{ToDatetime: at(t0 - 1000)}, []int64{0, 100, 0}},
		{"datetime after all", ResetSpec{ToDatetime: at(t0 + 1_000_000)}, []int64{10, 105, 0}},
		{"to offset clamped", ResetSpec{ToOffset: ptr(int64(7))}, []int64{7, 100, 0}},
		{"to offset past end", ResetSpec{ToOffset: ptr(int64(1000))}, []int64{10, 105, 0}},
		// p0 committed 5, p1 committed 102, p2 none (from the log start).
		{"shift back", ResetSpec{ShiftBy: ptr(int64(-3))}, []int64{2, 100, 0}},
		{"shift forward", ResetSpec{ShiftBy: ptr(int64(4))}, []int64{9, 105, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, s := newAdmin(t, nil)
			commit(t, s, "app", groups.StateEmpty, map[int32]int64{0: 5, 1: 102})
			spec := tc.spec
			spec.Topic = "orders"
			plan, err := a.Reset(context.Background(), "app", spec)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Executed || len(plan.Offsets) != 3 {
				t.Fatalf("dry run: executed %v, %d partitions", plan.Executed, len(plan.Offsets))
			}
			for i, po := range plan.Offsets {
				if *po.New != tc.want[i] {
					t.Errorf("p%d: new offset %d, want %d", i, *po.New, tc.want[i])
				}
			}
			// The dry run wrote nothing.
			o, _ := s.Reload(context.Background(), "app")
			if o.Offsets[0].Offset != 5 || len(o.Offsets) != 2 {
				t.Fatalf("dry run changed the object: %+v", o.Offsets)
			}
			spec.Execute = true
			if plan, err = a.Reset(context.Background(), "app", spec); err != nil || !plan.Executed {
				t.Fatalf("execute: %v %+v", err, plan)
			}
			o, _ = s.Reload(context.Background(), "app")
			if len(o.Offsets) != 3 {
				t.Fatalf("after execute: %+v", o.Offsets)
			}
			for i, off := range o.Offsets {
				if off.Offset != tc.want[i] || off.Partition != int32(i) {
					t.Errorf("stored p%d = %d, want %d", off.Partition, off.Offset, tc.want[i])
				}
			}
		})
	}
}

func TestResetRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		live  LiveSource
		state string
		spec  ResetSpec
		want  error
	}{
		{"members in the coordinator", liveMap{"app": {State: groups.StateStable, Members: []Member{{MemberID: "m1"}}}}, groups.StateEmpty, ResetSpec{Topic: "orders", ToEarliest: true, Execute: true}, ErrNotEmpty},
		{"stable in the bucket", nil, groups.StateStable, ResetSpec{Topic: "orders", ToEarliest: true, Execute: true}, ErrNotEmpty},
		{"dry run refused too", nil, groups.StateStable, ResetSpec{Topic: "orders", ToEarliest: true}, ErrNotEmpty},
		{"no method", nil, groups.StateEmpty, ResetSpec{Topic: "orders"}, ErrInvalidReset},
		{"two methods", nil, groups.StateEmpty, ResetSpec{Topic: "orders", ToEarliest: true, ToLatest: true}, ErrInvalidReset},
		{"no topic", nil, groups.StateEmpty, ResetSpec{ToEarliest: true}, ErrInvalidReset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, s := newAdmin(t, tc.live)
			commit(t, s, "app", tc.state, map[int32]int64{0: 5})
			if _, err := a.Reset(ctx, "app", tc.spec); !errors.Is(err, tc.want) {
				t.Fatalf("Reset: %v, want %v", err, tc.want)
			}
			if o, _ := s.Reload(ctx, "app"); o.Offsets[0].Offset != 5 {
				t.Fatalf("refused reset changed the offsets: %+v", o.Offsets)
			}
		})
	}
	a, _ := newAdmin(t, nil)
	var unknown *fetchcache.UnknownTopicOrPartitionError
	if _, err := a.Reset(ctx, "app", ResetSpec{Topic: "nope", ToEarliest: true}); !errors.As(err, &unknown) {
		t.Fatalf("unknown topic: %v", err)
	}
	// A live group with no members may be reset.
	a, s := newAdmin(t, liveMap{"app": {State: groups.StateEmpty}})
	commit(t, s, "app", groups.StateStable, map[int32]int64{0: 5})
	if _, err := a.Reset(ctx, "app", ResetSpec{Topic: "orders", ToLatest: true, Execute: true}); err != nil {
		t.Fatalf("reset of a group its coordinator holds empty: %v", err)
	}
}

func TestDescribeListDelete(t *testing.T) {
	ctx := context.Background()
	live := liveMap{"app": {State: groups.StateStable, ProtocolType: "consumer", Protocol: "range", Generation: 3,
		Members: []Member{{MemberID: "m1", ClientID: "c1", Assignment: []TopicPartitions{{Topic: "orders", Partitions: []int32{0, 2}}}}}}}
	a, s := newAdmin(t, live)
	commit(t, s, "app", groups.StateStable, map[int32]int64{0: 4, 1: 101})
	commit(t, s, "other", groups.StateEmpty, map[int32]int64{0: 1})
	d, err := a.Describe(ctx, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != "coordinator" || d.State != groups.StateStable || d.Generation != 3 || len(d.Members) != 1 || len(d.Offsets) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	want := []PartitionOffset{
		{Topic: "orders", Partition: 0, Committed: 4, LogStart: 0, LogEnd: 10, Lag: 6, Member: "m1"},
		{Topic: "orders", Partition: 1, Committed: 101, LogStart: 100, LogEnd: 105, Lag: 4},
		{Topic: "orders", Partition: 2, Committed: -1, LogStart: 0, LogEnd: 0, Lag: -1, Member: "m1"},
	}
	for i, w := range want {
		if d.Offsets[i] != w {
			t.Errorf("offset %d: %+v, want %+v", i, d.Offsets[i], w)
		}
	}
	list, err := a.List(ctx, []string{"app", "memonly"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Group != "app" || list[0].Members != 1 || list[0].Partitions != 2 || list[1].Group != "other" || list[1].State != groups.StateEmpty {
		t.Fatalf("list: %+v", list)
	}
	if err := a.Delete(ctx, "app"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete with members: %v", err)
	}
	if err := a.Delete(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Describe(ctx, "other", ""); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if err := a.Delete(ctx, "other"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if list, _ = a.List(ctx, nil, ""); len(list) != 1 || list[0].Group != "app" {
		t.Fatalf("list after delete: %+v", list)
	}
}

// commitOffsets writes group's object with state and exactly offs.
func commitOffsets(t *testing.T, s *groups.Store, group, state string, offs ...groups.Offset) {
	t.Helper()
	if _, err := s.Update(context.Background(), group, func(o *groups.Object) error {
		o.State, o.ProtocolType, o.Offsets = state, "consumer", offs
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func off(topic string, p int32, n int64) groups.Offset {
	return groups.Offset{Topic: topic, Partition: p, Offset: n, LeaderEpoch: -1}
}

// topicCatalog is testCatalog with a second topic, "payments" (one partition, offsets 0..2).
func topicCatalog() catalog {
	c := testCatalog()
	c["payments"] = []part{{0, []int64{t0, t0 + 10, t0 + 20}}}
	return c
}

func TestListDescribeTopic(t *testing.T) {
	ctx := context.Background()
	live := liveMap{
		// Assigned payments with no offset of it yet: listed under payments.
		"reader": {State: groups.StateStable, Members: []Member{{MemberID: "m1", Assignment: []TopicPartitions{{Topic: "payments", Partitions: []int32{0}}}}}},
	}
	a, s := newAdmin(t, live)
	a.Catalog = topicCatalog()
	commitOffsets(t, s, "both", groups.StateEmpty, off("orders", 0, 4), off("orders", 1, 101), off("payments", 0, 2))
	commitOffsets(t, s, "orders-only", groups.StateEmpty, off("orders", 2, 0))
	commitOffsets(t, s, "reader", groups.StateStable, off("orders", 0, 1))
	for _, tc := range []struct {
		topic string
		want  map[string]int // group -> partitions
	}{
		{"", map[string]int{"both": 3, "orders-only": 1, "reader": 1}},
		{"orders", map[string]int{"both": 2, "orders-only": 1, "reader": 1}},
		{"payments", map[string]int{"both": 1, "reader": 0}},
		{"nope", map[string]int{}},
	} {
		t.Run("list "+tc.topic, func(t *testing.T) {
			list, err := a.List(ctx, []string{"reader"}, tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, g := range list {
				got[g.Group] = g.Partitions
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("groups %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		group, topic string
		want         []string // topic-partition of each offset
	}{
		{"both", "", []string{"orders-0", "orders-1", "payments-0"}},
		{"both", "payments", []string{"payments-0"}},
		{"both", "orders", []string{"orders-0", "orders-1"}},
		{"orders-only", "payments", nil},
		// The live member's assigned partition with no commit is shown only under its topic.
		{"reader", "payments", []string{"payments-0"}},
		{"reader", "orders", []string{"orders-0"}},
	} {
		t.Run("describe "+tc.group+" "+tc.topic, func(t *testing.T) {
			d, err := a.Describe(ctx, tc.group, tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range d.Offsets {
				got = append(got, fmt.Sprintf("%s-%d", o.Topic, o.Partition))
			}
			if !slices.Equal(got, tc.want) || d.Offsets == nil {
				t.Fatalf("offsets %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeleteOffsets: delete --topic removes only that topic's committed offsets and keeps
// the group (Kafka's OffsetDelete); refusals leave the object as it was.
func TestDeleteOffsets(t *testing.T) {
	ctx := context.Background()
	var unknown *fetchcache.UnknownTopicOrPartitionError
	assignedOrders := Live{State: groups.StateStable, Members: []Member{{MemberID: "m1", Assignment: []TopicPartitions{{Topic: "orders", Partitions: []int32{0}}}}}}
	for _, tc := range []struct {
		name     string
		live     LiveSource // nil: bucket mode
		state    string
		offs     []groups.Offset // "app"'s object (none: no object)
		topic    string
		want     []int32         // partitions deleted
		wantErr  error           // errors.Is
		wantUnk  bool            // UNKNOWN_TOPIC_OR_PARTITION
		wantKept []groups.Offset // the object after (nil: not checked)
	}{
		{name: "bucket empty group", state: groups.StateEmpty, offs: []groups.Offset{off("orders", 0, 4), off("orders", 2, 1), off("payments", 0, 2)}, topic: "orders",
			want: []int32{0, 2}, wantKept: []groups.Offset{off("payments", 0, 2)}},
		{name: "bucket stable group refused", state: groups.StateStable, offs: []groups.Offset{off("orders", 0, 4), off("payments", 0, 2)}, topic: "orders",
			wantErr: ErrNotEmpty, wantKept: []groups.Offset{off("orders", 0, 4), off("payments", 0, 2)}},
		{name: "no offset of a served topic", state: groups.StateEmpty, offs: []groups.Offset{off("orders", 0, 4)}, topic: "payments",
			want: []int32{}, wantKept: []groups.Offset{off("orders", 0, 4)}},
		{name: "unknown topic", state: groups.StateEmpty, offs: []groups.Offset{off("orders", 0, 4)}, topic: "nope", wantUnk: true},
		{name: "offsets of a topic no longer served", state: groups.StateEmpty, offs: []groups.Offset{off("gone", 3, 9), off("orders", 0, 4)}, topic: "gone",
			want: []int32{3}, wantKept: []groups.Offset{off("orders", 0, 4)}},
		{name: "no group", topic: "orders", wantErr: ErrGroupNotFound},
		{name: "live member assigned the topic", live: liveMap{"app": assignedOrders}, state: groups.StateStable, offs: []groups.Offset{off("orders", 0, 4), off("payments", 0, 2)}, topic: "orders",
			wantErr: ErrSubscribedToTopic, wantKept: []groups.Offset{off("orders", 0, 4), off("payments", 0, 2)}},
		{name: "live member assigned another topic", live: liveMap{"app": assignedOrders}, state: groups.StateStable, offs: []groups.Offset{off("orders", 0, 4), off("payments", 0, 2)}, topic: "payments",
			want: []int32{0}, wantKept: []groups.Offset{off("orders", 0, 4)}},
		{name: "live group without members", live: liveMap{"app": {State: groups.StateEmpty}}, state: groups.StateStable, offs: []groups.Offset{off("orders", 1, 4)}, topic: "orders",
			want: []int32{1}, wantKept: []groups.Offset{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, s := newAdmin(t, tc.live)
			a.Catalog = topicCatalog()
			if tc.offs != nil {
				commitOffsets(t, s, "app", tc.state, tc.offs...)
			}
			got, err := a.DeleteOffsets(ctx, "app", tc.topic)
			switch {
			case tc.wantErr != nil || tc.wantUnk:
				if (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.wantUnk && !errors.As(err, &unknown)) {
					t.Fatalf("DeleteOffsets: %v, want %v (unknown topic %v)", err, tc.wantErr, tc.wantUnk)
				}
			case err != nil:
				t.Fatalf("DeleteOffsets: %v", err)
			case got.Group != "app" || got.Topic != tc.topic || !slices.Equal(got.Partitions, tc.want) || got.Partitions == nil:
				t.Fatalf("deleted %+v, want partitions %v", got, tc.want)
			}
			if tc.wantKept == nil {
				return
			}
			o, err := s.Reload(ctx, "app")
			if err != nil || o == nil {
				t.Fatalf("the group is gone: %v %v", o, err)
			}
			if !slices.EqualFunc(o.Offsets, tc.wantKept, func(x, y groups.Offset) bool {
				return x.Topic == y.Topic && x.Partition == y.Partition && x.Offset == y.Offset
			}) {
				t.Fatalf("kept %+v, want %+v", o.Offsets, tc.wantKept)
			}
			if o.State != tc.state {
				t.Fatalf("state %s, want %s (the group stays)", o.State, tc.state)
			}
		})
	}
}
