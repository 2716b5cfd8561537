package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var payload = bytes.Repeat([]byte("0123456789"), 1000)

// upstream serves payload on GET and echoes the Host it saw.
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Host", r.Host)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload)
	}))
	t.Cleanup(s.Close)
	return s
}

func start(t *testing.T, o Options) *Proxy {
	t.Helper()
	p, err := New(upstream(t).URL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func TestPassThroughKeepsHost(t *testing.T) {
	p := start(t, Options{})
	resp, body, err := get(t, client(), p.URL()+"/b/k")
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, payload) {
		t.Fatalf("pass-through: %v %v %d bytes", err, resp, len(body))
	}
	if got, want := resp.Header.Get("X-Seen-Host"), strings.TrimPrefix(p.URL(), "http://"); got != want {
		t.Fatalf("upstream saw Host %q, want the proxy's %q (signed by S3 clients)", got, want)
	}
	if p.Requests() != 1 || p.InjectedTotal() != 0 {
		t.Fatalf("requests %d injected %d", p.Requests(), p.InjectedTotal())
	}
}

func TestEachKind(t *testing.T) {
	c := client()
	for _, tc := range []struct {
		kind  Kind
		check func(t *testing.T, resp *http.Response, body []byte, err error)
	}{
		{InternalError, func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err != nil || resp.StatusCode != 500 || !bytes.Contains(body, []byte("<Code>InternalError</Code>")) {
				t.Fatalf("got %v %v %s", err, resp, body)
			}
		}},
		{SlowDown, func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err != nil || resp.StatusCode != 503 || !bytes.Contains(body, []byte("<Code>SlowDown</Code>")) {
				t.Fatalf("got %v %v %s", err, resp, body)
			}
		}},
		{Reset, func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err == nil || !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
				t.Fatalf("reset: got %v %v", err, resp)
			}
		}},
		{Truncate, func(t *testing.T, resp *http.Response, body []byte, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) || resp.ContentLength != int64(len(payload)) || len(body) >= len(payload) || !bytes.Equal(body, payload[:len(body)]) {
				t.Fatalf("truncate: err %v, content-length %d, %d bytes", err, resp.ContentLength, len(body))
			}
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			p := start(t, Options{Rules: []*Rule{{Kind: tc.kind, Max: 1}}})
			resp, body, err := get(t, c, p.URL()+"/b/k")
			tc.check(t, resp, body, err)
			if p.Injected(tc.kind) != 1 {
				t.Fatalf("counted %v", p.Counts())
			}
			// Max reached: the next request passes.
			if resp, body, err := get(t, c, p.URL()+"/b/k"); err != nil || resp.StatusCode != 200 || !bytes.Equal(body, payload) {
				t.Fatalf("after the cap: %v %v", err, resp)
			}
		})
	}
}

func TestStallOutlastsClientTimeout(t *testing.T) {
	p := start(t, Options{Rules: []*Rule{{Kind: Stall, Stall: time.Hour, Max: 1}}})
	c := &http.Client{Timeout: 200 * time.Millisecond}
	defer c.CloseIdleConnections()
	begin := time.Now()
	_, _, err := get(t, c, p.URL()+"/b/k")
	if err == nil || time.Since(begin) > 5*time.Second {
		t.Fatalf("stall: %v after %v", err, time.Since(begin))
	}
	// A stall shorter than the client's patience forwards the request.
	p.SetRules(&Rule{Kind: Stall, Stall: 50 * time.Millisecond})
	c.Timeout = 5 * time.Second
	if resp, body, err := get(t, c, p.URL()+"/b/k"); err != nil || resp.StatusCode != 200 || !bytes.Equal(body, payload) {
		t.Fatalf("short stall: %v", err)
	}
	if p.Injected(Stall) != 2 {
		t.Fatalf("counts %v", p.Counts())
	}
}

func TestRulesMatchAndSeed(t *testing.T) {
	run := func() []int {
		p := start(t, Options{Seed: 42, Rules: []*Rule{
			{Match: And(Methods(http.MethodPut), PathContains("/never")), Kind: Reset},
			{Match: Methods(http.MethodGet), Kind: InternalError, Probability: 0.3},
		}})
		c := client()
		var codes []int
		for i := 0; i < 40; i++ {
			resp, _, err := get(t, c, p.URL()+"/b/k")
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.StatusCode)
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, p.URL()+"/b/k", strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if p.Injected(Reset) != 0 {
			t.Fatal("a rule fired for a request it does not match")
		}
		n := 0
		for _, c := range codes {
			if c == 500 {
				n++
			}
		}
		if int64(n) != p.Injected(InternalError) || n < 4 || n > 24 {
			t.Fatalf("%d 500s, counted %d, for p=0.3 of 40", n, p.Injected(InternalError))
		}
		return codes
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different faults: %v vs %v", a, b)
		}
	}
	p := start(t, Options{Rules: []*Rule{{Kind: InternalError}}})
	p.SetEnabled(false)
	if resp, _, err := get(t, client(), p.URL()+"/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("disabled proxy injected: %v %v", err, resp)
	}
}

func TestNewRefusesBadTarget(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "://"} {
		if p, err := New(u, Options{}); err == nil {
			p.Close()
			t.Errorf("New(%q) accepted", u)
		}
	}
}
