package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tiered/tiered/fetchcache"
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
	// missing topic.
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

// writeRoutes adds the write API of w to mux:
//
//	POST  /v1/topics                                        create (CreateTopicRequest)
//	GET   /v1/topics/{topic}/config                         describe
//	PATCH /v1/topics/{topic}/config                         alter (AlterConfigRequest)
//	POST  /v1/topics/{topic}[/partitions/{partition}]/records  produce JSON lines (?auto_create=false)
//	POST  /v1/admin/reload
func (a *httpAPI) writeRoutes(mux *http.ServeMux, w Writer) {
	mux.HandleFunc("POST /v1/topics", func(rw http.ResponseWriter, r *http.Request) {
		var req CreateTopicRequest
		if !a.decodeBody(rw, r, &req) {
			return
		}
		a.answer(rw, r, http.StatusCreated)(w.CreateTopic(r.Context(), req))
	})
	mux.HandleFunc("GET /v1/topics/{topic}/config", func(rw http.ResponseWriter, r *http.Request) {
		a.answer(rw, r, http.StatusOK)(w.DescribeTopic(r.Context(), r.PathValue("topic")))
	})
	mux.HandleFunc("PATCH /v1/topics/{topic}/config", func(rw http.ResponseWriter, r *http.Request) {
		var req AlterConfigRequest
		if !a.decodeBody(rw, r, &req) {
			return
		}
		if len(req.Set) == 0 && len(req.Delete) == 0 {
			Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, `nothing to alter: give "set" and/or "delete"`)
			return
		}
		a.answer(rw, r, http.StatusOK)(w.AlterTopic(r.Context(), r.PathValue("topic"), req))
	})
	produce := func(rw http.ResponseWriter, r *http.Request) {
		partition := int32(-1)
		if ps := r.PathValue("partition"); ps != "" {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil {
				Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("partition %q is not a 32-bit integer", ps))
				return
			}
			if p < 0 {
				err := &fetchcache.UnknownTopicOrPartitionError{Topic: r.PathValue("topic"), Partition: int32(p)}
				Fail(rw, http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition, err.Error())
				return
			}
			partition = int32(p)
		}
		autoCreate := true
		for k, vs := range r.URL.Query() {
			if k == "auto_create" && len(vs) == 1 && (vs[0] == "true" || vs[0] == "false") {
				autoCreate = vs[0] == "true"
				continue
			}
			Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("unknown or bad query parameter %q (allowed: auto_create=true|false)", k))
			return
		}
		body := http.MaxBytesReader(rw, r.Body, MaxProduceBodyBytes)
		a.answer(rw, r, http.StatusOK)(w.Produce(r.Context(), r.PathValue("topic"), partition, autoCreate, body))
	}
	mux.HandleFunc("POST /v1/topics/{topic}/records", produce)
	mux.HandleFunc("POST /v1/topics/{topic}/partitions/{partition}/records", produce)
	mux.HandleFunc("POST /v1/admin/reload", func(rw http.ResponseWriter, r *http.Request) {
		if err := w.Reload(r.Context()); err != nil {
			a.failWrite(rw, r, err)
			return
		}
		WriteJSON(rw, http.StatusOK, map[string]string{"status": "reloaded"})
	})
}

// decodeBody decodes a small JSON body strictly, or answers 400.
func (a *httpAPI) decodeBody(rw http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		Fail(rw, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("invalid JSON body: %v", err))
		return false
	}
	return true
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
// is, a body over MaxProduceBodyBytes 413 RECORD_LIST_TOO_LARGE, else as
// every route answers (answerErr).
func (a *httpAPI) failWrite(rw http.ResponseWriter, r *http.Request, err error) {
	var we *Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &we):
		if we.RetryAfter > 0 {
			setRetryAfter(rw.Header(), we.RetryAfter)
		}
		Fail(rw, we.Status, we.Code, we.Message)
	case errors.As(err, &mbe):
		Fail(rw, http.StatusRequestEntityTooLarge, fetchcache.CodeRecordListTooLarge, fmt.Sprintf("request body is larger than %d bytes; send fewer records per request", mbe.Limit))
	default:
		a.answerErr(rw.Header(), r, err, func(status int, code, msg string) { Fail(rw, status, code, msg) })
	}
}
