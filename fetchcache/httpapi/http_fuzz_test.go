package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// FuzzHTTPQuery sends the records and partition endpoints arbitrary query
// strings, partition path segments and Accept headers over a healthy
// catalog: the handler must never panic and never answer 5xx (bad input
// is the client's fault: 4xx with a JSON error body naming a code), and a
// 200 must carry the offsets headers.
func FuzzHTTPQuery(f *testing.F) {
	e := fetchkit.NewEnv(f)
	e.Topic("t", 2, nil)
	e.Produce(e.Log("t", 0), fetchkit.ProduceOpts{Codec: codec.Zstd}, fetchkit.GenRecs(30, ts0, "q"))
	h := NewHTTPHandler(HTTPOptions{Catalog: e.Cat, MaxRecordsBytes: 1 << 20})
	for _, s := range []struct{ part, query, accept string }{
		{"0", "offset=3&max_bytes=100", ""},
		{"0", "timestamp=1700000000000", "application/octet-stream"},
		{"1", "offset=0", "application/x-ndjson;q=0.5, */*;q=0.1"},
		{"0", "offset=-1", ""},
		{"0", "offset=99999999999999999999", ""},
		{"0", "offset=1&offset=2", ""},
		{"0", "max_bytes=0&timestamp=-5", "text/html"},
		{"0", "offset=1&timestamp=2", ""},
		{"-1", "", ""},
		{"2147483648", "%zz", ""},
		{"0", "max_bytes=9223372036854775807", "application/*;q=nan"},
		{"0x1", "offset=%00", "*/*;q=2"},
	} {
		f.Add(s.part, s.query, s.accept)
	}
	f.Fuzz(func(t *testing.T, part, query, accept string) {
		for _, suffix := range []string{"/records", ""} {
			target := "/v1/topics/t/partitions/" + url.PathEscape(part) + suffix + "?" + query
			req, err := http.NewRequest(http.MethodGet, "http://fetch.test"+target, nil)
			if err != nil {
				return // not a request a client could send
			}
			if accept != "" && !strings.ContainsAny(accept, "\r\n\x00") {
				req.Header.Set("Accept", accept)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			switch {
			case w.Code >= 500:
				t.Fatalf("GET %s (Accept %q): %d %s", target, accept, w.Code, w.Body.String())
			case w.Code >= 400:
				var body ErrorBody
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Code == "" {
					t.Fatalf("GET %s: %d with body %q, not a JSON error with a code", target, w.Code, w.Body.String())
				}
			case w.Code == http.StatusOK && suffix != "":
				if w.Header().Get(HeaderNextOffset) == "" || w.Header().Get(HeaderLogEndOffset) == "" {
					t.Fatalf("GET %s: 200 without the offsets headers", target)
				}
			}
		}
	})
}
