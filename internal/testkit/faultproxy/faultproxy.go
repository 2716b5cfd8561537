// Package faultproxy is an HTTP reverse proxy that sits in front of an
// S3-compatible store (MinIO in tests) and misbehaves on purpose: it answers
// some requests with S3 500 InternalError or 503 SlowDown XML errors, resets
// connections, stalls longer than clients wait, or cuts response bodies
// short while keeping their Content-Length. Which requests fail is decided
// by rules matched in order, each with a probability drawn from a seeded
// generator (same seed, same request order: same faults), and an optional
// cap. The proxy counts what it injected, so tests can tell that faults
// actually happened and compare with the client's metrics.
//
// The Host header is forwarded unchanged: S3 signatures (SigV4) cover it,
// so clients sign for the proxy's address and the store checks the same.
package faultproxy

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is a fault the proxy can inject.
type Kind int

// The faults. Stall delays a request by Rule.Stall (or until the client or
// the proxy gives up) and then forwards it; Truncate forwards the request
// and passes on only part of the response body (Rule.Keep of it) before
// closing the connection, with the original Content-Length kept.
const (
	InternalError Kind = iota // 500 <Code>InternalError</Code>
	SlowDown                  // 503 <Code>SlowDown</Code>
	Reset                     // TCP reset (hijack, SO_LINGER 0, close), no response
	Stall                     // delay before forwarding
	Truncate                  // response body cut short
	numKinds
)

var kindNames = [...]string{"internal_error", "slow_down", "reset", "stall", "truncate"}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Kinds lists every fault kind.
func Kinds() []Kind { return []Kind{InternalError, SlowDown, Reset, Stall, Truncate} }

// Rule selects requests and the fault to inject into them.
type Rule struct {
	// Match selects requests (nil: all). See Methods, PathContains, And.
	Match func(*http.Request) bool
	Kind  Kind
	// Probability that a matching request gets the fault (0 counts as 1).
	Probability float64
	// Max caps how many times this rule fires (0: no cap).
	Max int64
	// Stall is how long a Stall fault waits before forwarding (default 30s).
	Stall time.Duration
	// Keep is the fraction of the body a Truncate fault passes on, in
	// [0, 1) (default 0.5); the cut is at least one byte short.
	Keep float64

	fired atomic.Int64
}

// Methods matches requests with one of the HTTP methods.
func Methods(methods ...string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		return false
	}
}

// PathContains matches requests whose URL path contains s.
func PathContains(s string) func(*http.Request) bool {
	return func(r *http.Request) bool { return strings.Contains(r.URL.Path, s) }
}

// And matches requests every one of ms matches.
func And(ms ...func(*http.Request) bool) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

// Options configure New.
type Options struct {
	// Seed seeds the fault draws.
	Seed uint64
	// Rules, matched in order; the first that matches and wins its draw
	// decides the request's fault.
	Rules []*Rule
}

// Proxy is a running fault proxy.
type Proxy struct {
	target *url.URL
	ln     net.Listener
	srv    *http.Server
	rp     *httputil.ReverseProxy
	done   chan struct{} // closed by Close: ends stalls
	served chan struct{}

	mu      sync.Mutex
	rng     *rand.Rand
	rules   []*Rule
	enabled bool

	requests atomic.Int64
	injected [numKinds]atomic.Int64
}

type ctxKey struct{}

// New starts a proxy to target (an http:// base URL) on a loopback port.
func New(target string, o Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("fault proxy: target %q is not an http://host:port URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen: %w", err)
	}
	p := &Proxy{target: u, ln: ln, done: make(chan struct{}), served: make(chan struct{}),
		rng: rand.New(rand.NewPCG(o.Seed, 0x5eed)), rules: o.Rules, enabled: true}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = u.Scheme
			pr.Out.URL.Host = u.Host
			pr.Out.Host = pr.In.Host // signed by the client: keep it
		},
		Transport:      tr,
		ModifyResponse: p.modifyResponse,
		// Flush every write, so a truncated response reaches the client
		// (headers and the bytes kept) before the connection is aborted.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			writeS3Error(w, http.StatusBadGateway, "BadGateway", "fault proxy: upstream: "+err.Error())
		},
	}
	p.srv = &http.Server{Handler: p, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// URL is the proxy's base URL, to use as the S3 endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetRules replaces the rules.
func (p *Proxy) SetRules(rules ...*Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = rules
}

// SetEnabled turns fault injection on or off (requests are then forwarded
// untouched).
func (p *Proxy) SetEnabled(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enabled = on
}

// Requests reports how many requests reached the proxy.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Injected reports how many faults of kind k were injected.
func (p *Proxy) Injected(k Kind) int64 { return p.injected[k].Load() }

// InjectedTotal reports how many faults were injected in all.
func (p *Proxy) InjectedTotal() int64 {
	var n int64
	for i := range p.injected {
		n += p.injected[i].Load()
	}
	return n
}

// Counts returns the injected faults by kind name.
func (p *Proxy) Counts() map[string]int64 {
	out := map[string]int64{}
	for _, k := range Kinds() {
		out[k.String()] = p.Injected(k)
	}
	return out
}

// Close stops the proxy: stalls end, connections close.
func (p *Proxy) Close() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	close(p.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, p.srv.Close())
	}
	<-p.served
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	return err
}

// pick decides the fault for r, if any.
func (p *Proxy) pick(r *http.Request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.enabled {
		return nil
	}
	for _, rule := range p.rules {
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		if rule.Max > 0 && rule.fired.Load() >= rule.Max {
			continue
		}
		prob := rule.Probability
		if prob <= 0 {
			prob = 1
		}
		if p.rng.Float64() >= prob {
			continue
		}
		rule.fired.Add(1)
		return rule
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	rule := p.pick(r)
	if rule == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.injected[rule.Kind].Add(1)
	switch rule.Kind {
	case InternalError:
		drain(r)
		writeS3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case SlowDown:
		drain(r)
		w.Header().Set("Retry-After", "1")
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case Reset:
		reset(w)
	case Stall:
		d := rule.Stall
		if d <= 0 {
			d = 30 * time.Second
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			p.rp.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-p.done:
		}
	case Truncate:
		keep := rule.Keep
		if keep <= 0 || keep >= 1 {
			keep = 0.5
		}
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, keep)))
	}
}

// modifyResponse cuts the body of a response to a Truncate request: the
// reverse proxy copies what the body yields, then, on its error, aborts the
// connection, so the client sees fewer bytes than Content-Length.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	keep, ok := resp.Request.Context().Value(ctxKey{}).(float64)
	if !ok {
		return nil
	}
	if resp.ContentLength <= 0 {
		// Length unknown (chunked) or empty: abort before any byte, which
		// the client sees as a connection closed before the response.
		resp.Body = &cutBody{rc: resp.Body, left: 0}
		return nil
	}
	n := min(int64(float64(resp.ContentLength)*keep), resp.ContentLength-1)
	resp.Body = &cutBody{rc: resp.Body, left: n}
	return nil
}

// errCut ends a truncated body.
var errCut = errors.New("fault proxy: body truncated")

type cutBody struct {
	rc   io.ReadCloser
	left int64
}

func (c *cutBody) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.rc.Read(b)
	c.left -= int64(n)
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

// drain reads a little of the request body so small uploads are not reset
// by the server closing a connection with unread data; large ones are
// left (the server then closes the connection, as S3 may).
func drain(r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 256<<10))
}

// reset closes the client connection with a TCP RST.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// writeS3Error writes an S3 XML error document.
func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	var m strings.Builder
	_ = xml.EscapeText(&m, []byte(msg))
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId><HostId>faultproxy</HostId></Error>`, code, m.String())
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
