package groupadmin

import (
	"context"
	"errors"
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
	d, err := a.Describe(ctx, "app")
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
	list, err := a.List(ctx, []string{"app", "memonly"})
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
	if _, err := a.Describe(ctx, "other"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if err := a.Delete(ctx, "other"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if list, _ = a.List(ctx, nil); len(list) != 1 || list[0].Group != "app" {
		t.Fatalf("list after delete: %+v", list)
	}
}
