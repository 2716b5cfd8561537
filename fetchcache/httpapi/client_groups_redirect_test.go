package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestGroupCallFollowsOnlyTheSameScheme: a 421 NOT_COORDINATOR naming a
// coordinator URL of the same scheme is followed once; one of another
// scheme (the bucket's lease could send the client's token to plain
// HTTP) is not, and the error says what to run instead.
func TestGroupCallFollowsOnlyTheSameScheme(t *testing.T) {
	var followed atomic.Int64
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		_ = json.NewEncoder(w).Encode(GroupDeletedJSON{})
	}))
	defer coord.Close()
	for _, tc := range []struct {
		name, target string
		follow       bool
	}{
		{"same_scheme", coord.URL, true},
		{"other_scheme", "https://" + coord.Listener.Addr().String(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusMisdirectedRequest)
				_ = json.NewEncoder(w).Encode(NotCoordinatorBody{ErrorBody: ErrorBody{Code: CodeNotCoordinator}, Coordinator: "peer:9092", CoordinatorHTTP: tc.target})
			}))
			defer other.Close()
			c, err := NewClient(other.URL, other.Client())
			if err != nil {
				t.Fatal(err)
			}
			before := followed.Load()
			err = c.DeleteGroup(context.Background(), "g")
			var nc *NotCoordinatorError
			switch {
			case tc.follow && (err != nil || followed.Load() != before+1):
				t.Fatalf("same scheme: %v, %d requests to the coordinator; want it followed", err, followed.Load()-before)
			case !tc.follow && (!errors.As(err, &nc) || nc.Refused == "" || followed.Load() != before):
				t.Fatalf("other scheme: %v; want a refusal without a request", err)
			}
		})
	}
}
