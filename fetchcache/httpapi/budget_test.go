package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/fetchcache"
)

// gateInFlight reads the produce budget's tiered_fetch_gate_in_flight.
type gateInFlight struct {
	t   *testing.T
	reg *prometheus.Registry
}

func (g gateInFlight) InFlight() int64 {
	return int64(g.value("tiered_fetch_gate_in_flight"))
}

// Waits is the produce budget's count of admissions that waited.
func (g gateInFlight) Waits() int64 {
	return int64(g.value("tiered_fetch_gate_waits_total"))
}

// value is the produce budget's series of the gate metric name.
func (g gateInFlight) value(name string) float64 {
	g.t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		g.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "gate" && l.GetValue() == ProduceBudgetGate {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	g.t.Fatalf("no produce budget series %s", name)
	return 0
}

// holdingWriter reads a produce body whole and, with times set, holds
// times its size for its records through Hold (as serve's producer does
// with their encoded batches); the first call reports the body's size on
// read and answers only when release is closed (a produce in progress,
// holding its body), later ones answer at once.
type holdingWriter struct {
	fakeWriter
	times   int64
	calls   atomic.Int64
	read    chan int
	release chan struct{}
}

func (h *holdingWriter) Produce(ctx context.Context, _ string, _ int32, _ bool, body io.Reader) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if h.times > 0 {
		if err := body.(Holder).Hold(h.times * int64(len(b))); err != nil {
			return nil, err
		}
	}
	if h.calls.Add(1) == 1 {
		h.read <- len(b)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return map[string]int{"bytes": len(b)}, nil
}

// TestProduceBodyBudget: produce bodies share one in-flight budget. While
// one body holds most of it, another (sized or chunked) waits
// ProduceMaxWait and is answered 429 THROTTLED with Retry-After, never
// reaching the Writer; once the first is done the budget is whole again.
func TestProduceBodyBudget(t *testing.T) {
	w := &holdingWriter{read: make(chan int, 4), release: make(chan struct{})}
	const capacity = 1000
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, MaxInFlightProduceBytes: capacity, ProduceMaxWait: 20 * time.Millisecond, Registerer: reg}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(w.release) }) }
	t.Cleanup(unhold) // before srv.Close, which waits for the held request
	g := gateInFlight{t: t, reg: reg}

	post := func(body io.Reader) (*http.Response, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	first := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, strings.NewReader(strings.Repeat("x", 800)))
		if err != nil {
			t.Error(err)
			close(first)
			return
		}
		resp.Body.Close()
		first <- resp
	}()
	if n := <-w.read; n != 800 {
		t.Fatalf("first body read %d bytes", n)
	}
	if got := g.InFlight(); got != 800 {
		t.Fatalf("budget in flight %d with an 800-byte body held, want 800", got)
	}
	tests := []struct {
		name string
		body func() io.Reader
	}{
		{"sized", func() io.Reader { return strings.NewReader(strings.Repeat("y", 500)) }},
		// No Content-Length: reserved as it is read.
		{"chunked", func() io.Reader { return io.MultiReader(strings.NewReader(strings.Repeat("z", 500))) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(tt.body())
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, fetchcache.CodeThrottled) || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("produce beside a held body: %d %s (Retry-After %q), want 429 THROTTLED with Retry-After", resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
		})
	}
	if got := g.InFlight(); got != 800 {
		t.Fatalf("budget in flight %d after the refused bodies, want 800", got)
	}
	unhold()
	if resp := <-first; resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("held produce: %v", resp)
	}
	if got := g.InFlight(); got != 0 {
		t.Fatalf("budget in flight %d after every produce answered, want 0", got)
	}
	if resp, body := post(strings.NewReader(strings.Repeat("y", 500))); resp.StatusCode != http.StatusOK {
		t.Fatalf("produce with the budget free: %d %s", resp.StatusCode, body)
	}
}

// TestSlowProduceBodyClosed: a produce body that stops arriving is answered
// 408 REQUEST_TIMED_OUT after BodyReadTimeout and its connection closed,
// instead of holding the connection and its budget for ever.
func TestSlowProduceBodyClosed(t *testing.T) {
	m := fetchcache.NewServeMetrics(nil)
	w := &holdingWriter{read: make(chan int, 1), release: make(chan struct{})}
	close(w.release)
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, Metrics: m, BodyReadTimeout: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n%s", strings.Repeat("x", 10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), fetchcache.CodeRequestTimedOut) {
		t.Fatalf("stalled body: %d %s, want 408 REQUEST_TIMED_OUT", resp.StatusCode, b)
	}
	var one [1]byte
	if _, err := c.Read(one[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after a stalled body: %v, want closed", err)
	}
	if got := testutil.ToFloat64(m.Closed(fetchcache.InterfaceHTTP, fetchcache.ClosedBodyTimeout)); got != 1 {
		t.Fatalf("body timeouts counted %v, want 1", got)
	}
}

// readAllWriter reads each produce body whole and answers its length.
type readAllWriter struct{ fakeWriter }

func (*readAllWriter) Produce(_ context.Context, _ string, _ int32, _ bool, body io.Reader) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	return map[string]int{"bytes": len(b)}, nil
}

// TestProduceBodiesBeyondBudget: a body larger than the whole budget is
// read alone, holding all of it, instead of being refused for ever; chunked
// bodies that together exceed the budget are read one after another instead
// of each holding a part and all waiting until they are refused.
func TestProduceBodiesBeyondBudget(t *testing.T) {
	const capacity = 1000
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: &readAllWriter{}, MaxInFlightProduceBytes: capacity,
		ProduceMaxWait: 10 * time.Second, Registerer: reg}))
	t.Cleanup(srv.Close)
	post := func(body io.Reader) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, body)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	chunked := func(n int) io.Reader { return io.MultiReader(strings.NewReader(strings.Repeat("c", n))) }
	for name, body := range map[string]io.Reader{"sized": strings.NewReader(strings.Repeat("s", 1500)), "chunked": chunked(1500)} {
		if code, out := post(body); code != http.StatusOK || !strings.Contains(out, `"bytes":1500`) {
			t.Fatalf("a lone %s 1500-byte body with a 1000-byte budget: %d %s, want 200 with 1500 bytes read", name, code, out)
		}
	}
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = post(chunked(640))
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("three chunked 640-byte bodies, 1000-byte budget: body %d answered %d (all %v), want all 200", i, c, codes)
		}
	}
	if got := (gateInFlight{t: t, reg: reg}).InFlight(); got != 0 {
		t.Fatalf("budget in flight %d after every produce answered, want 0", got)
	}
}
