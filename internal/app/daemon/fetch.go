package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/remotetier/objstore"
)

// FetchOptions configure NewFetch.
type FetchOptions struct {
	// Config is the validated configuration (config.ProcessFetch).
	Config   *config.Config
	Logger   *slog.Logger
	Registry *prometheus.Registry // nil: NewRegistry()
}

// Fetch is `tiered fetch`: the fetch service over a bucket, its remote
// catalog reading through the chunk cache, and the consumer-group
// coordinator. Several may run behind a load balancer. The only thing it
// writes is group state (committed offsets) under groups/; on a bucket it
// may only read it serves every read and answers the group APIs
// COORDINATOR_NOT_AVAILABLE.
type Fetch struct {
	base
	bucket objstore.Bucket
	// groupBkt is the read-write handle of the group coordinator and the fleet's leases
	// (nil when the bucket could only be opened read-only: then bucket serves it).
	groupBkt objstore.Bucket
	groups   *groups.Coordinator
	// fleet is the fetch fleet (fetch.peers; alone without): which replica coordinates
	// each consumer group.
	fleet  *fleet.Fleet
	cache  *chunkcache.CachingBucket
	server *server.Server
}

// NewFetch opens and checks the bucket (read-only for reads: Put and Delete
// are refused, and a file:// bucket needs only read permission; and
// read-write for the group coordinator's groups/ objects when it can be
// opened so), opens the cache (the disk tier's directory is locked) and
// binds the listeners.
func NewFetch(ctx context.Context, o FetchOptions) (_ *Fetch, err error) {
	b, err := newBase("fetch", o.Config, o.Logger, o.Registry, true)
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	f := &Fetch{base: b}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.bucket, err = openReadOnlyBucket(ctx, cfg.Bucket); err != nil {
		return nil, err
	}
	metered := objstore.WithMetrics(f.bucket, f.reg)
	if f.cache, err = chunkcache.NewCachingBucket(metered, CacheOptions(cfg.Fetch, f.reg, f.log)); err != nil {
		return nil, fmt.Errorf("fetch cache: %w", err)
	}
	cat, err := fetchcache.NewRemoteCatalog(f.cache, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		return nil, err
	}
	groupBkt, readOnly := metered, true
	if rw, err := openBucket(ctx, cfg.Bucket); err != nil {
		f.log.Warn("bucket cannot be opened for writing: consumer groups unavailable (the group APIs answer COORDINATOR_NOT_AVAILABLE); every read is served",
			"bucket", ShownURL(cfg.Bucket), "err", err)
	} else {
		f.groupBkt, groupBkt, readOnly = rw, objstore.WithMetrics(rw, f.reg), false
	}
	// The fleet decides which groups this replica coordinates; a group that moves away is
	// released by the coordinator (re-read from the bucket if it comes back).
	if f.fleet, err = f.newFleet(groupBkt, func() []string { return f.groups.Held() }, func(g string) { f.groups.Release(g) }); err != nil {
		return nil, err
	}
	f.ring = f.fleet
	if f.groups, err = f.groupCoordinator(groupBkt, readOnly); err != nil {
		return nil, err
	}
	nodeID, err := fleetNodeID(ctx, f.fleet)
	if err != nil {
		return nil, err
	}
	if f.server, err = f.listen(listenOptions{catalog: cat, groups: f.groups, nodeID: nodeID, peers: fleetBrokers(f.fleet),
		groupsHTTP: groupsHTTP(f.groups, cat, f.fleet)}); err != nil {
		return nil, err
	}
	// The fleet's first lease is written in Run, right before the loop that renews it:
	// written here, it would go unrenewed while the process pretouches its memory (seconds),
	// and a lease shorter than that would lapse before the replica served anything (its
	// peers taking its groups, then handing them back at its first renewal).
	return f, nil
}

func (f *Fetch) close() error {
	var errs []error
	if f.server != nil {
		errs = append(errs, f.server.Close())
	}
	if f.cache != nil {
		errs = append(errs, f.cache.Close())
	}
	if f.bucket != nil {
		errs = append(errs, f.bucket.Close())
	}
	if f.groupBkt != nil {
		errs = append(errs, f.groupBkt.Close())
	}
	return errors.Join(errs...)
}

// Close releases a Fetch whose Run was never called.
func (f *Fetch) Close() error { return f.close() }

// HTTPAddr is the bound HTTP address.
func (f *Fetch) HTTPAddr() string {
	if a := f.server.HTTPAddr(); a != nil {
		return a.String()
	}
	return ""
}

// KafkaAddr is the bound Kafka address ("" when disabled).
func (f *Fetch) KafkaAddr() string {
	if a := f.server.KafkaAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Run serves until ctx ends, then shuts the listeners down gracefully (in
// shutdown_timeout) and closes the cache and bucket.
func (f *Fetch) Run(ctx context.Context) error {
	f.log.Info("fetch service started", "bucket", ShownURL(f.cfg.Bucket), "http", f.HTTPAddr(), "kafka", f.KafkaAddr())
	stopGroups := runGroups(f.groups)
	// Writes the first lease and reads the peers' before anything is served, so the first
	// answers see the fleet; fleet.Run renews it from here on.
	f.startFleet(ctx, f.fleet, f.HTTPAddr())
	fleetCtx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.fleet.Run(fleetCtx) }() // renews the lease; releases it when stopped
	err := f.server.Serve(ctx)
	stopFleet()
	if ferr := <-fleetDone; ferr != nil {
		f.log.Warn("fetch fleet", "err", ferr)
	}
	stopGroups()
	f.server = nil // served: nothing left to close
	if cerr := f.close(); err == nil && cerr != nil {
		err = fmt.Errorf("shutdown: %w", cerr)
	}
	if err == nil {
		f.log.Info("stopped")
	}
	return err
}
