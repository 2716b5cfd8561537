package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
)

// TestJSONBodyTrailingData: a topic or reset-offsets body with more after
// its JSON value (a second object, stray text) is 400, not applied as its
// first value alone with the rest silently dropped.
func TestJSONBodyTrailingData(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/topics", `{"topic":"a"}{"topic":"b"}`},
		{"POST", "/v1/topics", `{"topic":"a"} trailing`},
		{"PATCH", "/v1/topics/t/config", `{"set":{"retention.ms":"1"}}` + "\n" + `{"delete":["cleanup.policy"]}`},
		{"POST", "/v1/groups/g/reset-offsets", `{"topic":"orders","to_earliest":true} {"execute":true}`},
	} {
		w := &fakeWriter{}
		// The group is coordinated elsewhere: a body that passes is 421.
		elsewhere := &Groups{Route: func(string) (bool, string, string, error) { return false, "10.0.0.2:9092", "", nil }}
		h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, Groups: elsewhere})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		if rec.Code != http.StatusBadRequest || len(w.calls) != 0 {
			t.Errorf("%s %s %q: %d %s, writer calls %v; want 400 and no call", tc.method, tc.path, tc.body, rec.Code, rec.Body, w.calls)
		}
	}
	// Trailing white space is not more data.
	w := &fakeWriter{}
	h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/topics", strings.NewReader("{\"topic\":\"a\"}\n \n")))
	if rec.Code != http.StatusCreated {
		t.Fatalf("body with trailing newline: %d %s", rec.Code, rec.Body)
	}
}

// TestOversizedJSONBody: a topic create or alter body over the 1 MiB
// bound is answered as an oversized reset-offsets body is, 413
// INVALID_REQUEST saying so, not 400 "unexpected EOF" as if the client had
// sent broken JSON; the Writer is not called.
func TestOversizedJSONBody(t *testing.T) {
	big := strings.Repeat("a", maxAdminBodyBytes)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/topics", `{"topic":"a","configs":{"x":"` + big + `"}}`},
		{"PATCH", "/v1/topics/t/config", `{"set":{"x":"` + big + `"}}`},
		{"POST", "/v1/groups/g/reset-offsets", `{"topic":"` + big + `"}`},
	} {
		w := &fakeWriter{}
		h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, Groups: &Groups{}})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		var eb ErrorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &eb)
		if rec.Code != http.StatusRequestEntityTooLarge || eb.Code != fetchcache.CodeInvalidRequest || !strings.Contains(eb.Message, "larger than") || len(w.calls) != 0 {
			t.Errorf("%s %s with a %d-byte body: %d %.200s, writer calls %v; want 413 INVALID_REQUEST and no call", tc.method, tc.path, len(tc.body), rec.Code, rec.Body, w.calls)
		}
	}
}
