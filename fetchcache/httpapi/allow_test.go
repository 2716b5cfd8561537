package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
)

// TestMethodNotAllowedAllow: a 405 names in Allow the methods the path
// does serve (RFC 9110 §15.5.6), serve's write methods and the group
// routes' POST and DELETE included, and does not call a service read-only
// when the path takes a write.
func TestMethodNotAllowedAllow(t *testing.T) {
	serve := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: &fakeWriter{}})
	fetch := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Groups: &Groups{}})
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		allow        string
	}{
		{"serve_topics", serve, "PUT", "/v1/topics", "GET, HEAD, POST"},
		{"serve_config", serve, "DELETE", "/v1/topics/t/config", "GET, HEAD, PATCH"},
		{"serve_records", serve, "PUT", "/v1/topics/t/partitions/0/records", "GET, HEAD, POST"},
		{"serve_reload", serve, "GET", "/v1/admin/reload", "POST"},
		{"fetch_topics", fetch, "POST", "/v1/topics", "GET, HEAD"},
		{"fetch_group", fetch, "PUT", "/v1/groups/g", "DELETE, GET, HEAD"},
		{"fetch_reset", fetch, "GET", "/v1/groups/g/reset-offsets", "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			var eb ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &eb)
			if rec.Code != http.StatusMethodNotAllowed || eb.Code != fetchcache.CodeInvalidRequest {
				t.Fatalf("%s %s: %d %s, want 405 INVALID_REQUEST", tc.method, tc.path, rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Allow"); got != tc.allow {
				t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
			if strings.Contains(tc.allow, "POST") && strings.Contains(eb.Message, "read-only") {
				t.Errorf("%s %s: message %q calls a path that takes %s read-only", tc.method, tc.path, eb.Message, tc.allow)
			}
		})
	}
}
