package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// TestRecordsMalformedQuery: a query string that does not parse is the
// client's bad input, answered 400, not read as if the broken parameter had
// not been given (url.Values drops the pairs it cannot decode, so
// "offset=30;" or "offset=3%" served the log from its start).
func TestRecordsMalformedQuery(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 1, nil)
	e.Produce(e.Log("orders", 0), fetchkit.ProduceOpts{Codec: codec.None, Per: 5}, fetchkit.GenRecs(40, ts0, "o"))
	h := NewHTTPHandler(HTTPOptions{Catalog: e.Cat})
	for _, q := range []string{"offset=30;", "offset=3%", "offset=30&max_bytes=1%zz", "offset=30;max_bytes=100"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/topics/orders/partitions/0/records?"+q, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var body ErrorBody
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Code != fetchcache.CodeInvalidRequest {
			t.Errorf("?%s: %d %.200s, want 400 INVALID_REQUEST", q, w.Code, w.Body.String())
		}
	}
}

// TestProduceMalformedQuery: a produce query string that does not parse is
// 400 and nothing is produced, not read as if auto_create had not been
// given (which auto-creates the topic the client asked not to create).
func TestProduceMalformedQuery(t *testing.T) {
	for _, q := range []string{"auto_create=false;", "auto_create=false%", "auto_create=false;x=1"} {
		w := &fakeWriter{}
		h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/topics/t/records?"+q, strings.NewReader(`{"value":"v"}`)))
		if rec.Code != http.StatusBadRequest || len(w.calls) != 0 {
			t.Errorf("?%s: %d %s, writer calls %v; want 400 and no call", q, rec.Code, rec.Body, w.calls)
		}
	}
}
