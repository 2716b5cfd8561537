// Package kafkasrv owns the fetch service's Kafka protocol listener: the
// listener, its connections and request framing (kafka.go); SASL/PLAIN and
// topic authorization (auth_kafka.go); the registry of served APIs and the
// dispatch every request goes through — unsupported versions, unknown
// keys, what may come before authentication, throttling (apis.go); and one
// file per API key with its served version range beside its handler
// (apiversions.go, metadata.go, listoffsets.go, fetch.go, produce.go;
// SASL's in auth_kafka.go; the consumer-group APIs' — findcoordinator.go,
// joingroup.go, … — answered by fetchcache/groups, their common checks in
// groups.go).
package kafkasrv

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/x/workers"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of KafkaOptions.
const (
	// DefaultKafkaMaxRequestBytes caps one request frame (Kafka's
	// socket.request.max.bytes, which is 100 MiB there). The service only
	// reads, so requests are small; and kmsg may allocate decoded structs
	// worth a few dozen times the frame size, so the cap is what bounds the
	// memory a hostile frame can cost.
	DefaultKafkaMaxRequestBytes = 1 << 20
	// DefaultKafkaFetchMaxBytes caps one Fetch response (Kafka's
	// fetch.max.bytes default, 55 MiB).
	DefaultKafkaFetchMaxBytes = 55 << 20
	// DefaultKafkaMaxFetchWait bounds how long a Fetch at the log end waits
	// for new data, whatever max_wait_ms asks.
	DefaultKafkaMaxFetchWait = 5 * time.Second
	// DefaultKafkaFetchPoll is how often a waiting Fetch rechecks offsets.
	DefaultKafkaFetchPoll = 50 * time.Millisecond
	// DefaultKafkaMaxConnections bounds open client connections; more are
	// closed on accept.
	DefaultKafkaMaxConnections = 4096
	// DefaultKafkaMaxConnectionsPerIP bounds the open connections of one
	// client address (Kafka's max.connections.per.ip, unbounded there): a
	// quarter of DefaultKafkaMaxConnections, so one host cannot lock the
	// others out.
	DefaultKafkaMaxConnectionsPerIP = 1024
	// DefaultKafkaIdleTimeout closes a connection on which no request
	// begins for this long (Kafka's connections.max.idle.ms, 10 minutes).
	DefaultKafkaIdleTimeout = 10 * time.Minute
	// DefaultKafkaRequestReadTimeout bounds the arrival of one request
	// frame, from its first byte to its last, so a half-sent frame cannot
	// hold its buffer indefinitely.
	DefaultKafkaRequestReadTimeout = 30 * time.Second
	// DefaultKafkaSASLTimeout bounds the time from accepting a connection
	// (after TLS) to finishing SASL authentication when SASL is required.
	DefaultKafkaSASLTimeout = 30 * time.Second
	// DefaultKafkaMaxInFlightResponseBytes is the budget, across all
	// connections, for the record batches of Fetch responses being built
	// or written.
	DefaultKafkaMaxInFlightResponseBytes = 256 << 20
	// DefaultKafkaMaxFetchPartitions bounds the distinct partitions one
	// Fetch may name; a larger one is refused whole.
	DefaultKafkaMaxFetchPartitions = 10000
	// DefaultKafkaFetchFillConcurrency bounds the partitions of one Fetch
	// read at once: the chunk cache's default concurrent GETs
	// (chunkcache.DefaultMaxConcurrentGets), so one Fetch can keep them all
	// busy.
	DefaultKafkaFetchFillConcurrency = 16
	// DefaultKafkaWriteTimeout bounds each write of a response (the
	// deadline moves with the writes, writeStep bytes at a time): a client
	// that stops reading is disconnected.
	DefaultKafkaWriteTimeout = 30 * time.Second
	// DefaultKafkaShutdownTimeout bounds the wait for in-flight requests
	// when Serve's context ends; connections still busy then are closed.
	DefaultKafkaShutdownTimeout = 10 * time.Second
	// DefaultKafkaHandshakeTimeout bounds a connection's TLS handshake.
	DefaultKafkaHandshakeTimeout = 10 * time.Second
	// DefaultKafkaClusterID is the cluster id Metadata reports.
	DefaultKafkaClusterID = "tiered"
)

// ResponseBudgetGate is the {gate} label of the Kafka listener's response
// budget (KafkaOptions.MaxInFlightResponseBytes).
const ResponseBudgetGate = "kafka_response_bytes"

// Broker is a broker Metadata names: its node id and advertised address.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
}

// KafkaOptions configures NewKafkaServer. Zero fields take the defaults.
type KafkaOptions struct {
	Catalog fetchcache.Catalog // required
	// Metrics receives the request series (interface "kafka"); nil makes
	// an unregistered set.
	Metrics *fetchcache.ServeMetrics
	Logger  *slog.Logger
	// AdvertisedAddr is the host:port Metadata names as the only broker
	// (--advertised-addr). Empty means the address each connection
	// reached, so clients connect back the way they came in.
	AdvertisedAddr string
	NodeID         int32
	ClusterID      string
	// Peers lists the other brokers Metadata names beside this one: a fetch fleet's live
	// replicas, so that a client which only connects to brokers Metadata listed (kafkajs)
	// can reach the group coordinator FindCoordinator names. Nil: none.
	Peers func() []Broker

	MaxRequestBytes   int
	FetchMaxBytes     int
	MaxFetchWait      time.Duration
	FetchPollInterval time.Duration
	MaxConnections    int
	// MaxConnectionsPerIP bounds the connections of one client IP; more
	// are closed on accept.
	MaxConnectionsPerIP int
	// MaxInFlightResponseBytes is the one budget, across all
	// connections, for the record batches of Fetch responses from their
	// read until their response is written. A Fetch that cannot get any of
	// it within its max wait is throttled; one that got some answers what
	// it has.
	MaxInFlightResponseBytes int64
	// MaxFetchPartitions bounds the distinct partitions of one Fetch
	// (repeats collapse, as in Kafka); a larger one is refused with
	// INVALID_REQUEST and the connection closed.
	MaxFetchPartitions int
	// FetchFillConcurrency bounds how many partitions of one Fetch are
	// read at once (their offsets, then their data): the remote partitions
	// a Fetch names are filled in parallel, so a cold replay of many
	// partitions keeps the store busy.
	FetchFillConcurrency int
	// Registerer receives the response budget's tiered_fetch_gate_* series
	// ({gate="kafka_response_bytes"}); nil keeps them unregistered.
	Registerer prometheus.Registerer

	// IdleTimeout closes a connection on which no request begins for this
	// long; RequestReadTimeout one whose started request does not arrive
	// whole in time; SASLTimeout one that has not authenticated this long
	// after it was accepted (when SASL is required).
	IdleTimeout        time.Duration
	RequestReadTimeout time.Duration
	SASLTimeout        time.Duration
	WriteTimeout       time.Duration
	ShutdownTimeout    time.Duration
	HandshakeTimeout   time.Duration

	// TLS, when set, serves the listener over TLS (auth.NewServerTLSConfig);
	// with RequireAndVerifyClientCert the certificate's common name is the
	// connection's principal.
	TLS *tls.Config
	// Groups is the consumer-group coordinator (fetchcache/groups) the
	// group APIs are answered by; nil answers them COORDINATOR_NOT_AVAILABLE.
	Groups *groups.Coordinator

	// Auth requires SASL/PLAIN when it has users (SaslHandshake v0-1 and
	// SaslAuthenticate v0-2 are then advertised, and a connection may send
	// only ApiVersions and SASL requests until it authenticates) and
	// filters topics by principal; nil serves everyone everything.
	Auth *auth.Authorizer
}

// KafkaServer answers the Kafka protocol subset consumers need to read
// assigned partitions (ApiVersions, Metadata, ListOffsets, Fetch) and
// refuses Produce per partition. Like a Kafka 4 broker it closes the
// connection on any other API and on a version outside the served range
// (whose floors are Kafka 4.0's, KIP-896); ApiVersions alone answers an
// unknown version, the KIP-511 way. It is the only broker and the leader of every
// partition of its catalog. Requests on one connection are answered in
// order, one at a time, as a Kafka broker does.
type KafkaServer struct {
	o       KafkaOptions
	m       *fetchcache.ServeMetrics
	log     *slog.Logger
	apiKeys []kmsg.ApiVersionsResponseApiKey // KafkaAPIVersions, plus SASL when configured
	// apiKeysByName is apiKeys with Fetch capped below v13, advertised while
	// no topic has an ID (apiversions.go).
	apiKeysByName []kmsg.ApiVersionsResponseApiKey
	// respBudget admits the bytes of Fetch responses in flight
	// (MaxInFlightResponseBytes), shared by all connections.
	respBudget *gate.Gate
	advert     struct {
		host string
		port int32
		set  bool
	}
}

// NewKafkaServer validates o and returns a server; Serve runs it.
func NewKafkaServer(o KafkaOptions) (*KafkaServer, error) {
	if o.Catalog == nil {
		return nil, errors.New("kafka server: no catalog")
	}
	s := &KafkaServer{o: o, m: o.Metrics, log: o.Logger, apiKeys: KafkaAPIVersions}
	s.o.Catalog = fetchcache.ValidatingCatalog{Catalog: o.Catalog}
	if o.Auth.SASLRequired() {
		s.apiKeys = append(slices.Clone(KafkaAPIVersions), saslAPIVersions...)
	}
	s.apiKeysByName = byNameKeys(s.apiKeys)
	if s.m == nil {
		s.m = fetchcache.NewServeMetrics(nil)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&s.o.MaxRequestBytes, DefaultKafkaMaxRequestBytes)
	def(&s.o.FetchMaxBytes, DefaultKafkaFetchMaxBytes)
	def(&s.o.MaxConnections, DefaultKafkaMaxConnections)
	def(&s.o.MaxConnectionsPerIP, DefaultKafkaMaxConnectionsPerIP)
	def(&s.o.MaxFetchPartitions, DefaultKafkaMaxFetchPartitions)
	def(&s.o.FetchFillConcurrency, DefaultKafkaFetchFillConcurrency)
	if s.o.MaxInFlightResponseBytes <= 0 {
		s.o.MaxInFlightResponseBytes = DefaultKafkaMaxInFlightResponseBytes
	}
	defDur(&s.o.IdleTimeout, DefaultKafkaIdleTimeout)
	defDur(&s.o.RequestReadTimeout, DefaultKafkaRequestReadTimeout)
	defDur(&s.o.SASLTimeout, DefaultKafkaSASLTimeout)
	defDur(&s.o.MaxFetchWait, DefaultKafkaMaxFetchWait)
	defDur(&s.o.FetchPollInterval, DefaultKafkaFetchPoll)
	defDur(&s.o.WriteTimeout, DefaultKafkaWriteTimeout)
	defDur(&s.o.ShutdownTimeout, DefaultKafkaShutdownTimeout)
	defDur(&s.o.HandshakeTimeout, DefaultKafkaHandshakeTimeout)
	s.respBudget = gate.New(gate.Options{
		Name: ResponseBudgetGate, Capacity: s.o.MaxInFlightResponseBytes,
		MaxWait: s.o.MaxFetchWait, RetryAfter: responseBudgetRetry, Registerer: s.o.Registerer,
	})
	if s.o.ClusterID == "" {
		s.o.ClusterID = DefaultKafkaClusterID
	}
	if s.o.NodeID < 0 {
		return nil, fmt.Errorf("kafka server: node id %d is negative", s.o.NodeID)
	}
	if o.AdvertisedAddr != "" {
		host, port, err := splitHostPort(o.AdvertisedAddr)
		if err != nil {
			return nil, fmt.Errorf("kafka server: advertised address: %w", err)
		}
		s.advert.host, s.advert.port, s.advert.set = host, port, true
	}
	return s, nil
}

func splitHostPort(addr string) (string, int32, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("%q: port %q is not in 1-65535", addr, ps)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: no host", addr)
	}
	return host, int32(port), nil
}

// Serve accepts connections on ln until ctx ends, then shuts down
// gracefully: it stops accepting, lets every in-flight request finish (a
// Fetch waiting for data answers at once), closes the connections, and
// returns once they are gone or ShutdownTimeout passed (then the remaining
// connections are closed hard). It closes ln. The error is nil after a
// shutdown through ctx. With KafkaOptions.TLS, ln is a plain TCP listener
// that Serve wraps.
func (s *KafkaServer) Serve(ctx context.Context, ln net.Listener) error {
	if s.o.TLS != nil {
		ln = tls.NewListener(ln, s.o.TLS)
	}
	stopping := make(chan struct{})
	// Fetches fill their partitions on workers shared by the connections
	// (fanOut), closed once every connection has ended and reqCtx is
	// cancelled (a Fetch's background reloads use it and may outlive it).
	pool := workers.New(fillWorkerIdle, fillMaxIdleWorkers*s.o.FetchFillConcurrency)
	defer pool.Close()
	// reqCtx ends only when the graceful part of a shutdown is over, so
	// in-flight reads finish but cannot hold Serve past ShutdownTimeout.
	reqCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	var (
		mu    sync.Mutex
		conns = map[*kafkaConn]struct{}{}
		perIP = map[string]int{} // open connections by client IP
		wg    sync.WaitGroup
	)
	acceptDone := make(chan error, 1)
	go func() {
		var backoff time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				select {
				case <-stopping:
					acceptDone <- nil
					return
				default:
				}
				if errors.Is(err, net.ErrClosed) {
					acceptDone <- fmt.Errorf("kafka listener accept: %w", err)
					return
				}
				// Out of descriptors (EMFILE, ENFILE), a connection reset
				// before it was accepted, a timeout: the listener still
				// works, so wait and accept again, as net/http does. A
				// client that could make Accept fail must not stop the
				// service.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("kafka listener accept failed; retrying", "err", err, "retry_in", backoff)
				select {
				case <-stopping:
					acceptDone <- nil
					return
				case <-time.After(backoff):
				}
				continue
			}
			backoff = 0
			kc := &kafkaConn{s: s, c: c, ctx: reqCtx, stopping: stopping, workers: pool}
			ip := remoteIP(c)
			mu.Lock()
			refused := ""
			switch {
			case len(conns) >= s.o.MaxConnections:
				refused = fetchcache.RefusedMaxConnections
			case perIP[ip] >= s.o.MaxConnectionsPerIP:
				refused = fetchcache.RefusedMaxConnectionsPerIP
			default:
				conns[kc] = struct{}{}
				perIP[ip]++
				wg.Add(1)
			}
			mu.Unlock()
			if refused != "" {
				// Closed at once, before any read: a refused client costs
				// a file descriptor for no longer than this.
				s.m.Refused(fetchcache.InterfaceKafka, refused).Inc()
				_ = c.Close()
				s.log.Debug("kafka connection refused: too many connections", "remote", c.RemoteAddr().String(), "cap", refused,
					"max_connections", s.o.MaxConnections, "max_connections_per_ip", s.o.MaxConnectionsPerIP)
				continue
			}
			go func() {
				defer wg.Done()
				kc.serve()
				mu.Lock()
				delete(conns, kc)
				if perIP[ip]--; perIP[ip] <= 0 {
					delete(perIP, ip)
				}
				mu.Unlock()
			}()
		}
	}()

	var err error
	select {
	case <-ctx.Done():
	case err = <-acceptDone:
	}
	close(stopping)
	_ = ln.Close()
	if err == nil {
		err = <-acceptDone
	}
	// Wake connections blocked reading a request; one in a request
	// finishes it, writes the response and then stops.
	mu.Lock()
	for kc := range conns {
		kc.wakeRead()
	}
	mu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.o.ShutdownTimeout):
		hardStop()
		mu.Lock()
		for kc := range conns {
			_ = kc.c.Close()
		}
		mu.Unlock()
		<-done
	}
	return err
}

// kafkaConn is one client connection.
type kafkaConn struct {
	s        *KafkaServer
	c        net.Conn
	ctx      context.Context // request context: ends at a hard stop
	stopping <-chan struct{} // closed when a graceful shutdown begins
	mu       sync.Mutex
	busy     bool // handling a request; do not interrupt its read deadline
	// waiting is what the read deadline set last bounds (a Closed* reason
	// of fetchcache), for the metric when it passes.
	waiting string
	// authBy is when SASL authentication must be done (zero: not required).
	authBy time.Time

	// Authentication state, used by the connection's goroutine only.
	principal  auth.Principal // anonymous until a certificate or SASL says otherwise
	clientID   string         // of the last request header that had one
	sasl       saslState
	closeAfter bool // close once the current response is written
	// afterWrite runs once the current response is written or its write
	// failed: it returns the response budget a Fetch's batches hold.
	afterWrite func()
	// workers fill a Fetch's partitions (fanOut): the listener's, which
	// keep the stacks they grew (internal/x/workers). Nil: a goroutine each.
	workers *workers.Pool
}

// Fill workers wait this long for more work, and at most
// fillMaxIdleWorkers × FetchFillConcurrency of them wait at once: a burst
// of Fetches over many connections does not leave its stacks behind.
const (
	fillWorkerIdle     = 10 * time.Second
	fillMaxIdleWorkers = 4
)

// pool is the connection's workers (nil for a request handled without a
// connection, as tests do: a goroutine each).
func (kc *kafkaConn) pool() *workers.Pool {
	if kc == nil {
		return nil
	}
	return kc.workers
}

func (kc *kafkaConn) wakeRead() {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if !kc.busy {
		_ = kc.c.SetReadDeadline(time.Now())
	}
}

func (kc *kafkaConn) setBusy(b bool) bool {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.busy = b
	select {
	case <-kc.stopping:
		return false
	default:
		return true
	}
}

// awaitRequest marks the connection idle and bounds the wait for the next
// request's first byte by IdleTimeout (and the SASL deadline). It reports
// false when the server is stopping.
func (kc *kafkaConn) awaitRequest() bool {
	if !kc.setBusy(false) {
		return false
	}
	return kc.armRead(kc.s.o.IdleTimeout, fetchcache.ClosedIdleTimeout)
}

// armRead sets the read deadline d from now, or the SASL deadline when
// that comes first and the connection has not authenticated; reason names
// the deadline for the metric. Once the server is stopping it sets a past
// deadline (wakeRead's) instead and reports false.
func (kc *kafkaConn) armRead(d time.Duration, reason string) bool {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	select {
	case <-kc.stopping:
		_ = kc.c.SetReadDeadline(time.Now())
		return false
	default:
	}
	at := time.Now().Add(d)
	if !kc.authBy.IsZero() && !kc.authenticated() && kc.authBy.Before(at) {
		at, reason = kc.authBy, fetchcache.ClosedSASLTimeout
	}
	kc.waiting = reason
	_ = kc.c.SetReadDeadline(at)
	return true
}

// readTimedOut counts and logs a connection closed because the deadline
// armRead set last passed.
func (kc *kafkaConn) readTimedOut() {
	kc.mu.Lock()
	reason := kc.waiting
	kc.mu.Unlock()
	select {
	case <-kc.stopping:
		return // wakeRead's deadline, not the client's fault
	default:
	}
	kc.s.m.Closed(fetchcache.InterfaceKafka, reason).Inc()
	kc.s.log.Debug("kafka connection closed", "remote", kc.remote(), "reason", reason)
}

// remoteIP is the IP of c's peer, the key of the per-IP connection cap
// (the whole address when it has no port).
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// sleep waits d or until the server stops.
func (kc *kafkaConn) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-kc.stopping:
	}
}

func (kc *kafkaConn) serve() {
	defer kc.c.Close()
	defer kc.written() // a response never written still returns its budget
	if tc, ok := kc.c.(*tls.Conn); ok && !kc.handshake(tc) {
		return
	}
	if kc.s.o.Auth.SASLRequired() && !kc.authenticated() {
		kc.authBy = time.Now().Add(kc.s.o.SASLTimeout)
	}
	br := bufio.NewReaderSize(kc.c, 16<<10)
	var buf []byte
	for {
		if !kc.awaitRequest() {
			return
		}
		frame, err := kc.readRequest(br, buf[:0])
		if err != nil {
			if isTimeout(err) {
				kc.readTimedOut()
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errFrameTooLarge) && !isTimeout(err) {
				kc.s.log.Debug("kafka connection read failed", "remote", kc.c.RemoteAddr().String(), "err", err)
			}
			if errors.Is(err, errFrameTooLarge) {
				kc.s.log.Warn("kafka request refused", "remote", kc.c.RemoteAddr().String(), "err", err)
				kc.s.m.Observe(fetchcache.InterfaceKafka, fetchcache.CodeInvalidRequest, 0, 0)
			}
			return
		}
		buf = frame
		if cap(buf) > 64<<10 {
			buf = nil // do not keep a large request buffer per idle connection
		}
		kc.setBusy(true)
		start := time.Now()
		var (
			resp net.Buffers
			code string
		)
		if kc.sasl.mechanism && kc.sasl.version == 0 {
			var raw []byte
			raw, code, err = kc.s.rawSASL(kc, frame)
			if raw != nil {
				resp = net.Buffers{raw}
			}
		} else {
			resp, code, err = kc.s.handle(kc, frame)
		}
		if err != nil {
			if code == "" {
				code = fetchcache.CodeInvalidRequest
			}
			kc.s.m.Observe(fetchcache.InterfaceKafka, code, 0, time.Since(start).Seconds())
			kc.s.log.Warn("kafka request refused, closing connection", "remote", kc.c.RemoteAddr().String(), "err", err)
			return
		}
		n := 0
		for _, b := range resp {
			n += len(b)
		}
		if resp != nil {
			err := kc.writeResponse(resp)
			kc.written()
			if err != nil {
				kc.s.m.Observe(fetchcache.InterfaceKafka, code, 0, time.Since(start).Seconds())
				return
			}
		}
		kc.s.m.Observe(fetchcache.InterfaceKafka, code, n, time.Since(start).Seconds())
		if kc.closeAfter {
			return
		}
	}
}

// writeStep is the most of a response one write deadline covers: the
// deadline moves with the writes, so WriteTimeout bounds a client that
// stops reading, not how long a long response takes to a client that reads
// (Kafka's idle expiry is reset by any progress too).
const writeStep = 1 << 20

// writeResponse writes resp, each writeStep bytes of it within
// WriteTimeout.
func (kc *kafkaConn) writeResponse(resp net.Buffers) error {
	total := 0
	for _, b := range resp {
		total += len(b)
	}
	if total <= writeStep {
		// One step: written as it is, with no step buffers to build.
		_ = kc.c.SetWriteDeadline(time.Now().Add(kc.s.o.WriteTimeout))
		_, err := resp.WriteTo(kc.c)
		return err
	}
	for len(resp) > 0 {
		var step net.Buffers
		for n := 0; len(resp) > 0 && n < writeStep; {
			b := resp[0]
			if k := writeStep - n; len(b) > k {
				step = append(step, b[:k])
				resp[0] = b[k:]
				break
			}
			step = append(step, b)
			resp = resp[1:]
			n += len(b)
		}
		_ = kc.c.SetWriteDeadline(time.Now().Add(kc.s.o.WriteTimeout))
		if _, err := step.WriteTo(kc.c); err != nil {
			return err
		}
	}
	return nil
}

// written runs afterWrite, once.
func (kc *kafkaConn) written() {
	if f := kc.afterWrite; f != nil {
		kc.afterWrite = nil
		f()
	}
}

// readRequest reads the next request frame. The idle deadline (awaitRequest)
// holds until a request begins; from its first byte the whole frame must
// arrive within RequestReadTimeout. It returns net.ErrClosed when the server
// stops in between.
func (kc *kafkaConn) readRequest(br *bufio.Reader, buf []byte) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	if !kc.armRead(kc.s.o.RequestReadTimeout, fetchcache.ClosedRequestReadTimeout) {
		return nil, net.ErrClosed
	}
	return readFrame(br, buf, kc.s.o.MaxRequestBytes)
}

// handshake completes a TLS connection's handshake within HandshakeTimeout
// and takes a verified client certificate's principal.
func (kc *kafkaConn) handshake(tc *tls.Conn) bool {
	select {
	case <-kc.stopping:
		return false
	default:
	}
	_ = tc.SetDeadline(time.Now().Add(kc.s.o.HandshakeTimeout))
	if err := tc.HandshakeContext(kc.ctx); err != nil {
		kc.s.log.Debug("kafka TLS handshake failed", "remote", kc.remote(), "err", err)
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	if p, ok := auth.CertPrincipal(&st); ok {
		kc.principal = p
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

var errFrameTooLarge = errors.New("request frame too large")

// readFrame reads one size-prefixed request into buf (reused if large
// enough). A frame larger than buf and than one 64 KiB step arrives in
// pieces of one step, joined once it is whole: beyond the first step,
// memory follows the bytes actually received, never the declared size, so
// a hostile size costs nothing until its bytes arrive and a stalled frame
// holds just what it sent. Sizes above max are refused before reading the
// body.
func readFrame(r io.Reader, buf []byte, maxBytes int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 0 || n > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", errFrameTooLarge, n, maxBytes)
	}
	readFull := func(p []byte) error {
		_, err := io.ReadFull(r, p)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	const step = 64 << 10
	if n <= max(cap(buf), step) {
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		return buf, readFull(buf)
	}
	var pieces [][]byte
	for got := 0; got < n; {
		p := make([]byte, min(n-got, step))
		if err := readFull(p); err != nil {
			return nil, err
		}
		pieces = append(pieces, p)
		got += len(p)
	}
	return slices.Concat(pieces...), nil
}

// requestHeader is a parsed Kafka request header (v1 or v2).
type requestHeader struct {
	key, version  int16
	correlationID int32
	clientID      *string
}

// errMalformed reports a request that cannot be parsed; the connection is
// closed, as Kafka does.
var errMalformed = errors.New("malformed request")

// decodeRequest parses a request frame (without its size prefix): the
// header, then the body with kmsg. It returns the header and the decoded
// request; req is nil when the API key is unknown to kmsg or the version is
// beyond what kmsg can decode (the caller closes the connection, except for
// ApiVersions, which it answers the KIP-511 way). The header is parsed even
// then, so the correlation id is known.
func decodeRequest(frame []byte) (requestHeader, kmsg.Request, error) {
	var h requestHeader
	if len(frame) < 8 {
		return h, nil, fmt.Errorf("%w: frame of %d bytes is shorter than a request header", errMalformed, len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	req := kmsg.RequestForKey(h.key)
	if req == nil || h.version < 0 || h.version > req.MaxVersion() {
		return h, nil, nil
	}
	rest := frame[8:]
	if len(rest) < 2 {
		return h, nil, fmt.Errorf("%w: no client id", errMalformed)
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id of %d bytes runs past the frame", errMalformed, idLen)
		}
		id := string(rest[:idLen])
		h.clientID = &id
		rest = rest[idLen:]
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, fmt.Errorf("%w: header tags: %v", errMalformed, err)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d body: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section (uvarint count, then per field a
// uvarint tag, a uvarint size and the bytes).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// appendResponse frames a response: size, correlation id, the header's
// tag section when the response is flexible (never for ApiVersions, whose
// response header is always v0), body.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
