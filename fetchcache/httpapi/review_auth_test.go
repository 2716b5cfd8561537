package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestReviewHTTPGroupDenialLogged: GET /v1/groups/{group} for a group outside the
// principal's groups patterns is logged as the Kafka listener logs it — "group access
// denied" with the group — not as a "topic access denied" of permission read on a topic
// named "group <id>", which an alert on group denials never sees.
func TestReviewHTTPGroupDenialLogged(t *testing.T) {
	z, err := auth.NewAuthorizer(auth.Settings{
		Tokens: []auth.Token{{Principal: "app", Token: "tok-app"}},
		ACLs:   map[string]auth.ACL{"app": {Read: []string{"orders"}, Groups: []string{"billing-*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &fetchkit.LogCapture{}
	gs := &Groups{Admin: &groupadmin.Admin{}}
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Groups: gs, Auth: z, Logger: logs.Logger()}))
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+"/v1/groups/other", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok-app")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	if got := logs.Lines("group access denied", "interface=http", "principal=User:app", "group=other"); len(got) != 1 {
		t.Errorf("no group denial line:\n%s", logs)
	}
	if got := logs.Lines("topic access denied"); len(got) != 0 {
		t.Errorf("a group denial logged as a topic's: %q", got)
	}
}
