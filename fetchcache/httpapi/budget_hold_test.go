package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
