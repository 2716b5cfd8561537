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

// idCatalog serves a topic with a topic ID and one without.
type idCatalog struct{ emptyCatalog }

func (idCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	return []fetchcache.TopicInfo{
		{Name: "orders", ID: "Vtqh-_aLSpGn3jK4dGnv8A", Partitions: []int32{0, 1}},
		{Name: "plain", Partitions: []int32{0}},
	}, nil
}

// TestClientTopicsCarryTopicID: the client keeps the topic_id GET
// /v1/topics answers with (replay --fetch records it in its checkpoint, to
// tell a re-created topic on resume); before, TopicInfo.ID was always "".
func TestClientTopicsCarryTopicID(t *testing.T) {
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: idCatalog{}}))
	defer srv.Close()
	c, err := NewClient(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want, _ := idCatalog{}.Topics(ctx)
	got, err := c.Topics(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("topics %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct{ topic, id string }{{"orders", "Vtqh-_aLSpGn3jK4dGnv8A"}, {"plain", ""}} {
		if id, err := c.TopicID(ctx, tc.topic, 0); err != nil || id != tc.id {
			t.Errorf("TopicID(%s) = %q, %v; want %q", tc.topic, id, err, tc.id)
		}
	}
	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := c.TopicID(ctx, "nope", 0); !errors.As(err, &ue) {
		t.Errorf("TopicID of an unknown topic: %v", err)
	}
}
