// Package server runs the fetch service's listeners over one catalog: the
// HTTP API (fetchcache/httpapi, plus /metrics, /healthz and /readyz) and
// the Kafka protocol (fetchcache/kafkasrv), with their TLS, authentication,
// shared request metrics and a bounded shutdown. The daemons (serve, fetch,
// sidecar) start it; it holds no logic of either interface.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
)

// DefaultServerShutdownTimeout bounds the graceful part of Serve's shutdown.
const DefaultServerShutdownTimeout = 10 * time.Second

// Defaults of HTTPLimits.
const (
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPIdleTimeout       = 2 * time.Minute
	DefaultHTTPMaxConnections    = 4096
	// DefaultHTTPMaxConnectionsPerIP is the Kafka listener's per-IP
	// default: one host cannot take every connection.
	DefaultHTTPMaxConnectionsPerIP = 1024
)

// HTTPLimits bound the HTTP listener against slow and numerous clients;
// zero fields take the defaults. (A request body's own bound is
// httpapi.HTTPOptions.BodyReadTimeout.)
type HTTPLimits struct {
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long.
	IdleTimeout time.Duration
	// MaxConnections bounds open connections; more are closed at once and
	// counted in tiered_fetch_connections_refused_total.
	MaxConnections int
	// MaxConnectionsPerIP bounds the open connections of one client IP;
	// more are closed at once and counted.
	MaxConnectionsPerIP int
}

// ServerOptions configures Listen: which listeners to open and what they
// serve.
type ServerOptions struct {
	Catalog fetchcache.Catalog // required

	// HTTPAddr and KafkaAddr are the listen addresses (--http, --kafka);
	// empty disables that interface. Port 0 picks a free port.
	HTTPAddr  string
	KafkaAddr string
	// AdvertisedAddr is the Kafka address Metadata advertises
	// (--advertised-addr); empty: the address each connection reached.
	AdvertisedAddr string

	// Registerer receives the tiered_fetch request series; Gatherer is
	// served at /metrics. Either may be nil.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	Logger     *slog.Logger

	// Ready is consulted by /readyz besides the shutdown state; nil means
	// the catalog can list its topics.
	Ready func(ctx context.Context) error

	// Security is the listeners' TLS and authentication (auth.NewSecurity
	// builds it from the configuration); the zero value is plaintext and
	// anonymous.
	Security auth.Security

	// HTTP and Kafka carry the interfaces' tunables; their Catalog,
	// Metrics, Logger, Gatherer, Ready, AdvertisedAddr, Auth and TLS
	// fields are set by Listen.
	HTTP  httpapi.HTTPOptions
	Kafka kafkasrv.KafkaOptions
	// HTTPLimits bound the HTTP listener's connections.
	HTTPLimits HTTPLimits

	ShutdownTimeout time.Duration
}

// Server runs the fetch service's listeners: HTTP and the Kafka protocol
// over one catalog.
type Server struct {
	o        ServerOptions
	log      *slog.Logger
	httpLn   net.Listener
	kafkaLn  net.Listener
	httpSrv  *http.Server
	kafka    *kafkasrv.KafkaServer
	draining atomic.Bool
	served   atomic.Bool
}

// Listen validates o and binds the listeners. Run the server with Serve;
// a server that is never served must be closed with Close.
func Listen(o ServerOptions) (*Server, error) {
	if o.Catalog == nil {
		return nil, errors.New("fetch server: no catalog")
	}
	if o.HTTPAddr == "" && o.KafkaAddr == "" {
		return nil, errors.New("fetch server: neither an HTTP nor a Kafka address")
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultServerShutdownTimeout
	}
	s := &Server{o: o, log: o.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m := fetchcache.NewServeMetrics(o.Registerer)
	ready := func(ctx context.Context) error {
		if s.draining.Load() {
			return errors.New("shutting down")
		}
		if o.Ready != nil {
			return o.Ready(ctx)
		}
		_, err := o.Catalog.Topics(ctx)
		return err
	}
	if o.KafkaAddr != "" {
		ko := o.Kafka
		ko.Catalog, ko.Metrics, ko.Logger, ko.AdvertisedAddr = o.Catalog, m, s.log, o.AdvertisedAddr
		ko.TLS, ko.Auth, ko.Registerer = o.Security.KafkaTLS, o.Security.Auth, o.Registerer
		if ko.ShutdownTimeout <= 0 {
			ko.ShutdownTimeout = o.ShutdownTimeout
		}
		k, err := kafkasrv.NewKafkaServer(ko)
		if err != nil {
			return nil, fmt.Errorf("fetch server: %w", err)
		}
		s.kafka = k
	}
	if o.HTTPAddr != "" {
		ho := o.HTTP
		ho.Catalog, ho.Metrics, ho.Logger, ho.Gatherer, ho.Ready = o.Catalog, m, s.log, o.Gatherer, ready
		ho.Auth, ho.Registerer = o.Security.Auth, o.Registerer
		lim := o.HTTPLimits
		if lim.ReadHeaderTimeout <= 0 {
			lim.ReadHeaderTimeout = DefaultHTTPReadHeaderTimeout
		}
		if lim.IdleTimeout <= 0 {
			lim.IdleTimeout = DefaultHTTPIdleTimeout
		}
		if lim.MaxConnections <= 0 {
			lim.MaxConnections = DefaultHTTPMaxConnections
		}
		if lim.MaxConnectionsPerIP <= 0 {
			lim.MaxConnectionsPerIP = DefaultHTTPMaxConnectionsPerIP
		}
		s.httpSrv = &http.Server{
			Handler:           httpapi.NewHTTPHandler(ho),
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			IdleTimeout:       lim.IdleTimeout,
			TLSConfig:         o.Security.HTTPTLS,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		}
		ln, err := net.Listen("tcp", o.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("fetch server: listen http %s: %w", o.HTTPAddr, err)
		}
		s.httpLn = &limitListener{Listener: ln, max: lim.MaxConnections, perIP: lim.MaxConnectionsPerIP, byIP: map[string]int{},
			refused:   m.Refused(fetchcache.InterfaceHTTP, fetchcache.RefusedMaxConnections),
			refusedIP: m.Refused(fetchcache.InterfaceHTTP, fetchcache.RefusedMaxConnectionsPerIP)}
	}
	if s.kafka != nil {
		ln, err := net.Listen("tcp", o.KafkaAddr)
		if err != nil {
			if s.httpLn != nil {
				_ = s.httpLn.Close()
			}
			return nil, fmt.Errorf("fetch server: listen kafka %s: %w", o.KafkaAddr, err)
		}
		s.kafkaLn = ln
	}
	for _, w := range o.Security.Warnings(s.httpLn != nil, s.kafkaLn != nil) {
		s.log.Warn("fetch server security: " + w)
	}
	return s, nil
}

// HTTPAddr is the bound HTTP address, nil when HTTP is disabled.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// KafkaAddr is the bound Kafka address, nil when Kafka is disabled.
func (s *Server) KafkaAddr() net.Addr {
	if s.kafkaLn == nil {
		return nil
	}
	return s.kafkaLn.Addr()
}

// Close releases the listeners of a server that was never served.
func (s *Server) Close() error {
	if s.served.Load() {
		return nil
	}
	var errs []error
	if s.httpLn != nil {
		errs = append(errs, s.httpLn.Close())
	}
	if s.kafkaLn != nil {
		errs = append(errs, s.kafkaLn.Close())
	}
	return errors.Join(errs...)
}

// Serve runs the listeners until ctx ends or one fails, then shuts both
// down gracefully: /readyz turns 503, listeners stop accepting, in-flight
// requests finish (waiting Kafka fetches answer at once) within
// ShutdownTimeout, and connections close. It returns nil after a shutdown
// through ctx, else the first listener error. Serve may be called once.
func (s *Server) Serve(ctx context.Context) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("fetch server: Serve called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	if s.kafka != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.kafka.Serve(ctx, s.kafkaLn); err != nil {
				fail(err)
			}
		}()
		s.log.Info("kafka listener started", "addr", s.kafkaLn.Addr().String(), "tls", s.o.Security.KafkaTLS != nil, "sasl_plain", s.o.Security.Auth.SASLRequired())
	}
	if s.httpSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve := s.httpSrv.Serve
			if s.httpSrv.TLSConfig != nil {
				// The certificate is in TLSConfig; ServeTLS adds HTTP/2.
				serve = func(ln net.Listener) error { return s.httpSrv.ServeTLS(ln, "", "") }
			}
			if err := serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fail(fmt.Errorf("http listener: %w", err))
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			s.draining.Store(true)
			sctx, scancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
			defer scancel()
			if err := s.httpSrv.Shutdown(sctx); err != nil {
				_ = s.httpSrv.Close()
			}
		}()
		s.log.Info("http listener started", "addr", s.httpLn.Addr().String(), "tls", s.o.Security.HTTPTLS != nil, "tokens", s.o.Security.Auth.TokensRequired())
	}
	<-ctx.Done()
	s.draining.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(errs...)
}

// limitListener closes a connection at once, counting it, when max are
// open or perIP of its client's address (x/net/netutil.LimitListener would
// leave it waiting in the backlog, where it still costs the client a socket
// and tells it nothing).
type limitListener struct {
	net.Listener
	max, perIP         int
	refused, refusedIP prometheus.Counter

	mu   sync.Mutex
	open int
	byIP map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		l.mu.Lock()
		var refused prometheus.Counter
		switch {
		case l.open >= l.max:
			refused = l.refused
		case l.byIP[ip] >= l.perIP:
			refused = l.refusedIP
		default:
			l.open++
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if refused != nil {
			refused.Inc()
			_ = c.Close()
			continue
		}
		return &limitConn{Conn: c, l: l, ip: ip}, nil
	}
}

// limitConn gives its place back on its first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
