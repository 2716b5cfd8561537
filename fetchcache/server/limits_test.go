package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestHTTPListenerLimits: the HTTP listener closes connections whose
// headers do not arrive in time, keep-alive connections idle too long, and
// connections past MaxConnections at once (counted), so slow or numerous
// clients cannot hold it.
func TestHTTPListenerLimits(t *testing.T) {
	e := fetchkit.NewEnv(t)
	start := func(t *testing.T, lim HTTPLimits) (string, *fetchcache.ServeMetrics) {
		t.Helper()
		reg := prometheus.NewRegistry()
		s, err := Listen(ServerOptions{Catalog: e.Cat, HTTPAddr: "127.0.0.1:0", Registerer: reg, Logger: fetchkit.DiscardLogger(), HTTPLimits: lim})
		if err != nil {
			t.Fatal(err)
		}
		fetchkit.Serve(t, s.Serve)
		return s.HTTPAddr().String(), fetchcache.NewServeMetrics(reg) // the server's own series
	}
	dial := func(t *testing.T, addr string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(t *testing.T, c net.Conn) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		resp.Body.Close()
	}
	short := 50 * time.Millisecond

	t.Run("half_sent_headers", func(t *testing.T) {
		addr, _ := start(t, HTTPLimits{ReadHeaderTimeout: short, IdleTimeout: time.Hour})
		c := dial(t, addr)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost:")
		fetchkit.ClosedWithin(t, c, 5*time.Second)
	})
	t.Run("idle_keep_alive", func(t *testing.T) {
		addr, _ := start(t, HTTPLimits{ReadHeaderTimeout: time.Hour, IdleTimeout: short})
		c := dial(t, addr)
		get(t, c)
		fetchkit.ClosedWithin(t, c, 5*time.Second)
	})
	capped := func(t *testing.T, lim HTTPLimits, reason string) {
		addr, m := start(t, lim)
		held := []net.Conn{dial(t, addr), dial(t, addr), dial(t, addr)}
		for _, c := range held {
			get(t, c) // accepted and served; kept alive
		}
		fetchkit.ClosedWithin(t, dial(t, addr), 5*time.Second)
		if got := fetchkit.CounterValue(t, m.Refused(fetchcache.InterfaceHTTP, reason)); got != 1 {
			t.Fatalf("refused connections counted %v, want 1", got)
		}
		// A closed connection gives its place back.
		held[0].Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c := dial(t, addr)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no connection served after one of the capped ones closed")
			}
		}
	}
	tests := []struct {
		name   string
		lim    HTTPLimits
		reason string
	}{
		{"max_connections", HTTPLimits{MaxConnections: 3, MaxConnectionsPerIP: 10}, fetchcache.RefusedMaxConnections},
		{"max_connections_per_ip", HTTPLimits{MaxConnections: 10, MaxConnectionsPerIP: 3}, fetchcache.RefusedMaxConnectionsPerIP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { capped(t, tt.lim, tt.reason) })
	}
}

// TestHTTPSlowReaderCutOff: a client that stops reading a large records
// response is cut off once a write has waited WriteTimeout, instead of
// holding the response (and its bytes) for ever.
func TestHTTPSlowReaderCutOff(t *testing.T) {
	addr, m := startBig(t, httpapi.HTTPOptions{WriteTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/topics/big/partitions/0/records?offset=0&max_bytes=%d HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", 64<<20, httpapi.MediaRaw)
	// The client never reads; the request ends (and is counted) once the
	// server gives up writing.
	waitCounted(t, m, 1, "the response to a client that stopped reading is still being written 5s later")
}

// startBig serves a topic "big" of 16 MB (more than loopback's socket
// buffers) over HTTP with o, and returns its address and metrics.
func startBig(t *testing.T, o httpapi.HTTPOptions) (string, *fetchcache.ServeMetrics) {
	t.Helper()
	e := fetchkit.NewEnv(t)
	e.Topic("big", 1, map[string]string{"internal.segment.bytes": "67108864"})
	recs := make([]fetchkit.Rec, 1600)
	for i := range recs {
		recs[i] = fetchkit.Rec{Timestamp: fetchkit.Ts0 + int64(i), Value: make([]byte, 10_000)}
	}
	e.Produce(e.Log("big", 0), fetchkit.ProduceOpts{Per: 10}, recs)
	reg := prometheus.NewRegistry()
	s, err := Listen(ServerOptions{Catalog: e.Cat, HTTPAddr: "127.0.0.1:0", Registerer: reg, Logger: fetchkit.DiscardLogger(), HTTP: o})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Serve)
	return s.HTTPAddr().String(), fetchcache.NewServeMetrics(reg)
}

// waitCounted waits up to 5 s for n HTTP requests answered 200 (counted
// once they end), else fails with msg.
func waitCounted(t *testing.T, m *fetchcache.ServeMetrics, n float64, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, fetchcache.CodeOK)) < n {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTPUnreadBodyTimesOut: a request whose declared body never comes is
// cut off by BodyReadTimeout even on a route that does not read its body
// (net/http discards it before the response is flushed, or in the first
// write of a large one), instead of holding the connection, and a records
// read's bytes, for ever.
func TestHTTPUnreadBodyTimesOut(t *testing.T) {
	addr, m := startBig(t, httpapi.HTTPOptions{BodyReadTimeout: 100 * time.Millisecond, WriteTimeout: time.Hour})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("topics", func(t *testing.T) {
		c := dial()
		fmt.Fprint(c, "GET /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
		fetchkit.ClosedWithin(t, c, 5*time.Second)
	})
	t.Run("records", func(t *testing.T) {
		c := dial()
		before := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, fetchcache.CodeOK))
		go func() { _, _ = io.Copy(io.Discard, c) }() // reads whatever it is sent
		fmt.Fprintf(c, "GET /v1/topics/big/partitions/0/records?offset=0&max_bytes=%d HTTP/1.1\r\nHost: x\r\nAccept: %s\r\nContent-Length: 1\r\n\r\n", 64<<20, httpapi.MediaRaw)
		waitCounted(t, m, before+1, "a records read whose 1-byte body never came is still in its handler 5s later")
	})
}
