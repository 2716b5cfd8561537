package groupadmin

import (
	"context"
	"testing"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

const (
	idA = "o3Bx6y0QQxyxS2FrDcDiOw"
	idB = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// Offsets committed against a topic's incarnation that was deleted and
// re-created, or deleted, since are no committed offsets in describe (no lag)
// and list; an offset committed without an ID (before topic IDs) still counts.
// A reset records the current ID and drops the stale offsets from the object.
func TestDescribeAfterTopicRecreated(t *testing.T) {
	ctx := context.Background()
	a, s := newAdmin(t, nil)
	cat := fetchkit.IDCatalog{Catalog: testCatalog(), IDs: map[string]string{"orders": idA}}
	a.Catalog = cat
	if _, err := s.Update(ctx, "g", func(o *groups.Object) error {
		o.State, o.ProtocolType = groups.StateEmpty, "consumer"
		o.Offsets = []groups.Offset{
			{Topic: "gone", Partition: 0, Offset: 3, LeaderEpoch: -1, TopicID: idB},
			{Topic: "orders", Partition: 0, Offset: 5, LeaderEpoch: -1, TopicID: idA},
			{Topic: "orders", Partition: 1, Offset: 102, LeaderEpoch: -1},
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	committed := func() map[string]int64 {
		t.Helper()
		d, err := a.Describe(ctx, "g", "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, po := range d.Offsets {
			out[po.Topic+"-"+string(rune('0'+po.Partition))] = po.Committed
			if po.Topic == "orders" && po.Partition == 0 && po.Lag != 5 {
				t.Fatalf("orders-0 lag %d, want 5", po.Lag)
			}
		}
		return out
	}
	if got := committed(); len(got) != 2 || got["orders-0"] != 5 || got["orders-1"] != 102 {
		t.Fatalf("described before the re-creation: %v (gone's topic deleted: not shown)", got)
	}

	cat.IDs["orders"] = idB // deleted and re-created
	if got := committed(); len(got) != 1 || got["orders-1"] != 102 {
		t.Fatalf("described after the re-creation: %v", got)
	}
	ls, err := a.List(ctx, nil, "orders")
	if err != nil || len(ls) != 1 || ls[0].Partitions != 1 {
		t.Fatalf("list: %+v %v", ls, err)
	}

	if _, err := a.Reset(ctx, "g", ResetSpec{Topic: "orders", Partitions: []int32{2}, ToEarliest: true, Execute: true}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Reload(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Offsets) != 2 || o.Offsets[0].Partition != 1 || o.Offsets[0].TopicID != "" || o.Offsets[1].Partition != 2 || o.Offsets[1].TopicID != idB {
		t.Fatalf("object after the reset: %+v", o.Offsets)
	}
}
