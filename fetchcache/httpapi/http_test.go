package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// failingCatalog fails listing and partition lookups with err.
type failingCatalog struct{ err error }

func (c failingCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) { return nil, c.err }
func (c failingCatalog) Partition(context.Context, string, int32) (fetchcache.Partition, error) {
	return nil, c.err
}

func TestHTTPHandler(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 2, nil)
	e.Topic("empty", 1, nil)
	l := e.Log("orders", 0)
	recs := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Zstd, Per: 6}, fetchkit.GenRecs(60, ts0, "o"))
	reg := prometheus.NewRegistry()
	m := fetchcache.NewServeMetrics(reg)
	h := NewHTTPHandler(HTTPOptions{Catalog: e.Cat, Metrics: m, Gatherer: reg, MaxRecordsBytes: 1 << 20})
	busy := NewHTTPHandler(HTTPOptions{Catalog: fetchkit.OverloadedCatalog{Catalog: e.Cat}})
	broken := NewHTTPHandler(HTTPOptions{Catalog: failingCatalog{errors.New("disk on fire")}})

	// The raw answer from offset 0 with 2000 bytes, straight from the log.
	raw0, err := mustPartition(t, e.Cat, "orders", 0).Read(context.Background(), 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	rawNext := fetchcache.LastBatchNext(raw0)

	jsonLines := func(rs []fetchkit.Rec) string {
		var b []byte
		for _, r := range rs {
			rec := record.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
			b = recordjson.AppendLine(b, 0, &rec)
		}
		return string(b)
	}
	// Records of whole batches from the one holding off, within max bytes.
	linesFrom := func(off int64, maxBytes int) string {
		data, err := mustPartition(t, e.Cat, "orders", 0).Read(context.Background(), off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		next := fetchcache.LastBatchNext(data)
		var rs []fetchkit.Rec
		for _, r := range recs {
			if r.Offset >= off && r.Offset < next {
				rs = append(rs, r)
			}
		}
		return jsonLines(rs)
	}

	for _, tc := range []struct {
		name    string
		h       http.Handler
		method  string
		target  string
		accept  string
		status  int
		code    string            // error code, "" for success
		body    string            // exact body, when set
		headers map[string]string // expected response headers
		contain string            // substring of the body
	}{
		{name: "topics", target: "/v1/topics", status: 200,
			body: `{"topics":[{"topic":"empty","partitions":[0]},{"topic":"orders","partitions":[0,1]}]}` + "\n"},
		{name: "partition", target: "/v1/topics/orders/partitions/0", status: 200,
			contain: `"topic":"orders","partition":0,"log_start_offset":0,"log_end_offset":60,"last_stable_offset":60,"max_timestamp":` + strconv.FormatInt(recs[59].Timestamp, 10) + `,"segments":[{"base_offset":0,`},
		{name: "records_ndjson_default", target: "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=2000", status: 200,
			body: linesFrom(0, 2000), headers: map[string]string{"Content-Type": MediaNDJSON, HeaderLogStartOffset: "0", HeaderLogEndOffset: "60", HeaderNextOffset: strconv.FormatInt(rawNext, 10)}},
		{name: "records_ndjson_mid_batch", target: "/v1/topics/orders/partitions/0/records?offset=33&max_bytes=1", accept: MediaNDJSON, status: 200,
			body: jsonLines(recs[33:36])}, // the batch holding 33 is 30-35: records from 33 on
		{name: "records_raw", target: "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=2000", accept: MediaRaw, status: 200,
			body: string(raw0), headers: map[string]string{"Content-Type": MediaRaw, HeaderNextOffset: strconv.FormatInt(rawNext, 10)}},
		{name: "records_raw_q", target: "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=2000", accept: "application/x-ndjson;q=0.5, application/octet-stream", status: 200,
			body: string(raw0)},
		{name: "records_timestamp", target: "/v1/topics/orders/partitions/0/records?timestamp=" + strconv.FormatInt(ts0+415, 10) + "&max_bytes=1", status: 200,
			body: jsonLines(recs[42:48])},
		{name: "records_timestamp_after_all", target: "/v1/topics/orders/partitions/0/records?timestamp=" + strconv.FormatInt(ts0+100000, 10), status: 200,
			body: "", headers: map[string]string{HeaderNextOffset: "60"}},
		{name: "records_default_start", target: "/v1/topics/orders/partitions/0/records?max_bytes=1", status: 200,
			body: jsonLines(recs[0:6])},
		{name: "records_at_end", target: "/v1/topics/orders/partitions/0/records?offset=60", accept: MediaRaw, status: 200,
			body: "", headers: map[string]string{HeaderNextOffset: "60", HeaderLogEndOffset: "60"}},
		{name: "records_empty_partition", target: "/v1/topics/empty/partitions/0/records", status: 200, body: ""},
		{name: "healthz", target: "/healthz", status: 200},
		{name: "readyz", target: "/readyz", status: 200},
		{name: "readyz_failing", h: broken, target: "/readyz", status: 503},
		{name: "metrics", target: "/metrics", status: 200, contain: "tiered_fetch_requests_total"},

		{name: "unknown_topic", target: "/v1/topics/nope/partitions/0", status: 404, code: fetchcache.CodeUnknownTopicOrPartition},
		{name: "unknown_partition", target: "/v1/topics/orders/partitions/7/records", status: 404, code: fetchcache.CodeUnknownTopicOrPartition},
		{name: "negative_partition", target: "/v1/topics/orders/partitions/-1", status: 404, code: fetchcache.CodeUnknownTopicOrPartition},
		{name: "offset_past_end", target: "/v1/topics/orders/partitions/0/records?offset=61", status: 416, code: fetchcache.CodeOffsetOutOfRange,
			contain: "offsets 0 to 59 are readable, from local disk"},
		{name: "throttled", h: busy, target: "/v1/topics/orders/partitions/0/records?offset=0", status: 429, code: fetchcache.CodeThrottled,
			headers: map[string]string{"Retry-After": "2"}},
		{name: "throttled_timestamp", h: busy, target: "/v1/topics/orders/partitions/0/records?timestamp=5", status: 429, code: fetchcache.CodeThrottled,
			headers: map[string]string{"Retry-After": "1"}},
		{name: "bad_partition", target: "/v1/topics/orders/partitions/x", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "bad_offset", target: "/v1/topics/orders/partitions/0/records?offset=-3", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "bad_timestamp", target: "/v1/topics/orders/partitions/0/records?timestamp=abc", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "offset_and_timestamp", target: "/v1/topics/orders/partitions/0/records?offset=1&timestamp=1", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "max_bytes_zero", target: "/v1/topics/orders/partitions/0/records?max_bytes=0", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "max_bytes_too_big", target: "/v1/topics/orders/partitions/0/records?max_bytes=2000000", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "unknown_param", target: "/v1/topics/orders/partitions/0/records?offest=1", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "repeated_param", target: "/v1/topics/orders/partitions/0/records?offset=1&offset=2", status: 400, code: fetchcache.CodeInvalidRequest},
		{name: "not_acceptable", target: "/v1/topics/orders/partitions/0/records", accept: "text/html", status: 406, code: fetchcache.CodeNotAcceptable},
		{name: "no_such_path", target: "/v2/topics", status: 404, code: fetchcache.CodeNotFound},
		{name: "post", method: "POST", target: "/v1/topics", status: 405, code: fetchcache.CodeInvalidRequest},
		{name: "storage_failure", h: broken, target: "/v1/topics/orders/partitions/0/records", status: 500, code: fetchcache.CodeInternal, contain: "disk on fire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hh := tc.h
			if hh == nil {
				hh = h
			}
			method := tc.method
			if method == "" {
				method = "GET"
			}
			req := httptest.NewRequest(method, tc.target, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			w := httptest.NewRecorder()
			hh.ServeHTTP(w, req)
			body := w.Body.String()
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d; body %.300s", w.Code, tc.status, body)
			}
			if tc.code != "" {
				var he ErrorBody
				if err := json.Unmarshal(w.Body.Bytes(), &he); err != nil || he.Code != tc.code || he.Message == "" {
					t.Fatalf("error body %q (%v), want code %s", body, err, tc.code)
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Fatalf("error content type %q", ct)
				}
			}
			if tc.body != "" || (tc.code == "" && tc.contain == "" && strings.Contains(tc.target, "/records")) {
				if body != tc.body {
					t.Fatalf("body differs:\ngot  %.500q\nwant %.500q", body, tc.body)
				}
			}
			if tc.contain != "" && !strings.Contains(body, tc.contain) {
				t.Fatalf("body %.500s does not contain %s", body, tc.contain)
			}
			for k, v := range tc.headers {
				if got := w.Header().Get(k); got != v {
					t.Fatalf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
	// Every API request above through h was counted under its code.
	for code, want := range map[string]float64{fetchcache.CodeOK: 11, fetchcache.CodeUnknownTopicOrPartition: 3, fetchcache.CodeOffsetOutOfRange: 1, fetchcache.CodeInvalidRequest: 9, fetchcache.CodeNotAcceptable: 1, fetchcache.CodeNotFound: 1} {
		if got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, code)); got != want {
			t.Errorf("requests{http,%s} = %v, want %v", code, got, want)
		}
	}
	if got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeOK)); got != 0 {
		t.Errorf("kafka series should exist at 0, got %v", got)
	}
	if fetchkit.CounterValue(t, m.Bytes(fetchcache.InterfaceHTTP)) < float64(len(raw0)) {
		t.Error("response bytes not counted")
	}
}

// TestHTTPFollowNextOffset pages through a partition with the next-offset
// header and gets every record exactly once, across segments.
func TestHTTPFollowNextOffset(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("page", 1, nil)
	l := e.Log("page", 0)
	want := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Gzip, Per: 9}, fetchkit.GenRecs(200, ts0, "p"))
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: e.Cat}))
	defer srv.Close()
	var raw bytes.Buffer
	for next := "0"; ; {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/topics/page/partitions/0/records?max_bytes=700&offset="+next, nil)
		req.Header.Set("Accept", MediaRaw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if len(b) == 0 {
			break
		}
		raw.Write(b)
		next = resp.Header.Get(HeaderNextOffset)
	}
	var got []fetchkit.Rec
	var dec record.Decoder
	it := record.NewIter(raw.Bytes())
	it.Verify = true
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		rs, err := dec.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			got = append(got, testrecs.FromRecord(r))
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	fetchkit.SameRecs(t, got, want)
}

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]string{
		"":                              MediaNDJSON,
		"*/*":                           MediaNDJSON,
		"application/*":                 MediaNDJSON,
		"application/octet-stream":      MediaRaw,
		"application/x-ndjson":          MediaNDJSON,
		"text/html, */*;q=0.1":          MediaNDJSON,
		"application/x-ndjson;q=0, */*": MediaRaw,
		"application/octet-stream;q=0.2, application/x-ndjson;q=0.9": MediaNDJSON,
		"text/html": "",
		"*/*;q=0":   "",
	} {
		got, ok := negotiate(accept)
		if (want == "") == ok || got != want {
			t.Errorf("negotiate(%q) = %q, %v; want %q", accept, got, ok, want)
		}
	}
}

// TestRetryAfterRoundsUp: Retry-After is whole seconds, at least 1.
func TestRetryAfterRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Millisecond: "1", 1500 * time.Millisecond: "2", 3 * time.Second: "3"} {
		w := &countingWriter{ResponseWriter: httptest.NewRecorder()}
		a := &httpAPI{log: fetchkit.DiscardLogger()}
		a.failErr(w, httptest.NewRequest("GET", "/", nil), &gate.OverloadedError{RetryAfter: d})
		if got := w.Header().Get("Retry-After"); got != want {
			t.Errorf("%v: Retry-After %q, want %q", d, got, want)
		}
	}
}

// mustPartition opens a partition of the local catalog or fails the test.
func mustPartition(t testing.TB, c *fetchcache.LocalCatalog, topic string, p int32) fetchcache.Partition {
	t.Helper()
	part, err := c.Partition(context.Background(), topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return part
}
