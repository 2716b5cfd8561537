package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
)

// TestProduceBudgetCountsHeldRecords: what a Writer holds for a body's
// records beyond the body (small records encode to more than their JSON)
// takes from the produce budget: a body whose records are held at three
// times its size leaves room for less, and a second body that would fit
// beside the first's bytes alone is throttled; one whose own records do
// not fit is throttled by its Hold. The budget is whole again after.
func TestProduceBudgetCountsHeldRecords(t *testing.T) {
	w := &holdingWriter{times: 3, read: make(chan int, 1), release: make(chan struct{})}
	const capacity = 4 << 20
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, MaxInFlightProduceBytes: capacity, ProduceMaxWait: 20 * time.Millisecond, Registerer: reg}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(w.release) }) }
	t.Cleanup(unhold)
	g := gateInFlight{t: t, reg: reg}
	post := func(n int) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, strings.NewReader(strings.Repeat("x", 1<<20)))
		if err != nil {
			t.Error(err)
			close(first)
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-w.read
	if got := g.InFlight(); got != 3<<20 {
		t.Fatalf("budget in flight %d with a 1 MiB body whose records are held at 3 MiB, want 3 MiB", got)
	}
	// 1.5 MiB fits beside the first body's 1 MiB, not beside its 3 MiB of records.
	if code, body := post(3 << 19); code != http.StatusTooManyRequests || !strings.Contains(body, fetchcache.CodeThrottled) {
		t.Fatalf("a 1.5 MiB body beside 3 MiB of held records: %d %s, want 429 THROTTLED", code, body)
	}
	// 512 KiB fits; its own records (1.5 MiB) do not.
	if code, body := post(1 << 19); code != http.StatusTooManyRequests || !strings.Contains(body, fetchcache.CodeThrottled) {
		t.Fatalf("a 512 KiB body whose records need 1.5 MiB beside 3 MiB held: %d %s, want 429 THROTTLED", code, body)
	}
	if got := g.InFlight(); got != 3<<20 {
		t.Fatalf("budget in flight %d after the refused bodies, want 3 MiB", got)
	}
	unhold()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("held produce: %d", code)
	}
	if code, body := post(1 << 20); code != http.StatusOK {
		t.Fatalf("a 1 MiB body with the budget free: %d %s", code, body)
	}
	if got := g.InFlight(); got != 0 {
		t.Fatalf("budget in flight %d after every produce answered, want 0", got)
	}
}

// growingWriter reads a body whole, tells read, waits for grow, then
// holds times its size for its records (a producer finding its batches
// larger than the body once the body is in).
type growingWriter struct {
	fakeWriter
	times float64
	calls atomic.Int64
	read  chan struct{}
	grow  chan struct{}
}

func (g *growingWriter) Produce(ctx context.Context, _ string, _ int32, _ bool, body io.Reader) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if g.calls.Add(1) == 1 {
		g.read <- struct{}{}
		select {
		case <-g.grow:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := body.(Holder).Hold(int64(g.times * float64(len(b)))); err != nil {
		return nil, err
	}
	return map[string]int{"bytes": len(b)}, nil
}

// growMaxWait is ProduceMaxWait of growServer's handler.
const growMaxWait = 5 * time.Second

// growServer serves the HTTP API with a growingWriter holding 1.5 times
// each body and a produce budget of 4 MiB; grow lets the first body's
// Hold go (also at the test's end).
func growServer(t *testing.T) (*growingWriter, *httptest.Server, func(), gateInFlight) {
	w := &growingWriter{times: 1.5, read: make(chan struct{}, 1), grow: make(chan struct{})}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Writer: w, MaxInFlightProduceBytes: 4 << 20, ProduceMaxWait: growMaxWait, Registerer: reg}))
	t.Cleanup(srv.Close)
	var growOnce sync.Once
	grow := func() { growOnce.Do(func() { close(w.grow) }) }
	t.Cleanup(grow)
	return w, srv, grow, gateInFlight{t: t, reg: reg}
}

// TestProduceHoldGoesBeforeNewBodies: a body already read whose records
// need more of the produce budget gets it ahead of a new body waiting for
// its reserve. Before, its Hold queued behind the new body, which waited
// for the first body to finish: the first was refused 429 after
// ProduceMaxWait with its body read, and only then the second went in.
func TestProduceHoldGoesBeforeNewBodies(t *testing.T) {
	w, srv, grow, g := growServer(t)
	type answer struct {
		code int
		body string
		took time.Duration
	}
	post := func(n int, to chan<- answer) {
		start := time.Now()
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Error(err)
			to <- answer{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		to <- answer{resp.StatusCode, string(b), time.Since(start)}
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go post(2<<20, first) // reserves 2 MiB; its records need 3
	<-w.read
	go post(3<<20, second) // 3 MiB does not fit beside 2: waits
	for deadline := time.Now().Add(10 * time.Second); g.Waits() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second body never waited for the budget")
		}
	}
	grow()
	a := <-first
	if a.code != http.StatusOK || a.took >= growMaxWait {
		t.Fatalf("the first body, read and needing 1 MiB more with 2 MiB free: %d after %v %s, want 200 at once", a.code, a.took, a.body)
	}
	if b := <-second; b.code != http.StatusOK {
		t.Fatalf("the second body after the first: %d %s", b.code, b.body)
	}
	if got := g.InFlight(); got != 0 {
		t.Fatalf("budget in flight %d after both answered, want 0", got)
	}
}

// TestProduceHoldsStuckRefusedAtOnce: two bodies read whose records each
// need more of the budget than the other leaves can only wait for each
// other: the one that asked last is refused at once (429, nothing
// written) and the other goes on with what it returns, instead of both
// waiting out ProduceMaxWait and the first to have asked being refused.
func TestProduceHoldsStuckRefusedAtOnce(t *testing.T) {
	w, srv, grow, g := growServer(t)
	answers := make(chan int, 2)
	post := func() {
		resp, err := http.Post(srv.URL+"/v1/topics/t/records", MediaNDJSON, strings.NewReader(strings.Repeat("x", 2<<20)))
		if err != nil {
			t.Error(err)
			answers <- 0
			return
		}
		resp.Body.Close()
		answers <- resp.StatusCode
	}
	start := time.Now()
	go post() // read, then waits for grow before its Hold
	<-w.read
	go post() // the budget's other half; its Hold of 1 MiB more waits
	for deadline := time.Now().Add(10 * time.Second); g.Waits() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second body's Hold never waited")
		}
	}
	grow() // the first's Hold: the whole budget now waits to grow
	got := []int{<-answers, <-answers}
	slices.Sort(got)
	if took := time.Since(start); !slices.Equal(got, []int{http.StatusOK, http.StatusTooManyRequests}) || took >= growMaxWait {
		t.Fatalf("two bodies each waiting for the other's budget: %v after %v, want one 200 and one 429 at once", got, took)
	}
	if got := g.InFlight(); got != 0 {
		t.Fatalf("budget in flight %d after both answered, want 0", got)
	}
}
