package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// base is what every daemon (serve, fetch, sidecar) has, made one way: the validated
// configuration, the logger, the one registry every subsystem reports to and /metrics
// serves, and the listeners' TLS and authentication.
type base struct {
	cfg      *config.Config
	log      *slog.Logger
	reg      *prometheus.Registry
	security auth.Security
	fetch    bool // runs the fetch service: Kafka listener, tiered_fetch request series
	// ring decides which consumer groups this process coordinates
	// (groups.Alone: all of them).
	ring groups.Ring
}

// newBase checks the options every daemon takes (nil logger: discard; nil registry:
// NewRegistry()) and builds the listeners' security. A daemon without the fetch service
// (fetch false: the sidecar) never opens the Kafka listener, so kafka.tls is not read.
func newBase(name string, cfg *config.Config, log *slog.Logger, reg *prometheus.Registry, fetch bool) (base, error) {
	if cfg == nil {
		return base{}, fmt.Errorf("%s: no configuration", name)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = NewRegistry()
	}
	kafkaTLS := cfg.Kafka.TLS
	if !fetch {
		kafkaTLS = config.TLS{}
	}
	security, err := auth.NewSecurity(cfg.HTTP.TLS, kafkaTLS, cfg.Auth)
	if err != nil {
		return base{}, fmt.Errorf("%s: %w", name, err)
	}
	return base{cfg: cfg, log: log, reg: reg, security: security, fetch: fetch, ring: groups.Alone{}}, nil
}

// listenOptions are what the daemons' listeners differ in.
type listenOptions struct {
	// catalog is what the HTTP API (and the Kafka listener) serve.
	catalog fetchcache.Catalog
	// ready answers /readyz (nil error: 200); nil means the catalog lists its topics.
	ready func(context.Context) error
	// writer serves the /v1 write API (serve's produce and topic admin).
	writer httpapi.Writer
	// nodeID is the Kafka node id Metadata and FindCoordinator give this process (a fleet
	// replica's: fleet.NodeID of its address; 0 alone).
	nodeID int32
	// peers are the other brokers Metadata lists (a fleet's live replicas; nil: none).
	peers func() []kafkasrv.Broker
	// groups answers the Kafka consumer-group APIs (nil: COORDINATOR_NOT_AVAILABLE).
	groups *groups.Coordinator
	// groupsHTTP serves the /v1/groups administration (nil: not routed).
	groupsHTTP *httpapi.Groups
}

// listen binds the daemon's listeners, the same for every daemon: HTTP on http.addr with
// /metrics (the daemon's registry), /healthz (200 while the process serves), /readyz (o.ready)
// and the fetch API over o.catalog, under http.tls and auth; and, for a daemon running the
// fetch service, the Kafka protocol on kafka.addr (empty: none).
func (b *base) listen(o listenOptions) (*server.Server, error) {
	so := server.ServerOptions{
		Catalog:  o.catalog,
		HTTPAddr: b.cfg.HTTP.Addr,
		Gatherer: b.reg,
		Logger:   b.log,
		Ready:    o.ready,
		HTTP: httpapi.HTTPOptions{
			Writer:                  o.writer,
			Groups:                  o.groupsHTTP,
			BodyReadTimeout:         b.cfg.HTTP.BodyReadTimeout,
			WriteTimeout:            b.cfg.HTTP.WriteTimeout,
			MaxInFlightProduceBytes: int64(b.cfg.HTTP.MaxInFlightProduceBytes),
			ProduceMaxWait:          b.cfg.Fetch.MaxWait,
		},
		HTTPLimits: server.HTTPLimits{
			ReadHeaderTimeout:   b.cfg.HTTP.ReadHeaderTimeout,
			IdleTimeout:         b.cfg.HTTP.IdleTimeout,
			MaxConnections:      b.cfg.HTTP.MaxConnections,
			MaxConnectionsPerIP: b.cfg.HTTP.MaxConnectionsPerIP,
		},
		Security:        b.security,
		ShutdownTimeout: b.cfg.ShutdownTimeout,
	}
	if b.fetch {
		so.KafkaAddr, so.AdvertisedAddr = b.cfg.Kafka.Addr, b.cfg.Kafka.AdvertisedAddr
		k := b.cfg.Kafka
		so.Kafka = kafkasrv.KafkaOptions{
			IdleTimeout:              k.IdleTimeout,
			RequestReadTimeout:       k.RequestReadTimeout,
			SASLTimeout:              k.SASLTimeout,
			MaxConnections:           k.MaxConnections,
			MaxConnectionsPerIP:      k.MaxConnectionsPerIP,
			MaxInFlightResponseBytes: int64(k.MaxInFlightResponseBytes),
			MaxFetchPartitions:       k.MaxFetchPartitions,
			NodeID:                   o.nodeID,
			Peers:                    o.peers,
			Groups:                   o.groups,
			FetchFillConcurrency:     k.FetchFillConcurrency,
			FetchMaxBytes:            int(k.FetchMaxBytes),
		}
		so.Registerer = b.reg
	}
	return server.Listen(so)
}

// groupCoordinator is the consumer-group coordinator of a daemon serving
// Kafka, over the groups/ prefix of bkt (fetchcache/groups), timed by the
// groups section (Kafka's coordinator defaults). readOnly: the bucket refuses writes, and the group
// APIs answer COORDINATOR_NOT_AVAILABLE.
func (b *base) groupCoordinator(bkt objstore.Bucket, readOnly bool) (*groups.Coordinator, error) {
	m := groups.NewMetrics(b.reg)
	log := b.log.With("component", "groups")
	st := groups.NewStore(bkt, groups.StoreOptions{ReadOnly: readOnly, Metrics: m, Logger: log})
	g := b.cfg.Groups
	delay := g.InitialRebalanceDelay
	if delay == 0 {
		delay = -1 // groups.Options: 0 is the default, < 0 none
	}
	return groups.New(groups.Options{Store: st, Ring: b.ring, Metrics: m, Logger: log, InitialRebalanceDelay: delay,
		MinSessionTimeout: g.MinSessionTimeout, MaxSessionTimeout: g.MaxSessionTimeout, OffsetsRetention: g.OffsetsRetention, MaxGroupSize: g.MaxSize})
}

// runGroups runs c (timeouts, offset expiry) until the returned stop is
// called; stop waits for it.
func runGroups(c *groups.Coordinator) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// awaitShutdown waits for a daemon's shutdown to finish (done sends its own error) until
// deadline. It returns runErr, what stopped the daemon other than its context, before the
// shutdown's error, and logs "stopped" after a clean stop; past the deadline it returns an
// error naming shutdown_timeout and what was abandoned.
func (b *base) awaitShutdown(done <-chan error, deadline time.Time, runErr error, abandoned string) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		if runErr != nil {
			return runErr
		}
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		b.log.Info("stopped")
		return nil
	case <-t.C:
		return fmt.Errorf("shutdown did not finish within shutdown_timeout %v; exiting with %s", b.cfg.ShutdownTimeout, abandoned)
	}
}

// uploaderOptions maps the uploader section to the uploader's options, for serve and the
// sidecar alike: orphans are garbage-collected every half grace period.
func (b *base) uploaderOptions(now func() time.Time, onPass func(remotetier.Report, error)) remotetier.Options {
	u := b.cfg.Uploader
	return remotetier.Options{
		Concurrency:     u.Concurrency,
		BytesPerSecond:  int64(u.BytesPerSecond),
		Interval:        u.Interval,
		ManifestVersion: u.ManifestVersion,
		GCInterval:      u.GCGrace / 2,
		GCGrace:         u.GCGrace,
		Now:             now,
		Registerer:      b.reg,
		Logger:          b.log.With("component", "uploader"),
		OnPass:          onPass,
	}
}
