package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/gate"
)

// MaxProduceBodyBytes bounds the body of one produce request.
const MaxProduceBodyBytes = 64 << 20

// maxAdminBodyBytes bounds the JSON body of a topic request.
const maxAdminBodyBytes = 1 << 20

// Writer is the write side of the /v1 API, which serve adds over its own log
// engine: the routes here parse and bound the requests and answer with the
// API's one vocabulary; Writer does the work. The answers it returns are
// written as JSON.
type Writer interface {
	// CreateTopic creates a topic and describes it.
	CreateTopic(ctx context.Context, req CreateTopicRequest) (any, error)
	// DescribeTopic describes a topic and its configs.
	DescribeTopic(ctx context.Context, topic string) (any, error)
	// AlterTopic sets and deletes topic config overrides and describes the
	// topic after.
	AlterTopic(ctx context.Context, topic string, req AlterConfigRequest) (any, error)
	// Produce appends the JSON-lines body to partition, or through the
	// default partitioner when partition is -1; autoCreate creates a
	// missing topic. The body is a Holder: memory the Writer keeps for
	// the body's records beyond the body's size is counted through it.
	Produce(ctx context.Context, topic string, partition int32, autoCreate bool, body io.Reader) (any, error)
	// Reload re-reads what the process may reload without a restart.
	Reload(ctx context.Context) error
}

// CreateTopicRequest is the body of POST /v1/topics.
type CreateTopicRequest struct {
	Topic      string            `json:"topic"`
	Partitions int               `json:"partitions"`
	Configs    map[string]string `json:"configs"`
}

// AlterConfigRequest is the body of PATCH /v1/topics/{topic}/config: the
// overrides to set and the ones to delete (back to the default).
type AlterConfigRequest struct {
	Set    map[string]string `json:"set"`
	Delete []string          `json:"delete"`
}

// Error is an answer a Writer chooses itself, for what only it knows (a
// request its log engine refuses, a process still recovering): written as
// Status and the JSON body {Code, Message}, with Retry-After when set.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// writeRoutes are the write API of w, each with its permission:
//
//	POST  /v1/topics                                        create (CreateTopicRequest)           admin
//	GET   /v1/topics/{topic}/config                         describe                              describe
//	PATCH /v1/topics/{topic}/config                         alter (AlterConfigRequest)            admin
//	POST  /v1/topics/{topic}[/partitions/{partition}]/records  produce JSON lines (?auto_create=false)  write (auto-creation: admin too)
//	POST  /v1/admin/reload                                  reload                                admin
//
// Create, alter and reload log one audit line each (auth.Audit) with the
// principal and the result, refused ones included.
func (a *httpAPI) writeRoutes(w Writer) []route {
	create := func(rw http.ResponseWriter, r *http.Request) {
		var req CreateTopicRequest
		if !a.decodeBody(rw, r, &req) {
			a.audit(r, AuditTopicCreate, "topics", fetchcache.CodeInvalidRequest)
			return
		}
		v, err := w.CreateTopic(r.Context(), req)
		a.audit(r, AuditTopicCreate, req.Topic, resultOf(err))
		a.answer(rw, r, http.StatusCreated)(v, err)
	}
	alter := func(rw http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		var req AlterConfigRequest
		if !a.decodeBody(rw, r, &req) {
			a.audit(r, AuditTopicAlter, topic, fetchcache.CodeInvalidRequest)
			return
		}
		if len(req.Set) == 0 && len(req.Delete) == 0 {
			a.audit(r, AuditTopicAlter, topic, fetchcache.CodeInvalidRequest)
			Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, `nothing to alter: give "set" and/or "delete"`)
			return
		}
		v, err := w.AlterTopic(r.Context(), topic, req)
		a.audit(r, AuditTopicAlter, topic, resultOf(err))
		a.answer(rw, r, http.StatusOK)(v, err)
	}
	produce := func(rw http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		partition := int32(-1)
		if ps := r.PathValue("partition"); ps != "" {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil {
				Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("partition %q is not a 32-bit integer", ps))
				return
			}
			if p < 0 {
				err := &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: int32(p)}
				Fail(rw, http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition, err.Error())
				return
			}
			partition = int32(p)
		}
		autoCreate := true
		// Not r.URL.Query(): it drops the pairs it cannot decode, and a
		// broken auto_create=false would then auto-create.
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("malformed query string: %v", err))
			return
		}
		for k, vs := range q {
			if k == "auto_create" && len(vs) == 1 && (vs[0] == "true" || vs[0] == "false") {
				autoCreate = vs[0] == "true"
				continue
			}
			Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("unknown or bad query parameter %q (allowed: auto_create=true|false)", k))
			return
		}
		// Creating a missing topic is administration, as Kafka's CREATE:
		// without admin a missing topic is 404, as with auto_create=false.
		autoCreate = autoCreate && a.auth.May(auth.PrincipalFromContext(r.Context()), auth.PermAdmin, "")
		created := autoCreate && !a.exists(r.Context(), topic)
		body, err := a.budgetBody(rw, r)
		if err != nil {
			a.failWrite(rw, r, err)
			return
		}
		defer body.release()
		v, err := w.Produce(r.Context(), topic, partition, autoCreate, body)
		if body.err != nil {
			err = body.err // the budget or the connection failed, whatever the Writer made of it
		}
		if created && a.exists(r.Context(), topic) {
			a.audit(r, AuditTopicCreate, topic, auth.AuditOK)
		}
		a.answer(rw, r, http.StatusOK)(v, err)
	}
	reload := func(rw http.ResponseWriter, r *http.Request) {
		err := w.Reload(r.Context())
		a.audit(r, AuditReload, "config", resultOf(err))
		if err != nil {
			a.failWrite(rw, r, err)
			return
		}
		WriteJSON(rw, http.StatusOK, map[string]string{"status": "reloaded"})
	}
	return []route{
		{Route{Pattern: "POST /v1/topics", Perm: auth.PermAdmin, Audit: AuditTopicCreate}, http.HandlerFunc(create)},
		{Route{Pattern: "GET /v1/topics/{topic}/config", Perm: auth.PermDescribe}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			a.answer(rw, r, http.StatusOK)(w.DescribeTopic(r.Context(), r.PathValue("topic")))
		})},
		{Route{Pattern: "PATCH /v1/topics/{topic}/config", Perm: auth.PermAdmin, Audit: AuditTopicAlter}, http.HandlerFunc(alter)},
		{Route{Pattern: "POST /v1/topics/{topic}/records", Perm: auth.PermWrite}, http.HandlerFunc(produce)},
		{Route{Pattern: "POST /v1/topics/{topic}/partitions/{partition}/records", Perm: auth.PermWrite}, http.HandlerFunc(produce)},
		{Route{Pattern: "POST /v1/admin/reload", Perm: auth.PermAdmin, Audit: AuditReload}, http.HandlerFunc(reload)},
	}
}

// exists reports whether the catalog has topic (a failed lookup counts as
// not there).
func (a *httpAPI) exists(ctx context.Context, topic string) bool {
	_, err := a.cat.Partition(ctx, topic, 0)
	return err == nil
}

// audit logs one change r made or tried, with r's principal.
func (a *httpAPI) audit(r *http.Request, action, target, result string) {
	auth.Audit(a.log, auth.PrincipalFromContext(r.Context()), action, target, result)
}

// resultOf is a change's audit result: auth.AuditOK, or the code of the
// answer failWrite gives err.
func resultOf(err error) string {
	var we *Error
	switch {
	case err == nil:
		return auth.AuditOK
	case errors.As(err, &we):
		return we.Code
	}
	_, code := ErrorStatus(err)
	return code
}

// decodeBody decodes a small JSON body strictly, or answers 400 (413 for
// one over maxAdminBodyBytes, as reset-offsets does).
func (a *httpAPI) decodeBody(rw http.ResponseWriter, r *http.Request, v any) bool {
	done := a.bodyDeadline(rw)
	dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, maxAdminBodyBytes))
	dec.DisallowUnknownFields()
	if err := decodeOne(dec, v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case isTimeout(err):
			a.failWrite(rw, r, &bodyTimeoutError{err: err})
			return false
		case errors.As(err, &mbe):
			Fail(rw, http.StatusRequestEntityTooLarge, fetchcache.CodeInvalidRequest, fmt.Sprintf("body larger than %d bytes", maxAdminBodyBytes))
			return false
		}
		Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("invalid JSON body: %v", err))
		return false
	}
	var one [1]byte
	if n, err := r.Body.Read(one[:]); n == 0 && errors.Is(err, io.EOF) {
		done() // read whole; bytes after the JSON keep the deadline for their discard
	}
	return true
}

// decodeOne decodes the one JSON value of dec's input into v: an error
// also when anything but white space follows it (a second value, stray
// text), which would otherwise be dropped unread.
func decodeOne(dec *json.Decoder, v any) error {
	if err := dec.Decode(v); err != nil {
		return err
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return errors.New("more data after the JSON value")
}

// answer writes a Writer's result: status and v as JSON, or the error.
func (a *httpAPI) answer(rw http.ResponseWriter, r *http.Request, status int) func(v any, err error) {
	return func(v any, err error) {
		if err != nil {
			a.failWrite(rw, r, err)
			return
		}
		WriteJSON(rw, status, v)
	}
}

// failWrite answers a write route's error: the Writer's own *Error as it
// is, a body over MaxProduceBodyBytes 413 RECORD_LIST_TOO_LARGE, a body
// slower than BodyReadTimeout 408 REQUEST_TIMED_OUT (closing the
// connection), an exhausted produce budget 429 THROTTLED, else as
// every route answers (answerErr).
func (a *httpAPI) failWrite(rw http.ResponseWriter, r *http.Request, err error) {
	var we *Error
	var mbe *http.MaxBytesError
	var bte *bodyTimeoutError
	switch {
	case errors.As(err, &we):
		if we.RetryAfter > 0 {
			setRetryAfter(rw.Header(), we.RetryAfter)
		}
		Fail(rw, we.Status, we.Code, we.Message)
	case errors.As(err, &bte):
		a.m.Closed(fetchcache.InterfaceHTTP, fetchcache.ClosedBodyTimeout).Inc()
		rw.Header().Set("Connection", "close")
		Fail(rw, http.StatusRequestTimeout, fetchcache.CodeRequestTimedOut, err.Error())
	case errors.As(err, &mbe):
		Fail(rw, http.StatusRequestEntityTooLarge, fetchcache.CodeRecordListTooLarge, fmt.Sprintf("request body is larger than %d bytes; send fewer records per request", mbe.Limit))
	default:
		a.answerErr(rw.Header(), r, err, func(status int, code, msg string) { Fail(rw, status, code, msg) })
	}
}

// bodyTimeoutError is a request body that did not arrive within
// BodyReadTimeout.
type bodyTimeoutError struct{ err error }

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("request body did not arrive in time: %v", e.err)
}
func (e *bodyTimeoutError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyDeadline bounds reading r's body by BodyReadTimeout from now; done
// lifts the bound (call it once the body is read whole, before slow work:
// the server's read that watches for a closed connection would otherwise
// end the request's context when it passes). The server sets its own
// deadlines again for the connection's next request.
func (a *httpAPI) bodyDeadline(rw http.ResponseWriter) (done func()) {
	rc := http.NewResponseController(rw)
	if rc.SetReadDeadline(time.Now().Add(a.bodyReadTimeout)) != nil {
		return func() {} // not a connection's writer (a test's recorder)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = rc.SetReadDeadline(time.Time{}) }) }
}

// Holder is what a Writer's Produce gets as its body: Hold counts n more
// bytes the Writer keeps for the body's records (their encoded batches,
// which for small records are larger than the body) against the produce
// budget, waiting for room up to ProduceMaxWait. Its error is the answer
// (429 when the budget stays full): the Writer stops and writes nothing.
type Holder interface {
	Hold(n int64) error
}

// holdStep is how much of the produce budget Hold takes at a time past a
// body's reserve, so that a body of small records does not go to the gate
// for each.
const holdStep = 1 << 20

// produceBody is a produce request's body read within the produce budget.
type produceBody struct {
	ctx      context.Context
	r        io.Reader
	g        *gate.Gate
	held     int64 // admitted by the gate
	read     int64 // bytes read so far
	kept     int64 // bytes the Writer holds for the records (Hold)
	err      error // the deadline or the budget failed: the answer
	deadline func()
}

// budgetBody reserves r's body from the produce budget up front, waiting
// up to ProduceMaxWait, and bounds its arrival by BodyReadTimeout. A body
// reserves its declared length, or, chunked, the most a body may be
// (MaxProduceBodyBytes), the part not read returned at its end; never more
// than the whole budget: a body larger than the budget holds all of it while
// it is read, so it is read alone but it is read. Reserving up front, not
// as the bytes come, keeps bodies that each hold a part from waiting for
// each other until all are refused.
func (a *httpAPI) budgetBody(rw http.ResponseWriter, r *http.Request) (*produceBody, error) {
	if r.ContentLength > MaxProduceBodyBytes {
		return nil, &http.MaxBytesError{Limit: MaxProduceBodyBytes}
	}
	b := &produceBody{ctx: r.Context(), r: http.MaxBytesReader(rw, r.Body, MaxProduceBodyBytes), g: a.produceBudget}
	n := r.ContentLength
	if n < 0 {
		n = MaxProduceBodyBytes
	}
	if n = min(n, b.g.Capacity()); n > 0 {
		if err := b.g.Start(r.Context(), n); err != nil {
			return nil, fmt.Errorf("produce body of %d bytes: %w", r.ContentLength, err)
		}
		b.held = n
	}
	b.deadline = a.bodyDeadline(rw)
	return b, nil
}

func (b *produceBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.deadline() // read whole: the Writer's work is not bounded by it
		if need := max(b.read, b.kept); b.held > need {
			b.g.Done(b.held - need) // a chunked body shorter than its reserve
			b.held = need
		}
	case isTimeout(err):
		b.err = &bodyTimeoutError{err: err}
		return n, b.err
	}
	return n, err
}

// Hold counts n more bytes the Writer keeps for the body's records. Past
// the body's reserve it takes the difference from the produce budget, a
// holdStep at a time and never more than the whole budget in all (as a
// body's reserve: a body that needs more is served alone), waiting up to
// ProduceMaxWait.
func (b *produceBody) Hold(n int64) error {
	if b.err != nil {
		return b.err
	}
	b.kept += n
	if b.kept <= b.held || b.held >= b.g.Capacity() {
		return nil
	}
	want := min((b.kept+holdStep-1)/holdStep*holdStep, b.g.Capacity())
	if err := b.g.Grow(b.ctx, b.held, want-b.held); err != nil {
		b.err = fmt.Errorf("produce body's records (%d bytes encoded from %d read): %w", b.kept, b.read, err)
		return b.err
	}
	b.held = want
	return nil
}

// release returns the body's budget. The read deadline stays unless the
// body was read whole: it bounds the server's discard of an unread rest.
func (b *produceBody) release() {
	if b.held > 0 {
		b.g.Done(b.held)
		b.held = 0
	}
}
