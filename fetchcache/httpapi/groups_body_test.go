package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/fetchcache"
)

// TestSlowResetBodyClosed: a reset-offsets body that stops arriving is
// answered as every other body slower than BodyReadTimeout, 408
// REQUEST_TIMED_OUT with the connection closed and counted, not 400
// INVALID_REQUEST as if the client had sent a bad body.
func TestSlowResetBodyClosed(t *testing.T) {
	m := fetchcache.NewServeMetrics(nil)
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: emptyCatalog{}, Groups: &Groups{}, Metrics: m, BodyReadTimeout: 50 * time.Millisecond}))
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "POST /v1/groups/g/reset-offsets HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"topic\":")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), fetchcache.CodeRequestTimedOut) {
		t.Fatalf("stalled reset body: %d %s, want 408 REQUEST_TIMED_OUT", resp.StatusCode, b)
	}
	var one [1]byte
	if _, err := c.Read(one[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after a stalled body: %v, want closed", err)
	}
	if got := testutil.ToFloat64(m.Closed(fetchcache.InterfaceHTTP, fetchcache.ClosedBodyTimeout)); got != 1 {
		t.Fatalf("body timeouts counted %v, want 1", got)
	}
}
