package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// GET /v1/groups/{group} leaves out an offset committed against a topic's
// incarnation that was deleted and re-created since (the catalog serves the
// topic under another ID): no committed offset, no lag; the other topic's
// offset and lag stay.
func TestDescribeGroupAfterTopicRecreated(t *testing.T) {
	ctx := context.Background()
	e := fetchkit.NewEnv(t)
	for _, tp := range []string{"orders", "plain"} {
		e.Topic(tp, 1, nil)
		e.Produce(e.Log(tp, 0), fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(20, ts0, tp))
	}
	const oldID, newID, plainID = "o3Bx6y0QQxyxS2FrDcDiOw", "Vtqh-_aLSpGn3jK4dGnv8A", "AAAAAAAAAAAAAAAAAAAAAQ"
	cat := fetchkit.IDCatalog{Catalog: e.Cat, IDs: map[string]string{"orders": oldID, "plain": plainID}}
	store := groups.NewStore(objstore.NewMemory(), groups.StoreOptions{})
	if _, err := store.Update(ctx, "g", func(o *groups.Object) error {
		o.ProtocolType = "consumer"
		o.Offsets = []groups.Offset{{Topic: "orders", Partition: 0, Offset: 7, LeaderEpoch: -1, TopicID: oldID}, {Topic: "plain", Partition: 0, Offset: 9, LeaderEpoch: -1, TopicID: plainID}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	gs := &Groups{Admin: &groupadmin.Admin{Store: store, Catalog: cat}}
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: cat, Groups: gs}))
	defer srv.Close()
	describe := func() map[string]groupadmin.PartitionOffset {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/v1/groups/g")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d groupadmin.Description
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("describe: %d %v", resp.StatusCode, err)
		}
		out := map[string]groupadmin.PartitionOffset{}
		for _, po := range d.Offsets {
			out[po.Topic] = po
		}
		return out
	}
	if got := describe(); len(got) != 2 || got["orders"].Committed != 7 || got["orders"].Lag != 13 {
		t.Fatalf("before the re-creation: %+v", got)
	}
	cat.IDs["orders"] = newID
	got := describe()
	if _, ok := got["orders"]; ok || len(got) != 1 || got["plain"].Committed != 9 || got["plain"].Lag != 11 {
		t.Fatalf("after the re-creation: %+v", got)
	}
}
