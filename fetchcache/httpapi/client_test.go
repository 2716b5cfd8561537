package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
)

func TestClientThrottle(t *testing.T) {
	var throttles atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if throttles.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "2")
			WriteJSON(w, http.StatusTooManyRequests, ErrorBody{Code: fetchcache.CodeThrottled, Message: "gate full"})
			return
		}
		switch r.URL.EscapedPath() {
		case "/pre/v1/topics":
			WriteJSON(w, http.StatusOK, map[string]any{"topics": []TopicJSON{{Topic: "a/b", Partitions: []int32{0}}}})
		case "/pre/v1/topics/a%2Fb/partitions/0/records":
			WriteJSON(w, http.StatusBadRequest, ErrorBody{Code: fetchcache.CodeInvalidRequest, Message: "bad " + r.URL.RawQuery})
		default:
			http.Error(w, "plain text failure", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL+"/pre/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	c.ThrottleBudget = 5 * time.Second
	ctx := context.Background()

	throttles.Store(2)
	ts, err := c.Topics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "a/b" || len(slept) != 2 || slept[0] != 2*time.Second {
		t.Fatalf("topics after throttles: %+v %v, slept %v", ts, err, slept)
	}

	slept = nil
	throttles.Store(3) // 3 × 2s > the 5s budget
	_, err = c.Topics(ctx)
	var te *ThrottledError
	if !errors.As(err, &te) || te.RetryAfter != 2*time.Second || !errors.Is(err, gate.ErrOverloaded) || len(slept) != 2 {
		t.Fatalf("throttled past budget: %v, slept %v", err, slept)
	}
	if d, ok := gate.RetryAfter(err); !ok {
		t.Fatalf("server-side view of the throttle: %v %v", d, ok)
	}

	throttles.Store(0)
	var ae *APIError
	if _, err := c.ReadRaw(ctx, "a/b", 0, 3, 10); !errors.As(err, &ae) || ae.Status != 400 || ae.Code != fetchcache.CodeInvalidRequest || ae.Message != "bad max_bytes=10&offset=3" {
		t.Fatalf("400 answer (topic escaped in the path): %v", err)
	}
	if _, err := c.PartitionInfo(ctx, "x", 0); !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.Message != "plain text failure" {
		t.Fatalf("non-JSON error: %v", err)
	}

	for _, bad := range []string{"ftp://h", "http://", "http://u:p@h", "http://h?x=1", "::"} {
		if _, err := NewClient(bad, nil); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
}

// idCatalog serves a topic with a topic ID, one without, and one whose
// listing is older than its partition's manifest: re-created since it was
// listed, its partition serves another ID than the listing names.
type idCatalog struct{ emptyCatalog }

func (idCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	return []fetchcache.TopicInfo{
		{Name: "orders", ID: "Vtqh-_aLSpGn3jK4dGnv8A", Partitions: []int32{0, 1}},
		{Name: "plain", Partitions: []int32{0}},
		{Name: "recreated", ID: "o3Bx6y0QQxyxS2FrDcDiOw", Partitions: []int32{0}},
	}, nil
}

func (c idCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	switch {
	case topic == "orders" && p <= 1:
		return idPartition{id: "Vtqh-_aLSpGn3jK4dGnv8A"}, nil
	case topic == "recreated" && p == 0:
		return idPartition{id: "Uq9V3n0BTgS1bCv0uJ3w1Q"}, nil
	case topic == "plain" && p == 0:
		return noIDPartition{}, nil
	}
	return c.emptyCatalog.Partition(ctx, topic, p)
}

// noIDPartition is an empty partition that does not know topic IDs.
type noIDPartition struct{ fetchcache.Partition }

func (noIDPartition) Offsets(context.Context) (fetchcache.Offsets, error) {
	return fetchcache.Offsets{}, nil
}

// idPartition is an empty partition serving the lineage of topic ID id.
type idPartition struct {
	noIDPartition
	id string
}

func (p idPartition) TopicID() string { return p.id }

// TestClientTopicsCarryTopicID: the client keeps the topic_id GET
// /v1/topics answers with (replay --fetch records it in its checkpoint, to
// tell a re-created topic on resume); before, TopicInfo.ID was always "".
func TestClientTopicsCarryTopicID(t *testing.T) {
	c := clientOver(t, NewHTTPHandler(HTTPOptions{Catalog: idCatalog{}}))
	ctx := context.Background()
	want, _ := idCatalog{}.Topics(ctx)
	got, err := c.Topics(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("topics %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct{ topic, id string }{{"orders", "Vtqh-_aLSpGn3jK4dGnv8A"}, {"plain", ""}, {"recreated", "Uq9V3n0BTgS1bCv0uJ3w1Q"}} {
		if id, err := c.TopicID(ctx, tc.topic, 0); err != nil || id != tc.id {
			t.Errorf("TopicID(%s) = %q, %v; want %q", tc.topic, id, err, tc.id)
		}
	}
	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := c.TopicID(ctx, "nope", 0); !errors.As(err, &ue) {
		t.Errorf("TopicID of an unknown topic: %v", err)
	}
	if _, err := c.TopicID(ctx, "orders", 7); !errors.As(err, &ue) || ue.Partition != 7 {
		t.Errorf("TopicID of an unknown partition: %v", err)
	}
}

// TestClientTopicIDAsksThePartition: Client.TopicID (what replay --resume
// --fetch compares with its checkpoint) is the ID the partition serves
// (GET /v1/topics/{t}/partitions/{p} topic_id, after the partition's
// manifest re-read when due), not the topic listing's: the service reuses
// its listing for 30 s, and a topic re-created since still shows there
// under its old ID. Before, TopicID read the listing. A service that does
// not give a partition's ID is asked for the listing's.
func TestClientTopicIDAsksThePartition(t *testing.T) {
	c := clientOver(t, NewHTTPHandler(HTTPOptions{Catalog: idCatalog{}}))
	ctx := context.Background()
	if d, err := c.PartitionInfo(ctx, "recreated", 0); err != nil || d.TopicID != "Uq9V3n0BTgS1bCv0uJ3w1Q" {
		t.Fatalf("partition info %+v, %v; want topic ID Uq9V3n0BTgS1bCv0uJ3w1Q", d, err)
	}
	if id, err := c.TopicID(ctx, "recreated", 0); err != nil || id != "Uq9V3n0BTgS1bCv0uJ3w1Q" {
		t.Fatalf("TopicID of a topic re-created since it was listed = %q, %v; want the partition's Uq9V3n0BTgS1bCv0uJ3w1Q", id, err)
	}

	// A service from before partitions said their ID: the listing's.
	oc := clientOver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/topics" {
			WriteJSON(w, http.StatusOK, map[string]any{"topics": []TopicJSON{{Topic: "orders", TopicID: "Vtqh-_aLSpGn3jK4dGnv8A", Partitions: []int32{0}}}})
			return
		}
		WriteJSON(w, http.StatusOK, PartitionJSON{Topic: "orders", Partition: 0})
	}))
	if id, err := oc.TopicID(ctx, "orders", 0); err != nil || id != "Vtqh-_aLSpGn3jK4dGnv8A" {
		t.Fatalf("TopicID from a service without partition IDs = %q, %v; want the listing's", id, err)
	}
}

// clientOver is a Client of a test server of h, closed at the test's end.
func clientOver(t *testing.T, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
