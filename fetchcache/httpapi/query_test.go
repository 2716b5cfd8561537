package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
