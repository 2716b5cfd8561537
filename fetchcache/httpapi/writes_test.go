package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// fakeWriter answers every call with err (or an echo of its arguments).
type fakeWriter struct {
	err   error
	calls []string
}

func (f *fakeWriter) result(call string) (any, error) {
	f.calls = append(f.calls, call)
	if f.err != nil {
		return nil, f.err
	}
	return map[string]string{"call": call}, nil
}

func (f *fakeWriter) CreateTopic(_ context.Context, req CreateTopicRequest) (any, error) {
	return f.result("create " + req.Topic)
}
func (f *fakeWriter) DescribeTopic(_ context.Context, topic string) (any, error) {
	return f.result("describe " + topic)
}
func (f *fakeWriter) AlterTopic(_ context.Context, topic string, _ AlterConfigRequest) (any, error) {
	return f.result("alter " + topic)
}
func (f *fakeWriter) Produce(_ context.Context, topic string, partition int32, autoCreate bool, body io.Reader) (any, error) {
	if _, err := io.ReadAll(body); err != nil {
		return nil, err
	}
	return f.result("produce " + topic + " " + strings.TrimSpace(strings.Repeat("p", int(partition+1))) + map[bool]string{true: " auto", false: ""}[autoCreate])
}
func (f *fakeWriter) Reload(context.Context) error {
	_, err := f.result("reload")
	return err
}

// TestWriteRoutes: the write API parses and bounds its requests before the
// Writer sees them, and answers the Writer's errors with the one table, its
// own *Error as given.
func TestWriteRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		err                      error
		status                   int
		want                     string // in the body
		header                   string // Retry-After, when set
		calls                    int
	}{
		{"create", "POST", "/v1/topics", `{"topic":"t"}`, nil, 201, `"create t"`, "", 1},
		{"create_bad_json", "POST", "/v1/topics", `{"topic":`, nil, 400, `INVALID_REQUEST`, "", 0},
		{"create_unknown_field", "POST", "/v1/topics", `{"topik":"t"}`, nil, 400, `INVALID_REQUEST`, "", 0},
		{"create_exists", "POST", "/v1/topics", `{"topic":"t"}`, &localtier.TopicExistsError{Topic: "t"}, 409, `TOPIC_ALREADY_EXISTS`, "", 1},
		{"create_bad_name", "POST", "/v1/topics", `{"topic":"t"}`, &topicconfig.InvalidTopicError{Message: "illegal"}, 400, `INVALID_TOPIC_EXCEPTION`, "", 1},
		{"describe", "GET", "/v1/topics/t/config", "", nil, 200, `"describe t"`, "", 1},
		{"describe_unknown", "GET", "/v1/topics/t/config", "", &localtier.UnknownTopicOrPartitionError{Topic: "t", Partition: -1}, 404, `UNKNOWN_TOPIC_OR_PARTITION`, "", 1},
		{"alter_nothing", "PATCH", "/v1/topics/t/config", `{}`, nil, 400, `nothing to alter`, "", 0},
		{"alter", "PATCH", "/v1/topics/t/config", `{"set":{"retention.ms":"1"}}`, nil, 200, `"alter t"`, "", 1},
		{"produce", "POST", "/v1/topics/t/records", `{"value":"v"}`, nil, 200, `"produce t  auto"`, "", 1},
		{"produce_partition", "POST", "/v1/topics/t/partitions/1/records?auto_create=false", `{}`, nil, 200, `"produce t pp"`, "", 1},
		{"produce_bad_partition", "POST", "/v1/topics/t/partitions/x/records", `{}`, nil, 400, `not a 32-bit integer`, "", 0},
		{"produce_negative_partition", "POST", "/v1/topics/t/partitions/-2/records", `{}`, nil, 404, `UNKNOWN_TOPIC_OR_PARTITION`, "", 0},
		{"produce_bad_query", "POST", "/v1/topics/t/records?acks=all", `{}`, nil, 400, `unknown or bad query parameter`, "", 0},
		{"produce_storage", "POST", "/v1/topics/t/records", `{}`, errors.Join(errors.New("disk"), fakeStorage{}), 500, `KAFKA_STORAGE_ERROR`, "", 1},
		{"writer_error", "POST", "/v1/admin/reload", "", &Error{Status: 503, Code: fetchcache.CodeLeaderNotAvailable, Message: "recovering", RetryAfter: 1500 * time.Millisecond}, 503, `LEADER_NOT_AVAILABLE`, "2", 1},
		{"throttled", "GET", "/v1/topics/t/config", "", &gate.OverloadedError{Gate: gate.Gets, RetryAfter: 3 * time.Second}, 429, `THROTTLED`, "3", 1},
		{"reload", "POST", "/v1/admin/reload", "", nil, 200, `reloaded`, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{err: tc.err}
			h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%s %s: %d %s, want %d with %q", tc.method, tc.path, rec.Code, rec.Body, tc.status, tc.want)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.header {
				t.Errorf("Retry-After %q, want %q", got, tc.header)
			}
			if len(w.calls) != tc.calls {
				t.Errorf("writer calls %v, want %d", w.calls, tc.calls)
			}
		})
	}
	// A produce body over the limit is cut off and answered 413.
	w := &fakeWriter{}
	h := NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/topics/t/records", io.LimitReader(zeros{}, MaxProduceBodyBytes+1)))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "RECORD_LIST_TOO_LARGE") {
		t.Fatalf("oversized produce: %d %s", rec.Code, rec.Body)
	}
}

type fakeStorage struct{}

func (fakeStorage) Error() string        { return "append failed" }
func (fakeStorage) Is(target error) bool { return target == kafkaerr.ErrStorage }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// emptyCatalog has no topics.
type emptyCatalog struct{}

func (emptyCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) { return nil, nil }
func (emptyCatalog) Partition(_ context.Context, topic string, p int32) (fetchcache.Partition, error) {
	return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: p}
}
