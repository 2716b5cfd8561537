package replay

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/fetchcache/httpapi"
)

func TestClientAgainstService(t *testing.T) {
	env := newReplayEnv(t)
	c := env.client
	ctx := context.Background()

	topics, err := c.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != replayTopic || len(topics[0].Partitions) != 3 {
		t.Fatalf("topics %+v, %v", topics, err)
	}
	want := env.want[1]
	d, err := c.PartitionInfo(ctx, replayTopic, 1)
	if err != nil || d.LogStart != 0 || d.LogEnd != want[len(want)-1].Offset+1 || len(d.Segments) == 0 || d.MaxTimestamp != want[len(want)-1].Timestamp {
		t.Fatalf("partition info %+v, %v", d, err)
	}

	// Raw reads walk the log batch by batch, byte-exact.
	var got []byte
	for off := d.LogStart; off < d.LogEnd; {
		res, err := c.ReadRaw(ctx, replayTopic, 1, off, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) == 0 || res.NextOffset <= off || res.LogEnd != d.LogEnd {
			t.Fatalf("read at %d: %d bytes, next %d, end %d", off, len(res.Data), res.NextOffset, res.LogEnd)
		}
		got = append(got, res.Data...)
		off = res.NextOffset
	}
	if !bytes.Equal(got, env.rawLogs[1]) {
		t.Fatalf("raw reads: %d bytes, want %d", len(got), len(env.rawLogs[1]))
	}
	if res, err := c.ReadRaw(ctx, replayTopic, 1, d.LogEnd, 0); err != nil || len(res.Data) != 0 || res.NextOffset != d.LogEnd {
		t.Fatalf("read at the end: %+v %v", res, err)
	}

	// Timestamps: every record's own time finds it; between records the
	// next one; past the end nothing.
	part, err := env.cat.Partition(ctx, replayTopic, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{0, want[0].Timestamp, want[3].Timestamp + 1, want[40].Timestamp, want[len(want)-1].Timestamp, want[len(want)-1].Timestamp + 1} {
		off, found, err := c.OffsetForTimestamp(ctx, replayTopic, 1, ts)
		wOff, _, wFound, werr := part.OffsetForTimestamp(ctx, ts)
		if err != nil || werr != nil || found != wFound || (found && off != wOff) {
			t.Fatalf("timestamp %d: got %d %v %v, catalog says %d %v %v", ts, off, found, err, wOff, wFound, werr)
		}
	}

	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := c.ReadRaw(ctx, "missing", 0, 0, 0); !errors.As(err, &ue) || ue.Topic != "missing" {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := c.PartitionInfo(ctx, replayTopic, 5); !errors.As(err, &ue) || ue.Partition != 5 {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := c.Partitions(ctx, "missing"); !errors.As(err, &ue) {
		t.Fatalf("partitions of unknown topic: %v", err)
	}
	var oe *fetchcache.OffsetOutOfRangeError
	if _, err := c.ReadRaw(ctx, replayTopic, 1, d.LogEnd+5, 0); !errors.As(err, &oe) || oe.Offset != d.LogEnd+5 || oe.LogEnd != d.LogEnd || oe.LogStart != 0 {
		t.Fatalf("past the end: %v (%+v)", err, oe)
	}
}

// TestClientThrottle: 429 answers are retried after Retry-After while the
// budget lasts; then *httpapi.ThrottledError. Other errors are typed.
func TestClientThrottle(t *testing.T) {
	var throttles atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if throttles.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "2")
			writeJSON(w, http.StatusTooManyRequests, httpError{Code: fetchcache.CodeThrottled, Message: "gate full"})
			return
		}
		switch r.URL.EscapedPath() {
		case "/pre/v1/topics":
			writeJSON(w, http.StatusOK, map[string]any{"topics": []topicJSON{{Topic: "a/b", Partitions: []int32{0}}}})
		case "/pre/v1/topics/a%2Fb/partitions/0/records":
			writeJSON(w, http.StatusBadRequest, httpError{Code: fetchcache.CodeInvalidRequest, Message: "bad " + r.URL.RawQuery})
		default:
			http.Error(w, "plain text failure", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c, err := httpapi.NewClient(srv.URL+"/pre/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	c.ThrottleBudget = 5 * time.Second
	ctx := context.Background()

	throttles.Store(2)
	ts, err := c.Topics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "a/b" || len(slept) != 2 || slept[0] != 2*time.Second {
		t.Fatalf("topics after throttles: %+v %v, slept %v", ts, err, slept)
	}

	slept = nil
	throttles.Store(3) // 3 × 2s > the 5s budget
	_, err = c.Topics(ctx)
	var te *httpapi.ThrottledError
	if !errors.As(err, &te) || te.RetryAfter != 2*time.Second || !errors.Is(err, gate.ErrOverloaded) || len(slept) != 2 {
		t.Fatalf("throttled past budget: %v, slept %v", err, slept)
	}
	if d, ok := gate.RetryAfter(err); !ok {
		t.Fatalf("server-side view of the throttle: %v %v", d, ok)
	}

	throttles.Store(0)
	var ae *httpapi.APIError
	if _, err := c.ReadRaw(ctx, "a/b", 0, 3, 10); !errors.As(err, &ae) || ae.Status != 400 || ae.Code != fetchcache.CodeInvalidRequest || ae.Message != "bad max_bytes=10&offset=3" {
		t.Fatalf("400 answer (topic escaped in the path): %v", err)
	}
	if _, err := c.PartitionInfo(ctx, "x", 0); !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "" || ae.Message != "plain text failure" {
		t.Fatalf("non-JSON error: %v", err)
	}

	for _, bad := range []string{"ftp://h", "http://", "http://u:p@h", "http://h?x=1", "::"} {
		if _, err := httpapi.NewClient(bad, nil); err == nil {
			t.Errorf("httpapi.NewClient(%q) accepted", bad)
		}
	}
}
