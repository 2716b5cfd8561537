package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// TestErrorStatus: the one table answers each Kafka error from any layer,
// overload with 429, and anything else with 500 INTERNAL.
func TestErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&fetchcache.UnknownTopicOrPartitionError{Topic: "t"}, http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition},
		{fmt.Errorf("x: %w", &localtier.UnknownTopicOrPartitionError{Topic: "t"}), http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition},
		{&fetchcache.OffsetOutOfRangeError{Offset: 1}, http.StatusRequestedRangeNotSatisfiable, fetchcache.CodeOffsetOutOfRange},
		{fmt.Errorf("x: %w", &record.CorruptError{File: "f"}), http.StatusInternalServerError, fetchcache.CodeCorruptMessage},
		{&remotelog.CorruptObjectError{Key: "k"}, http.StatusInternalServerError, fetchcache.CodeCorruptMessage},
		{&gate.OverloadedError{Gate: gate.Gets, RetryAfter: time.Second}, http.StatusTooManyRequests, fetchcache.CodeThrottled},
		{&localtier.TopicExistsError{Topic: "t"}, http.StatusConflict, fetchcache.CodeTopicAlreadyExists},
		{&topicconfig.InvalidTopicError{Topic: "a/b"}, http.StatusBadRequest, fetchcache.CodeInvalidTopic},
		{&topicconfig.InvalidConfigError{Name: "x"}, http.StatusBadRequest, fetchcache.CodeInvalidConfig},
		{fmt.Errorf("produce: %w", kafkaerr.ErrStorage), http.StatusInternalServerError, fetchcache.CodeStorageError},
		{errors.New("disk on fire"), http.StatusInternalServerError, fetchcache.CodeInternal},
	} {
		if status, code := ErrorStatus(tc.err); status != tc.status || code != tc.code {
			t.Errorf("ErrorStatus(%v) = %d %s, want %d %s", tc.err, status, code, tc.status, tc.code)
		}
	}
}
