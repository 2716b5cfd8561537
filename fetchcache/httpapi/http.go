// Package httpapi owns the fetch service's /v1 HTTP API over a
// fetchcache.Catalog — topics, a partition's offsets, and its records by
// offset or timestamp as JSON lines or raw record batches — with its error
// vocabulary (ErrorStatus: one table from Kafka's errors to status and code),
// bearer-token authentication, authorization by the permission each route's
// table entry names (Routes), and the Client that
// replay and `consume --fetch` use; and, with a Writer (serve's), the write
// API: topics, produce, reload.
package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Media types of the records endpoint.
const (
	MediaNDJSON = "application/x-ndjson"     // JSON lines in consume's shape
	MediaRaw    = "application/octet-stream" // raw record batches, as in a Fetch response
)

// Response headers of the records endpoint (both media types).
const (
	HeaderLogStartOffset = "X-Tiered-Log-Start-Offset"
	HeaderLogEndOffset   = "X-Tiered-Log-End-Offset"
	// HeaderNextOffset is the offset to ask for next: the offset after the
	// last batch returned, or the start offset when nothing was returned.
	HeaderNextOffset = "X-Tiered-Next-Offset"
	// HeaderTopicID is the topic ID (Kafka's string form) of the lineage
	// the answer was read from, as of the partition's manifest read that
	// served it; absent for a topic without one. A topic deleted and
	// re-created under the same name answers the same offsets with another
	// ID: a reader that keeps reading (replay) tells it by this header.
	HeaderTopicID = "X-Tiered-Topic-Id"
)

// Defaults of HTTPOptions.
const (
	DefaultHTTPRecordsBytes    = 1 << 20  // max_bytes when the request gives none
	DefaultHTTPMaxRecordsBytes = 64 << 20 // largest max_bytes accepted
	// DefaultMaxInFlightProduceBytes is the budget, across all requests,
	// for produce body bytes read and not yet appended: room for two
	// bodies of the largest size.
	DefaultMaxInFlightProduceBytes = 2 * MaxProduceBodyBytes
	// DefaultProduceMaxWait bounds a produce body's wait for budget before
	// it is answered 429 THROTTLED.
	DefaultProduceMaxWait = 2 * time.Second
	// DefaultBodyReadTimeout bounds the arrival of a request body, from
	// the handler's first read to its end; a slower body is answered 408
	// and its connection closed.
	DefaultBodyReadTimeout = time.Minute
	// DefaultWriteTimeout bounds each write of a read route's response (as
	// the Kafka listener's WriteTimeout bounds a response): a client that
	// stops reading is cut off instead of holding the response for ever.
	DefaultWriteTimeout = 30 * time.Second
)

// ProduceBudgetGate is the {gate} label of the produce body budget
// (HTTPOptions.MaxInFlightProduceBytes).
const ProduceBudgetGate = "http_produce_bytes"

// HTTPOptions configures NewHTTPHandler.
type HTTPOptions struct {
	Catalog fetchcache.Catalog // required
	// Metrics receives the request series (interface "http"); nil makes
	// an unregistered set.
	Metrics *fetchcache.ServeMetrics
	// Gatherer is served at /metrics; nil leaves /metrics unrouted.
	Gatherer prometheus.Gatherer
	// Ready answers /readyz (nil error: 200). Nil means the catalog can list
	// its topics.
	Ready  func(ctx context.Context) error
	Logger *slog.Logger
	// DefaultRecordsBytes is max_bytes when a request gives none;
	// MaxRecordsBytes is the largest accepted (a batch larger than
	// max_bytes is still returned whole, as Kafka does).
	DefaultRecordsBytes int
	MaxRecordsBytes     int
	// Auth authenticates requests and filters topics (see auth.Authorizer and
	// guard); nil serves everyone everything.
	Auth *auth.Authorizer
	// Writer, when set, serves the write API (writeRoutes: topic create,
	// describe and alter, produce, reload) — serve's, over its own log
	// engine.
	Writer Writer
	// MaxInFlightProduceBytes is the one budget, across all requests, for
	// produce body bytes from their read until the Writer returns: a body
	// reserves its Content-Length up front (or each piece as it is read,
	// when chunked), waiting at most ProduceMaxWait, else 429 THROTTLED
	// with Retry-After. What the Writer holds for the body's records
	// beyond the body's size (Holder) is taken from it too.
	MaxInFlightProduceBytes int64
	ProduceMaxWait          time.Duration
	// BodyReadTimeout bounds the arrival of a request body: a write
	// route's slower one is answered 408 REQUEST_TIMED_OUT and its
	// connection closed; one another route does not read must arrive
	// within it too (guard), else its connection is closed.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds each write of a read route's response (the
	// deadline moves with the writes, so a long response to a reading
	// client is not cut); a client that stops reading is disconnected.
	WriteTimeout time.Duration
	// Registerer receives the produce budget's tiered_fetch_gate_* series;
	// nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Groups, when set, serves the consumer-group administration routes
	// (groupRoutes: /v1/groups...) — the fetch service's, over its
	// coordinator and group store.
	Groups *Groups
}

// httpAPI serves the /v1 API.
type httpAPI struct {
	cat      fetchcache.Catalog
	auth     *auth.Authorizer
	m        *fetchcache.ServeMetrics
	ready    func(ctx context.Context) error
	log      *slog.Logger
	defBytes int
	maxBytes int
	// produceBudget admits produce body bytes (MaxInFlightProduceBytes).
	produceBudget   *gate.Gate
	bodyReadTimeout time.Duration
	writeTimeout    time.Duration
	// mux routes the requests (NewHTTPHandler's): the catch-all asks it
	// which methods a path has.
	mux *http.ServeMux
}

// NewHTTPHandler returns the fetch service's HTTP handler:
//
//	GET /v1/topics                                     {"topics": [{"topic": "t", "partitions": [0, 1]}]}
//	GET /v1/topics/{topic}/partitions/{partition}      offsets, max timestamp, segments, topic ID
//	GET /v1/topics/{topic}/partitions/{partition}/records?offset=N|timestamp=MS&max_bytes=N
//	GET /metrics, /healthz, /readyz
//
// The records endpoint answers whole batches from the one holding the start
// offset (the log start when neither offset nor timestamp is given; for a
// timestamp, the first record at or after it, or the log end if every record
// is older), as raw batches (Accept: application/octet-stream) or as JSON
// lines in consume's shape (application/x-ndjson, the default; control
// records are left out, records of aborted transactions are included).
// Errors are JSON {"code": "...", "message": "..."}: 400 INVALID_REQUEST
// (also for a topic name Kafka would refuse, which never reaches the
// catalog),
// 401 UNAUTHORIZED (with WWW-Authenticate) when Auth requires a bearer
// token, 403 TOPIC_AUTHORIZATION_FAILED for a topic the principal may not
// read, produce to or describe as the route needs (the topic list leaves
// out those it may not describe), 403 CLUSTER_AUTHORIZATION_FAILED for an
// admin route (/metrics, topic create and alter, reload) to a principal
// without admin,
// 404 UNKNOWN_TOPIC_OR_PARTITION (or NOT_FOUND for other paths), 406
// NOT_ACCEPTABLE, 416 OFFSET_OUT_OF_RANGE, 429 THROTTLED with Retry-After,
// 500 INTERNAL, or 500 CORRUPT_MESSAGE when stored data fails its checks
// (counted in tiered_fetch_corrupt_objects_total; the bytes are not served).
func NewHTTPHandler(o HTTPOptions) http.Handler {
	a := newAPI(o)
	mux := http.NewServeMux()
	a.mux = mux
	public := map[string]bool{}
	for _, rt := range a.routes(o) {
		mux.Handle(rt.Pattern, a.authorize(rt.Route, rt.h))
		if rt.Public {
			path := rt.Pattern
			if _, p, ok := strings.Cut(path, " "); ok {
				path = p // without the method
			}
			public[path] = true
		}
	}
	return a.guard(public, mux)
}

// Route is one route of the HTTP API and the permission its principal
// needs (see auth.Permission): of the {topic} the pattern names for
// describe, read and write (without one, GET /v1/topics lists the topics
// the principal may describe), cluster-wide for admin. With auth off
// (auth.Authorizer.Enforced false) every route is open.
type Route struct {
	// Pattern is the http.ServeMux pattern, e.g. "PATCH /v1/topics/{topic}/config".
	Pattern string
	Perm    auth.Permission
	// Public routes answer without authentication (/healthz, /readyz).
	Public bool
	// Audit is the action a change logs one audit line as ("" for a read).
	Audit string
}

// Audit actions of the write routes.
const (
	AuditTopicCreate = "topic.create"
	AuditTopicAlter  = "topic.alter"
	AuditReload      = "reload"
)

type route struct {
	Route
	h http.Handler
}

// Routes lists the routes NewHTTPHandler(o) serves, in the order it
// registers them, each with the permission it checks: the table the
// authorization tests and the README's permission list are made from.
func Routes(o HTTPOptions) []Route {
	var out []Route
	for _, rt := range newAPI(o).routes(o) {
		out = append(out, rt.Route)
	}
	return out
}

func newAPI(o HTTPOptions) *httpAPI {
	a := &httpAPI{cat: fetchcache.ValidatingCatalog{Catalog: o.Catalog}, auth: o.Auth, m: o.Metrics, ready: o.Ready, log: o.Logger,
		defBytes: o.DefaultRecordsBytes, maxBytes: o.MaxRecordsBytes}
	if a.m == nil {
		a.m = fetchcache.NewServeMetrics(nil)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultHTTPMaxRecordsBytes
	}
	if a.defBytes <= 0 {
		a.defBytes = min(DefaultHTTPRecordsBytes, a.maxBytes)
	}
	a.writeTimeout = o.WriteTimeout
	if a.writeTimeout <= 0 {
		a.writeTimeout = DefaultWriteTimeout
	}
	a.bodyReadTimeout = o.BodyReadTimeout
	if a.bodyReadTimeout <= 0 {
		a.bodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.Writer != nil {
		if o.MaxInFlightProduceBytes <= 0 {
			o.MaxInFlightProduceBytes = DefaultMaxInFlightProduceBytes
		}
		if o.ProduceMaxWait <= 0 {
			o.ProduceMaxWait = DefaultProduceMaxWait
		}
		a.produceBudget = gate.New(gate.Options{Name: ProduceBudgetGate, Capacity: o.MaxInFlightProduceBytes, MaxWait: o.ProduceMaxWait, Registerer: o.Registerer})
	}
	if a.ready == nil {
		a.ready = func(ctx context.Context) error {
			_, err := a.cat.Topics(ctx)
			return err
		}
	}
	return a
}

// routes is the route table of o: reads, /metrics, health, serve's write
// routes with a Writer, and the catch-all answering 404 or 405.
func (a *httpAPI) routes(o HTTPOptions) []route {
	rts := []route{
		{Route{Pattern: "GET /v1/topics", Perm: auth.PermDescribe}, a.counted(a.topics)},
		{Route{Pattern: "GET /v1/topics/{topic}/partitions/{partition}", Perm: auth.PermRead}, a.counted(a.partition)},
		{Route{Pattern: "GET /v1/topics/{topic}/partitions/{partition}/records", Perm: auth.PermRead}, a.counted(a.records)},
	}
	if o.Gatherer != nil {
		// Metric labels name every topic: administrators only.
		rts = append(rts, route{Route{Pattern: "GET /metrics", Perm: auth.PermAdmin}, promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})})
	}
	rts = append(rts,
		route{Route{Pattern: "GET /healthz", Public: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})},
		route{Route{Pattern: "GET /readyz", Public: true}, http.HandlerFunc(a.readyz)},
	)
	if o.Writer != nil {
		rts = append(rts, a.writeRoutes(o.Writer)...)
	}
	if o.Groups != nil {
		rts = append(rts, a.groupRoutes(o.Groups)...)
	}
	return append(rts, route{Route{Pattern: "/"}, a.counted(func(w *countingWriter, r *http.Request) {
		allow := a.allowed(r)
		if len(allow) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.fail(http.StatusNotFound, fetchcache.CodeNotFound, fmt.Sprintf("no such path %q", r.URL.Path))
			return
		}
		if len(allow) == 0 {
			allow = []string{http.MethodGet, http.MethodHead}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		w.fail(http.StatusMethodNotAllowed, fetchcache.CodeInvalidRequest, fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
	})})
}

// allowed lists, sorted, the methods a route of the handler serves r's path
// with (none for a path no route has): the Allow header of a 405.
func (a *httpAPI) allowed(r *http.Request) []string {
	if a.mux == nil {
		return nil
	}
	var out []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPost, http.MethodPut} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// countingWriter records the result code and body bytes of one API request,
// and bounds each write by the write timeout.
type countingWriter struct {
	http.ResponseWriter
	code  string
	bytes int

	rc    *http.ResponseController
	wt    time.Duration // the write timeout; 0: none
	armed time.Time     // when the write deadline was last moved
}

// deadlineStep is the most one write to the connection carries under one
// write deadline: a large write (a raw response's part can be max_bytes)
// is split so that the deadline moves with a client that reads, however
// slowly, and cuts off only one that stopped.
const deadlineStep = 256 << 10

func (w *countingWriter) Write(p []byte) (int, error) {
	total := 0
	for {
		q := p
		if w.wt > 0 {
			q = p[:min(len(p), deadlineStep)]
			// Moved at most once a second (a quarter of a shorter write
			// timeout, so it moves before it passes): a deadline per write
			// would cost a timer update for every 64 KiB.
			if now := time.Now(); now.Sub(w.armed) >= min(time.Second, w.wt/4) {
				if w.rc.SetWriteDeadline(now.Add(w.wt)) != nil {
					w.wt = 0 // not a connection's writer (a test's recorder)
					q = p
				}
				w.armed = now
			}
		}
		n, err := w.ResponseWriter.Write(q)
		w.bytes += n
		total += n
		p = p[n:]
		if err != nil || len(p) == 0 {
			return total, err
		}
	}
}

// disarm writes out what is buffered while the write deadline still holds,
// then lifts it: the server does not reset it for the connection's next
// request.
func (w *countingWriter) disarm() {
	if w.wt > 0 && !w.armed.IsZero() {
		_ = w.rc.Flush()
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

// Flush lets streamed responses reach the client.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// fail writes an error body.
func (w *countingWriter) fail(status int, code, msg string) {
	w.code = code
	Fail(w, status, code, msg)
}

// ErrorBody is the JSON body of every error answer: {"code","message"}.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (a *httpAPI) counted(h func(w *countingWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &countingWriter{ResponseWriter: rw, code: fetchcache.CodeOK, rc: http.NewResponseController(rw), wt: a.writeTimeout}
		defer w.disarm()
		defer func() {
			a.m.Observe(fetchcache.InterfaceHTTP, w.code, w.bytes, time.Since(start).Seconds())
		}()
		h(w, r)
	})
}

// WriteJSON answers v as a JSON body with status: every answer of the /v1
// API, serve's write routes included.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own plain types are marshalled
		status, b = http.StatusInternalServerError, []byte(`{"code":"INTERNAL","message":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Fail answers an error: status and the JSON ErrorBody {code, message}.
func Fail(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, ErrorBody{Code: code, Message: msg})
}

// errorStatus is the HTTP API's answer to each Kafka error, in the order
// they are tried: the status and the result code of the JSON body.
var errorStatus = []struct {
	err    error
	status int
	code   string
}{
	{kafkaerr.ErrUnknownTopicOrPartition, http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition},
	{kafkaerr.ErrOffsetOutOfRange, http.StatusRequestedRangeNotSatisfiable, fetchcache.CodeOffsetOutOfRange},
	{kafkaerr.ErrCorrupt, http.StatusInternalServerError, fetchcache.CodeCorruptMessage},
	{kafkaerr.ErrTopicAlreadyExists, http.StatusConflict, fetchcache.CodeTopicAlreadyExists},
	{kafkaerr.ErrInvalidTopic, http.StatusBadRequest, fetchcache.CodeInvalidTopic},
	{kafkaerr.ErrInvalidConfig, http.StatusBadRequest, fetchcache.CodeInvalidConfig},
	{kafkaerr.ErrStorage, http.StatusInternalServerError, fetchcache.CodeStorageError},
}

// ErrorStatus is the HTTP status and result code of err: the Kafka error it
// matches (errorStatus), 429 THROTTLED for an overload, else 500 INTERNAL.
func ErrorStatus(err error) (status int, code string) {
	for _, e := range errorStatus {
		if errors.Is(err, e.err) {
			return e.status, e.code
		}
	}
	if _, ok := gate.RetryAfter(err); ok {
		return http.StatusTooManyRequests, fetchcache.CodeThrottled
	}
	return http.StatusInternalServerError, fetchcache.CodeInternal
}

// failErr answers err with the status and code ErrorStatus gives it.
func (a *httpAPI) failErr(w *countingWriter, r *http.Request, err error) {
	a.answerErr(w.Header(), r, err, w.fail)
}

// answerErr answers err with fail and the status and code ErrorStatus gives
// it, for every route, reads and writes: Retry-After on THROTTLED, corrupt
// data counted (tiered_fetch_corrupt_objects_total) and logged, other
// server-side failures logged unless the client left.
func (a *httpAPI) answerErr(h http.Header, r *http.Request, err error, fail func(status int, code, msg string)) {
	status, code := ErrorStatus(err)
	switch {
	case code == fetchcache.CodeCorruptMessage:
		a.m.CountCorrupt()
		a.log.Error("request failed: corrupt data", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "err", err)
	case code == fetchcache.CodeThrottled:
		d, _ := gate.RetryAfter(err)
		setRetryAfter(h, d)
	case status >= 500 && r.Context().Err() == nil:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "code", code, "err", err)
	}
	fail(status, code, err.Error())
}

// setRetryAfter sets Retry-After to d in whole seconds, rounded up.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
}

func (a *httpAPI) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "message": err.Error()})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// TopicJSON is one topic of GET /v1/topics.
type TopicJSON struct {
	Topic string `json:"topic"`
	// TopicID is the topic ID of the lineage served (Kafka's string form),
	// left out for a topic without one.
	TopicID    string  `json:"topic_id,omitempty"`
	Partitions []int32 `json:"partitions"`
}

func (a *httpAPI) topics(w *countingWriter, r *http.Request) {
	ts, err := a.cat.Topics(r.Context())
	if err != nil {
		a.failErr(w, r, fmt.Errorf("list topics: %w", err))
		return
	}
	out := struct {
		Topics []TopicJSON `json:"topics"`
	}{Topics: make([]TopicJSON, 0, len(ts))}
	p := auth.PrincipalFromContext(r.Context())
	for _, t := range ts {
		if !a.auth.May(p, auth.PermDescribe, t.Name) {
			continue
		}
		tj := TopicJSON{Topic: t.Name, TopicID: t.ID, Partitions: t.Partitions}
		if tj.Partitions == nil {
			tj.Partitions = []int32{}
		}
		out.Topics = append(out.Topics, tj)
	}
	WriteJSON(w, http.StatusOK, out)
}

// lookup parses {topic} and {partition} and resolves the partition.
func (a *httpAPI) lookup(w *countingWriter, r *http.Request) (string, int32, fetchcache.Partition, bool) {
	topic := r.PathValue("topic")
	ps := r.PathValue("partition")
	if err := topicconfig.ValidateTopicName(topic); err != nil {
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return "", 0, nil, false
	}
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("partition %q is not a 32-bit integer", ps))
		return "", 0, nil, false
	}
	if p < 0 {
		w.fail(http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition, (&fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: int32(p)}).Error())
		return "", 0, nil, false
	}
	part, err := a.cat.Partition(r.Context(), topic, int32(p))
	if err != nil {
		a.failErr(w, r, err)
		return "", 0, nil, false
	}
	return topic, int32(p), part, true
}

// PartitionJSON is the body of GET /v1/topics/{t}/partitions/{p}.
type PartitionJSON struct {
	Topic            string                   `json:"topic"`
	Partition        int32                    `json:"partition"`
	LogStartOffset   int64                    `json:"log_start_offset"`
	LogEndOffset     int64                    `json:"log_end_offset"`
	LastStableOffset int64                    `json:"last_stable_offset"`
	MaxTimestamp     *int64                   `json:"max_timestamp,omitempty"` // -1: no record has one
	Segments         []fetchcache.SegmentInfo `json:"segments,omitempty"`

	// TopicID is the topic ID of the lineage the partition serves, as of
	// the manifest read these offsets come from (fresher than GET
	// /v1/topics, which is reused for the catalog's TopicsTTL); left out
	// for a topic without one.
	TopicID string `json:"topic_id,omitempty"`
}

func (a *httpAPI) partition(w *countingWriter, r *http.Request) {
	topic, p, part, ok := a.lookup(w, r)
	if !ok {
		return
	}
	off, err := part.Offsets(r.Context())
	if err != nil {
		a.failErr(w, r, fmt.Errorf("offsets of %s-%d: %w", topic, p, err))
		return
	}
	out := PartitionJSON{Topic: topic, Partition: p, LogStartOffset: off.LogStart, LogEndOffset: off.LogEnd, LastStableOffset: off.LastStable}
	if ider, ok := part.(fetchcache.TopicIDer); ok {
		out.TopicID = ider.TopicID() // after Offsets' manifest re-read
	}
	if sl, ok := part.(fetchcache.SegmentLister); ok {
		segs, err := sl.Segments(r.Context())
		if err != nil {
			a.failErr(w, r, fmt.Errorf("segments of %s-%d: %w", topic, p, err))
			return
		}
		maxTS := int64(-1)
		for _, s := range segs {
			maxTS = max(maxTS, s.MaxTimestamp)
		}
		out.Segments, out.MaxTimestamp = segs, &maxTS
		if out.Segments == nil {
			out.Segments = []fetchcache.SegmentInfo{}
		}
	}
	WriteJSON(w, http.StatusOK, out)
}

// parseInt64Param reads a non-negative integer query parameter.
func parseInt64Param(q map[string][]string, name string) (v int64, set bool, err error) {
	vs, ok := q[name]
	if !ok {
		return 0, false, nil
	}
	if len(vs) != 1 {
		return 0, true, fmt.Errorf("%s is given %d times", name, len(vs))
	}
	v, err = strconv.ParseInt(vs[0], 10, 64)
	if err != nil || v < 0 {
		return 0, true, fmt.Errorf("%s %q is not a non-negative integer", name, vs[0])
	}
	return v, true, nil
}

// negotiate picks the records media type from an Accept header: the
// acceptable one with the highest q, JSON lines on a tie or for */*.
func negotiate(accept string) (string, bool) {
	if strings.TrimSpace(accept) == "" {
		return MediaNDJSON, true
	}
	// q of each type: the most specific matching range decides.
	type pick struct {
		q    float64
		spec int // 0 none, 1 */*, 2 type/*, 3 exact
	}
	var nd, raw pick
	for _, part := range strings.Split(accept, ",") {
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		q := 1.0
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && x >= 0 && x <= 1 {
					q = x
				}
			}
		}
		for _, c := range []struct {
			p  *pick
			mt string
		}{{&nd, MediaNDJSON}, {&raw, MediaRaw}} {
			spec := 0
			switch {
			case mt == c.mt:
				spec = 3
			case mt == "application/*":
				spec = 2
			case mt == "*/*":
				spec = 1
			}
			if spec > c.p.spec {
				*c.p = pick{q: q, spec: spec}
			}
		}
	}
	switch {
	case nd.q == 0 && raw.q == 0:
		return "", false
	case raw.q > nd.q:
		return MediaRaw, true
	default:
		return MediaNDJSON, true
	}
}

func (a *httpAPI) records(w *countingWriter, r *http.Request) {
	// Not r.URL.Query(): it drops the pairs it cannot decode, and a broken
	// offset would then read from the log start.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("malformed query string: %v", err))
		return
	}
	for k := range q {
		switch k {
		case "offset", "timestamp", "max_bytes":
		default:
			w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("unknown query parameter %q (allowed: offset, timestamp, max_bytes)", k))
			return
		}
	}
	offset, hasOffset, err := parseInt64Param(q, "offset")
	if err != nil {
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return
	}
	ts, hasTS, err := parseInt64Param(q, "timestamp")
	switch {
	case err != nil:
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return
	case hasOffset && hasTS:
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, "give offset or timestamp, not both")
		return
	}
	maxBytes, hasMax, err := parseInt64Param(q, "max_bytes")
	switch {
	case err != nil:
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return
	case hasMax && (maxBytes < 1 || maxBytes > int64(a.maxBytes)):
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("max_bytes %d is outside [1, %d]", maxBytes, a.maxBytes))
		return
	case !hasMax:
		maxBytes = int64(a.defBytes)
	}
	media, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		w.fail(http.StatusNotAcceptable, fetchcache.CodeNotAcceptable, fmt.Sprintf("Accept %q allows neither %s nor %s", r.Header.Get("Accept"), MediaNDJSON, MediaRaw))
		return
	}
	topic, p, part, ok := a.lookup(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	off, err := part.Offsets(ctx)
	if err != nil {
		a.failErr(w, r, fmt.Errorf("offsets of %s-%d: %w", topic, p, err))
		return
	}
	switch {
	case hasTS:
		o, _, found, err := part.OffsetForTimestamp(ctx, ts)
		if err != nil {
			a.failErr(w, r, fmt.Errorf("find timestamp %d in %s-%d: %w", ts, topic, p, err))
			return
		}
		offset = off.LogEnd
		if found {
			offset = o
		}
	case !hasOffset:
		offset = off.LogStart
	}
	setHeaders := func(next int64) {
		h := w.Header()
		h.Set(HeaderLogStartOffset, strconv.FormatInt(off.LogStart, 10))
		h.Set(HeaderLogEndOffset, strconv.FormatInt(max(off.LogEnd, next), 10))
		h.Set(HeaderNextOffset, strconv.FormatInt(next, 10))
		// Read after the data: a lineage change during the read (a
		// manifest re-read) shows, and IDs never change back.
		if ider, ok := part.(fetchcache.TopicIDer); ok && ider.TopicID() != "" {
			h.Set(HeaderTopicID, ider.TopicID())
		}
		h.Set("Vary", "Accept")
	}
	if media == MediaRaw {
		// Written straight from the cache's chunks: no copy per request.
		rr, err := fetchcache.ReadView(ctx, part, offset, int(maxBytes))
		if err != nil {
			a.failErr(w, r, err)
			return
		}
		setHeaders(rr.Next)
		w.Header().Set("Content-Type", MediaRaw)
		w.Header().Set("Content-Length", strconv.Itoa(rr.Len))
		w.WriteHeader(http.StatusOK)
		for _, b := range rr.Parts {
			if _, err := w.Write(b); err != nil {
				return // client gone
			}
		}
		return
	}
	data, err := part.Read(ctx, offset, int(maxBytes))
	if err != nil {
		a.failErr(w, r, err)
		return
	}
	next := offset
	if len(data) > 0 {
		next = fetchcache.LastBatchNext(data)
	}
	setHeaders(next)
	a.writeNDJSON(w, r, p, offset, data)
}

// writeNDJSON streams the records at or after offset as JSON lines. A batch
// failing its CRC or decoding before anything was written is a 500; after,
// the response is aborted so the client sees a broken, not a short, body.
func (a *httpAPI) writeNDJSON(w *countingWriter, r *http.Request, partition int32, offset int64, data []byte) {
	var (
		dec     record.Decoder
		line    []byte
		started bool
		bw      *bufio.Writer
	)
	start := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", MediaNDJSON)
			w.WriteHeader(http.StatusOK)
			bw = bufio.NewWriterSize(w, 64<<10)
		}
	}
	fail := func(err error) {
		if !started {
			a.failErr(w, r, err)
			return
		}
		w.code = fetchcache.CodeInternal
		_ = bw.Flush()
		a.log.Error("fetch response aborted", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
	it := record.NewIter(data)
	it.Verify = true
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		if b.IsControl() || b.NextOffset() <= offset {
			continue
		}
		recs, err := dec.Records(b)
		if err != nil {
			fail(fmt.Errorf("decode batch at offset %d: %w", b.BaseOffset(), err))
			return
		}
		for i := range recs {
			if recs[i].Offset < offset {
				continue
			}
			start()
			line = recordjson.AppendLine(line[:0], partition, &recs[i])
			if _, err := bw.Write(line); err != nil {
				return // client gone
			}
		}
	}
	if err := it.Err(); err != nil {
		fail(fmt.Errorf("read batches at offset %d: %w", offset, err))
		return
	}
	start()
	_ = bw.Flush()
}
