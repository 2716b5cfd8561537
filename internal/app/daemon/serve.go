package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/producer"
	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// Defaults of ServeOptions.
const (
	// DefaultFlushCheckInterval is how often the flusher calls
	// Log.FlushIfDue (Kafka's log.flush.scheduler.interval.ms, which Kafka
	// leaves at Long.MAX_VALUE; flush.ms needs a scheduler to mean anything).
	DefaultFlushCheckInterval = 200 * time.Millisecond
	// DefaultReadyWait is how long a produce or fetch request arriving
	// during recovery waits for it before it is refused (503 / throttled).
	DefaultReadyWait = 10 * time.Second
	// MaxProduceBodyBytes bounds one HTTP produce request.
	MaxProduceBodyBytes = httpapi.MaxProduceBodyBytes
)

// ServeOptions configure NewServe.
type ServeOptions struct {
	// Config is the validated configuration (config.Load with
	// config.ProcessServe).
	Config *config.Config
	// Reload loads the configuration again for SIGHUP and POST
	// /v1/admin/reload; only the broker-wide topic defaults take effect
	// without a restart. Nil re-applies Config's.
	Reload func() (*config.Config, error)
	Logger *slog.Logger
	// Registry receives every subsystem's metrics and is served at
	// /metrics (nil: NewRegistry()).
	Registry *prometheus.Registry
	Now      func() time.Time
	// FlushCheckInterval is the flusher's period (default
	// DefaultFlushCheckInterval).
	FlushCheckInterval time.Duration
	// ReadyWait bounds how long a request waits for recovery (default
	// DefaultReadyWait).
	ReadyWait time.Duration
	// Command names the process in the data dir's lock record (default
	// "tiered serve").
	Command string
}

// Serve is `tiered serve`: the local-tier log engine, log cleaner, retention
// (local and remote), uploader, flusher and the fetch service over a combined
// catalog (local offsets read from disk, older ones from the bucket through
// the chunk cache), plus the produce and topic admin HTTP API, in one
// process holding one data dir.
//
// NewServe checks the bucket, locks the data dir and binds the listeners;
// Run recovers the log dir in the background (the listeners answer, /readyz
// says 503 until recovery and the first manifest load are done), runs every
// loop, and on ctx's end shuts down in order.
type Serve struct {
	base
	o        ServeOptions
	settings config.BrokerSettings

	lock    *dirLock
	bucket  objstore.Bucket // metered
	rawBkt  objstore.Bucket
	cache   *chunkcache.CachingBucket
	remote  *fetchcache.RemoteCatalog
	server  *server.Server
	groups  *groups.Coordinator // the Kafka listener's consumer groups, over bucket
	catalog *lateCatalog
	local   *localMetrics

	readyCh chan struct{} // closed when ready
	state   atomic.Value  // string: why not ready ("" when ready)

	mu  sync.Mutex
	dir *localtier.LogDir // set once recovered

	reloadMu sync.Mutex
}

// NewServe prepares serve: it opens and checks an explicitly configured
// bucket before touching the data dir (an unreachable bucket leaves nothing
// written), locks the data dir (a holder gets a *HeldError naming it),
// opens the default bucket inside it, and binds the HTTP and Kafka
// listeners. Close it if Run is never called.
func NewServe(ctx context.Context, o ServeOptions) (_ *Serve, err error) {
	b, err := newBase("serve", o.Config, o.Logger, o.Registry, true)
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FlushCheckInterval <= 0 {
		o.FlushCheckInterval = DefaultFlushCheckInterval
	}
	if o.ReadyWait <= 0 {
		o.ReadyWait = DefaultReadyWait
	}
	if o.Command == "" {
		o.Command = "tiered serve"
	}
	settings, err := cfg.BrokerSettings()
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Serve{base: b, o: o, settings: settings, readyCh: make(chan struct{})}
	s.state.Store("recovering the data dir")
	defer func() {
		if err != nil {
			s.closeEarly()
		}
	}()

	defaultBucket := cfg.Bucket == config.DefaultBucket(cfg.DataDir)
	if !defaultBucket {
		if s.rawBkt, err = openBucket(ctx, cfg.Bucket); err != nil {
			return nil, err
		}
	}
	if s.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if defaultBucket {
		loc, perr := objstore.ParseURL(cfg.Bucket)
		if perr != nil {
			return nil, fmt.Errorf("bucket: %w", perr)
		}
		if err = os.MkdirAll(filepath.FromSlash(loc.Dir), 0o755); err != nil {
			return nil, fmt.Errorf("create default bucket: %w", err)
		}
		if s.rawBkt, err = openBucket(ctx, cfg.Bucket); err != nil {
			return nil, err
		}
	}
	s.bucket = objstore.WithMetrics(s.rawBkt, s.reg)
	if s.local, err = newLocalMetrics(s.reg); err != nil {
		return nil, err
	}
	if s.cache, err = chunkcache.NewCachingBucket(s.bucket, CacheOptions(cfg.Fetch, s.reg, s.log)); err != nil {
		return nil, fmt.Errorf("fetch cache: %w", err)
	}
	if s.remote, err = fetchcache.NewRemoteCatalog(s.cache, fetchcache.RemoteCatalogOptions{Now: o.Now}); err != nil {
		return nil, err
	}
	s.catalog = &lateCatalog{ready: s.readyCh, wait: o.ReadyWait, state: s.notReady}
	if s.groups, err = s.groupCoordinator(s.bucket, false); err != nil {
		return nil, err
	}
	srv, err := s.listen(listenOptions{
		groups:     s.groups,
		groupsHTTP: groupsHTTP(s.groups, s.catalog, nil),
		catalog:    s.catalog,
		ready:      func(context.Context) error { return s.notReady() },
		writer:     serveWriter{s},
	})
	if err != nil {
		return nil, err
	}
	s.server = srv
	h := Holder{PID: os.Getpid(), Command: o.Command, Started: o.Now()}
	if a := srv.HTTPAddr(); a != nil {
		h.HTTP = a.String()
	}
	if a := srv.KafkaAddr(); a != nil {
		h.Kafka = a.String()
	}
	s.lock.record(h)
	return s, nil
}

// BucketError is a bucket that cannot be opened: a file:// directory that
// does not exist, an S3 endpoint that does not answer, missing credentials.
type BucketError struct {
	URL string // as shown: without user info and query
	Err error
}

func (e *BucketError) Error() string { return fmt.Sprintf("bucket %s: %v", e.URL, e.Err) }

func (e *BucketError) Unwrap() error { return e.Err }

// openBucket opens and checks a bucket URL for reading and writing; the
// error shows the URL without its query (which may carry an endpoint's
// credentials).
func openBucket(ctx context.Context, raw string) (objstore.Bucket, error) {
	return openBucketMode(ctx, raw, false)
}

// openReadOnlyBucket is openBucket for a daemon that never writes (fetch):
// a file:// bucket needs only read permission.
func openReadOnlyBucket(ctx context.Context, raw string) (objstore.Bucket, error) {
	return openBucketMode(ctx, raw, true)
}

func openBucketMode(ctx context.Context, raw string, readOnly bool) (objstore.Bucket, error) {
	open := objstore.Open
	if readOnly {
		open = objstore.OpenReadOnly
	}
	b, err := open(ctx, raw)
	if err != nil {
		return nil, &BucketError{URL: ShownURL(raw), Err: err}
	}
	return b, nil
}

// CheckBucket opens and closes the bucket at raw, to report an unreachable
// bucket together with configuration problems; readOnly opens it as a
// process that only reads does (fetch). The default bucket of dataDir,
// which serve creates, is not checked.
func CheckBucket(ctx context.Context, raw, dataDir string, readOnly bool) error {
	if raw == "" || (dataDir != "" && raw == config.DefaultBucket(dataDir)) {
		return nil
	}
	if _, err := objstore.ParseURL(raw); err != nil {
		return nil // a configuration problem already
	}
	b, err := openBucketMode(ctx, raw, readOnly)
	if err != nil {
		return err
	}
	return b.Close()
}

// ShownURL is a bucket URL safe to print: without user info and query.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// CacheOptions maps the fetch section of the configuration to the chunk
// cache's options.
func CacheOptions(f config.Fetch, reg prometheus.Registerer, log *slog.Logger) chunkcache.CacheOptions {
	ra := f.ReadAheadChunks
	if ra == 0 {
		ra = -1 // config's 0 disables; the cache's 0 means its default
	}
	return chunkcache.CacheOptions{
		ChunkBytes:        int64(f.ChunkBytes),
		MemoryBytes:       int64(f.CacheBytes),
		CacheDir:          f.CacheDir,
		DiskBytes:         int64(f.DiskCacheBytes),
		ReadAheadChunks:   ra,
		MaxConcurrentGets: f.MaxConcurrentGets,
		ParkedGets:        f.ParkedGets,
		MaxInFlightBytes:  int64(f.MaxInFlightBytes),
		MaxWait:           f.MaxWait,
		MemoryPressure:    HeapPressure(),
		Registerer:        reg,
		Logger:            log,
	}
}

// closeEarly releases what NewServe took when it fails or Run never runs.
func (s *Serve) closeEarly() {
	if s.server != nil {
		_ = s.server.Close()
	}
	if s.cache != nil {
		_ = s.cache.Close()
	}
	if s.rawBkt != nil {
		_ = s.rawBkt.Close()
	}
	if s.lock != nil {
		_ = s.lock.release()
	}
}

// Close releases a Serve whose Run was never called.
func (s *Serve) Close() error {
	s.closeEarly()
	return nil
}

// HTTPAddr is the bound HTTP address.
func (s *Serve) HTTPAddr() string {
	if a := s.server.HTTPAddr(); a != nil {
		return a.String()
	}
	return ""
}

// KafkaAddr is the bound Kafka address ("" when disabled).
func (s *Serve) KafkaAddr() string {
	if a := s.server.KafkaAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Registry is the registry every subsystem reports to.
func (s *Serve) Registry() *prometheus.Registry { return s.reg }

// Ready is closed once recovery and the first manifest load are done.
func (s *Serve) Ready() <-chan struct{} { return s.readyCh }

func (s *Serve) notReady() error {
	if st, _ := s.state.Load().(string); st != "" {
		return errors.New(st)
	}
	return nil
}

// LogDir is the recovered log dir, nil before recovery finished.
func (s *Serve) LogDir() *localtier.LogDir {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// Run recovers the data dir, runs every loop and the listeners until ctx
// ends, then shuts down: the listeners stop accepting and finish in-flight
// requests, the loops stop (an upload in flight is abandoned; its attempt
// objects are collected later), the log dir is flushed and checkpointed,
// and the lock released. The whole shutdown is bounded by the configured
// shutdown_timeout.
func (s *Serve) Run(ctx context.Context) error {
	srvCtx, stopSrv := context.WithCancel(context.Background())
	defer stopSrv()
	loopCtx, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	srvDone := make(chan error, 1)
	go func() { srvDone <- s.server.Serve(srvCtx) }()
	stopGroups := runGroups(s.groups)

	var loops sync.WaitGroup
	startErr := make(chan error, 1)
	go func() { startErr <- s.start(loopCtx, &loops) }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-srvDone:
		srvDone <- err
		runErr = err
	case err := <-startErr:
		startErr <- err
		if err != nil {
			runErr = err
		}
	}
	if runErr == nil {
		// start's error arrives after ctx ended too; keep waiting for ctx.
		select {
		case <-ctx.Done():
		case err := <-srvDone:
			srvDone <- err
			runErr = err
		}
	}
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	done := make(chan error, 1)
	go func() {
		stopSrv()
		serr := <-srvDone
		stopGroups()
		stopLoops()
		if err := <-startErr; err != nil && !errors.Is(err, context.Canceled) && runErr == nil {
			runErr = err
		}
		loops.Wait()
		var errs []error
		if serr != nil && runErr == nil {
			errs = append(errs, serr)
		}
		if d := s.LogDir(); d != nil {
			if err := d.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close data dir: %w", err))
			}
		}
		errs = append(errs, s.cache.Close(), s.rawBkt.Close())
		_ = s.lock.release()
		done <- errors.Join(errs...)
	}()
	return s.awaitShutdown(done, deadline, runErr, "work abandoned (the next start recovers)")
}

// start recovers the log dir, starts the loops and loads the manifests.
func (s *Serve) start(ctx context.Context, loops *sync.WaitGroup) error {
	began := time.Now()
	fsys := heldLockFS{FS: vfs.Default, held: s.lock.path}
	d, rep, err := localtier.OpenLogDir(fsys, s.cfg.DataDir, localtier.LogDirOptions{
		Now: s.o.Now, Logger: s.log, TopicDefaults: s.cfg.TopicDefaults(), MaxOpenFiles: s.cfg.LocalTier.MaxOpenFiles})
	if err != nil {
		s.state.Store("recovery failed: " + err.Error())
		return fmt.Errorf("open data dir: %w", err)
	}
	s.local.recoverySeconds.Set(time.Since(began).Seconds())
	if st, limit, bounded := d.OpenFiles(); bounded {
		s.log.Info("open-file table", "max_open_files", limit, "open", st.Open, "files", st.Files)
	}
	rc := rep.Recovery
	s.log.Info("data dir recovered", "dir", s.cfg.DataDir, "partitions", rep.Partitions, "segments_recovered", rc.SegmentsRecovered,
		"bytes_truncated", rc.BytesTruncated, "segments_deleted", rc.SegmentsDeleted, "swaps_completed", rc.SwapsCompleted,
		"segments_repaired_alone", rc.SegmentsRepairedAlone, "offsets_lost", rc.OffsetsLost, "log_start_offsets_clamped", rc.LogStartOffsetsClamped,
		"duration", time.Since(began).Round(time.Millisecond))
	s.mu.Lock()
	s.dir = d
	s.mu.Unlock()
	s.local.setDir(d)
	if ctx.Err() != nil {
		return nil
	}

	uploader, err := remotetier.NewUploader(s.bucket, remotetier.NewLocalSource(d, vfs.Default), s.uploaderOptions(s.o.Now, nil))
	if err != nil {
		return err
	}
	lookup, err := remotetier.RemoteLookup(s.bucket, "")
	if err != nil {
		return err
	}
	interval := s.settings.RetentionCheckInterval
	rloop, err := retention.NewLoop(d, retention.LoopOptions{Interval: interval,
		InitialDelay: min(retention.DefaultInitialDelay, interval), Now: s.o.Now,
		Registerer: s.reg, Remote: lookup, Logger: s.log.With("component", "retention")})
	if err != nil {
		return err
	}
	rmetrics, err := remotetier.NewRetentionMetrics(s.reg)
	if err != nil {
		return err
	}
	var cleaner *compactor.Cleaner
	if s.settings.CleanerEnable {
		cleaner, err = compactor.New(d, compactor.Config{Threads: s.settings.CleanerThreads,
			DedupeBufferSize: s.settings.CleanerDedupeBufferSize, IOMaxBytesPerSecond: s.settings.CleanerIOMaxBytesPerSecond,
			Backoff: s.settings.CleanerBackoff, Now: s.o.Now, Logger: s.log.With("component", "cleaner"), Registerer: s.reg})
		if err != nil {
			return err
		}
	}
	s.catalog.set(fetchcache.NewCombinedCatalog(d, s.remote))

	goLoop := func(name string, f func(context.Context) error) {
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("loop stopped", "loop", name, "err", err)
			}
		}()
	}
	goLoop("flusher", func(ctx context.Context) error { return s.flusher(ctx, d) })
	goLoop("uploader", uploader.Run)
	goLoop("retention", rloop.Run)
	goLoop("remote retention", func(ctx context.Context) error {
		return s.remoteRetention(ctx, d, interval, rmetrics)
	})
	if cleaner != nil {
		goLoop("cleaner", cleaner.Run)
	}

	s.state.Store("loading remote manifests")
	if err := s.loadManifests(ctx, d); err != nil {
		return nil // ctx ended
	}
	s.state.Store("")
	close(s.readyCh)
	s.log.Info("ready", "http", s.HTTPAddr(), "kafka", s.KafkaAddr(), "bucket", ShownURL(s.cfg.Bucket))
	return nil
}

// loadManifests reads the root manifest of every remote-enabled partition
// once (the combined catalog keeps them), retrying while the bucket fails.
func (s *Serve) loadManifests(ctx context.Context, d *localtier.LogDir) error {
	cat := fetchcache.NewCombinedCatalog(d, s.remote)
	for _, pl := range d.RemotePartitions(nil) {
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			_, err := cat.RemotePartition(ctx, pl.Topic, pl.Partition)
			var ue *fetchcache.UnknownTopicOrPartitionError
			if err == nil || errors.As(err, &ue) {
				break
			}
			s.log.Warn("load manifest", "topic", pl.Topic, "partition", pl.Partition, "err", err)
			if err := ctxsleep.Sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// flusher calls FlushIfDue on every partition (the topics' flush.ms).
func (s *Serve) flusher(ctx context.Context, d *localtier.LogDir) error {
	t := time.NewTicker(s.o.FlushCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, name := range d.Topics() {
			tp, ok := d.Topic(name)
			if !ok {
				continue
			}
			for p, l := range tp.Partitions {
				if err := l.FlushIfDue(); err != nil {
					s.local.flushErrors.Inc()
					s.log.Error("flush failed", "topic", name, "partition", p, "err", err)
				}
			}
		}
	}
}

// remoteRetention applies retention.ms / retention.bytes to the whole log
// (remote and local) of remote-enabled partitions every interval.
func (s *Serve) remoteRetention(ctx context.Context, d *localtier.LogDir, interval time.Duration, m *remotetier.RetentionMetrics) error {
	wait := min(retention.DefaultInitialDelay, interval)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = interval
		rep, err := remotetier.RemoteRetention(ctx, s.bucket, d, remotetier.RetentionOptions{Now: s.o.Now, Metrics: m,
			Logger: s.log.With("component", "remote-retention")})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("remote retention pass failed", "err", err)
		}
		_ = rep
	}
}

// Reload re-reads the configuration (SIGHUP, POST /v1/admin/reload) and
// every topic's overrides from disk, and applies the broker-wide topic
// defaults and overrides to the partitions. Other settings need a restart.
func (s *Serve) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	d := s.LogDir()
	if d == nil {
		return errors.New("reload: the data dir is still being recovered")
	}
	cfg := s.cfg
	if s.o.Reload != nil {
		c, err := s.o.Reload()
		if err != nil {
			return fmt.Errorf("reload configuration: %w", err)
		}
		cfg = c
	}
	if err := d.ReloadTopicConfigs(cfg.TopicDefaults()); err != nil {
		return err
	}
	s.log.Info("reloaded topic configs", "topics", len(d.Topics()))
	return nil
}

// waitReady waits for recovery for at most ReadyWait (and ctx).
func (s *Serve) waitReady(ctx context.Context) error {
	select {
	case <-s.readyCh:
		return nil
	default:
	}
	t := time.NewTimer(s.o.ReadyWait)
	defer t.Stop()
	select {
	case <-s.readyCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return &notReadyError{why: s.notReady()}
	}
}

// notReadyError is a request refused because serve is not ready yet.
type notReadyError struct{ why error }

func (e *notReadyError) Error() string {
	return fmt.Sprintf("not ready: %v; retry shortly", e.why)
}

// RetryAfter makes the fetch layers answer 429 / Kafka throttle.
func (e *notReadyError) RetryAfter() time.Duration { return time.Second }

// Produce appends records to topic as `tiered produce` does and answers
// once they are as durable as the topic's flush settings promise: with
// Kafka's defaults (flush.messages and flush.ms unset) an append is
// acknowledged from the page cache, as Kafka acknowledges it (it survives
// a crash of the process, not of the machine); when the topic sets either
// one, the operator asked for fsync, and an append the policy did not
// flush yet is flushed before the answer.
func (s *Serve) Produce(ctx context.Context, topic string, in producer.Source, o producer.Options) (producer.Result, error) {
	if err := s.waitReady(ctx); err != nil {
		return producer.Result{}, err
	}
	d := s.LogDir()
	if o.AutoCreate && !s.settings.AutoCreateTopics {
		o.AutoCreate = false
	}
	if o.AutoCreatePartitions == 0 {
		o.AutoCreatePartitions = int(max(1, s.settings.NumPartitions))
	}
	if o.Now == nil {
		o.Now = s.o.Now
	}
	res, err := producer.Produce(d, topic, in, o)
	for _, p := range res.Partitions {
		s.local.appendedRecords.Add(float64(p.Records))
	}
	if err != nil {
		var ae *producer.AppendError
		if errors.As(err, &ae) {
			s.local.appendErrors.Inc()
		}
		return res, err
	}
	for _, p := range res.Partitions {
		l, err := d.Partition(topic, p.Partition)
		if err != nil {
			return res, err
		}
		cfg := l.Config()
		if p.Durable || (cfg.FlushMessages == math.MaxInt64 && cfg.FlushMs == math.MaxInt64) {
			continue
		}
		s.local.flushes.Inc()
		if err := l.Flush(); err != nil {
			s.local.flushErrors.Inc()
			return res, fmt.Errorf("flush %s-%d before acknowledging: %w", topic, p.Partition, err)
		}
	}
	return res, nil
}

// lateCatalog is the fetch service's catalog while the log dir recovers:
// requests wait for it (up to wait), then are refused with a retry delay.
type lateCatalog struct {
	ready <-chan struct{}
	wait  time.Duration
	state func() error
	cat   atomic.Pointer[fetchcache.CombinedCatalog]
}

func (c *lateCatalog) set(cat *fetchcache.CombinedCatalog) { c.cat.Store(cat) }

func (c *lateCatalog) get(ctx context.Context) (*fetchcache.CombinedCatalog, error) {
	if cat := c.cat.Load(); cat != nil {
		return cat, nil
	}
	t := time.NewTimer(c.wait)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	if cat := c.cat.Load(); cat != nil {
		return cat, nil
	}
	return nil, &notReadyError{why: c.state()}
}

func (c *lateCatalog) Topics(ctx context.Context) ([]fetchcache.TopicInfo, error) {
	cat, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return cat.Topics(ctx)
}

func (c *lateCatalog) Partition(ctx context.Context, topic string, partition int32) (fetchcache.Partition, error) {
	cat, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return cat.Partition(ctx, topic, partition)
}
