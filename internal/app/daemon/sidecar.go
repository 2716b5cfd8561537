package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/objstore"
)

// SidecarOptions configure NewSidecar.
type SidecarOptions struct {
	// Config is the validated configuration (config.ProcessSidecar).
	Config   *config.Config
	Logger   *slog.Logger
	Registry *prometheus.Registry // nil: NewRegistry()
	Now      func() time.Time     // nil: time.Now
}

// Sidecar is `tiered sidecar`: beside a Kafka broker, it uploads the rolled
// segments of the broker's log dir (sidecar.kafka_log_dir, only ever read)
// that lie wholly below the high watermark, commits them to the manifests,
// and collects orphans after uploader.gc_grace. Each pass reads the
// broker's metadata (sidecarMeta: leaders, the broker's retention, topic
// configs, deletions): it uploads only the partitions its broker leads when
// that is known, applies the sidecar.topics policy's remote retention
// (remotetier.Options.RemoteRetention), and records what the broker
// deleted before upload as gaps (the uploader's loss alarms).
// Its HTTP listener (http.addr; none when empty) is every daemon's:
// /metrics, /healthz (200 while it runs) and /readyz (200 once an upload
// pass succeeded and while the latest one did; 503 with the pass's error
// otherwise); it serves no records.
type Sidecar struct {
	base
	bucket   objstore.Bucket
	meta     *sidecarMeta
	uploader *remotetier.Uploader
	server   *server.Server // nil without http.addr
	passes   passHealth
}

// NewSidecar opens the broker's log dir (read only), asks the cluster which
// partitions the broker leads when sidecar.bootstrap_server is set, opens
// and checks the bucket, and binds the HTTP listener. Close it if Run is
// never called.
func NewSidecar(ctx context.Context, o SidecarOptions) (_ *Sidecar, err error) {
	b, err := newBase("sidecar", o.Config, o.Logger, o.Registry, false)
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	s := &Sidecar{base: b}
	defer func() {
		if err != nil {
			_ = s.close()
		}
	}()
	view, err := localtier.OpenBrokerView(vfs.Default, cfg.Sidecar.KafkaLogDir)
	if err != nil {
		return nil, err
	}
	src := remotetier.NewBrokerSource(view, vfs.Default)
	pol, err := cfg.Sidecar.Policy()
	if err != nil {
		return nil, err
	}
	src.Tiered = pol.Tiered
	if !pol.HasRules() {
		s.log.Warn("no sidecar.topics rules: every non-internal topic is tiered and nothing is deleted remotely; set sidecar.topics (or --topics) to choose",
			"kafka_log_dir", cfg.Sidecar.KafkaLogDir)
	}
	// The broker's metadata (bootstrap server, else the KRaft metadata log,
	// else partition.metadata; remotetier/brokermeta) and node id give each
	// pass its leaders, the broker's retention and the topics' configs.
	nodeID, err := optionalBrokerID(cfg.Sidecar.KafkaLogDir)
	if err != nil {
		return nil, err
	}
	if cfg.Sidecar.BootstrapServer != "" && nodeID < 0 {
		return nil, fmt.Errorf("sidecar.bootstrap_server needs the broker id: %s has no meta.properties", cfg.Sidecar.KafkaLogDir)
	}
	msrc, err := brokermeta.Open(ctx, brokermeta.Options{LogDir: cfg.Sidecar.KafkaLogDir, BootstrapServer: cfg.Sidecar.BootstrapServer, NodeID: nodeID})
	if err != nil && cfg.Sidecar.BootstrapServer != "" {
		return nil, fmt.Errorf("sidecar.bootstrap_server: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("broker metadata: %w", err)
	}
	s.meta = &sidecarMeta{src: msrc, nodeID: nodeID, log: s.log}
	if _, kr := msrc.(*brokermeta.KRaftSource); !kr {
		// A bootstrap server's listing never proves a topic deleted by
		// its absence; the broker's own KRaft image does (liveTopics).
		if fi, err := os.Stat(filepath.Join(cfg.Sidecar.KafkaLogDir, kraft.MetadataDir)); err == nil && fi.IsDir() {
			s.meta.image = &brokermeta.KRaftSource{LogDir: cfg.Sidecar.KafkaLogDir, NodeID: nodeID}
		}
	}
	if _, err := s.meta.leads(ctx); err != nil {
		return nil, err
	}
	src.Leads, src.Retention, src.Compacted, src.TopicID = s.meta.leads, s.meta.retention, s.meta.compacted, s.meta.topicID
	if nodeID < 0 {
		s.log.Warn("no meta.properties in the broker's log dir: leadership unknown, every partition is uploaded and remote retention counts remote segments only",
			"kafka_log_dir", cfg.Sidecar.KafkaLogDir)
	}
	rmetrics, err := remotetier.NewRetentionMetrics(s.reg)
	if err != nil {
		return nil, err
	}
	if s.bucket, err = openBucket(ctx, cfg.Bucket); err != nil {
		return nil, err
	}
	// Topic identity: the broker's deletions mark topics deleted in the
	// bucket, and superseded lineages (deleted or re-created topics) are
	// removed after sidecar.deleted_topic_retention. Remote retention by the
	// policy runs in the same passes.
	uo := s.uploaderOptions(o.Now, s.passes.record)
	uo.RemoveLineages, uo.RemovesLineages = true, s.meta.removesLineages
	uo.DeletedTopicRetention = time.Duration(cfg.Sidecar.DeletedTopicRetention)
	uo.DeletedTopics = s.meta.deletedTopics
	uo.LiveTopics = s.meta.liveTopics
	uo.RemoteRetention, uo.RetentionMetrics = s.meta.remoteRule(pol), rmetrics
	if s.uploader, err = remotetier.NewUploader(objstore.WithMetrics(s.bucket, s.reg), src, uo); err != nil {
		return nil, err
	}
	if cfg.HTTP.Addr != "" {
		if s.server, err = s.listen(listenOptions{catalog: noRecords{}, ready: s.passes.ready}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// HTTPAddr is the bound HTTP address ("" without a listener).
func (s *Sidecar) HTTPAddr() string {
	if s.server == nil {
		return ""
	}
	if a := s.server.HTTPAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Registry is the registry every subsystem reports to.
func (s *Sidecar) Registry() *prometheus.Registry { return s.reg }

func (s *Sidecar) close() error {
	var errs []error
	if s.server != nil {
		errs = append(errs, s.server.Close())
	}
	if s.meta != nil {
		errs = append(errs, s.meta.src.Close())
	}
	if s.bucket != nil {
		errs = append(errs, s.bucket.Close())
	}
	return errors.Join(errs...)
}

// Close releases a Sidecar whose Run was never called.
func (s *Sidecar) Close() error { return s.close() }

// Run runs upload passes every uploader.interval (the uploader's own loop)
// and the HTTP listener until ctx ends, then stops: an upload in flight is
// abandoned (its objects are collected later), the listener finishes
// in-flight requests, all within shutdown_timeout. A listener that fails
// stops the sidecar with its error.
func (s *Sidecar) Run(ctx context.Context) error {
	s.log.Info("sidecar started", "kafka_log_dir", s.cfg.Sidecar.KafkaLogDir, "bucket", ShownURL(s.cfg.Bucket),
		"interval", s.cfg.Uploader.Interval, "bootstrap_server", s.cfg.Sidecar.BootstrapServer, "http", s.HTTPAddr())
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var srvErr chan error // nil without a listener: never ready
	if s.server != nil {
		srvErr = make(chan error, 1)
		go func() { srvErr <- s.server.Serve(runCtx) }()
	}
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		_ = s.uploader.Run(runCtx) // nil once runCtx ends; failed passes are logged and retried
	}()
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-srvErr:
		srvErr = nil
		s.log.Error("http listener failed; stopping", "err", runErr)
	}
	stop()
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	done := make(chan error, 1)
	go func() {
		<-upDone
		var errs []error
		if srvErr != nil {
			errs = append(errs, <-srvErr)
		}
		errs = append(errs, s.close()) // the served listener is closed already
		done <- errors.Join(errs...)
	}()
	return s.awaitShutdown(done, deadline, runErr, "the upload pass abandoned (its objects are collected later)")
}

// passHealth follows the upload passes for /readyz.
type passHealth struct {
	mu      sync.Mutex
	passes  int
	lastErr error
}

// record is the uploader's OnPass.
func (h *passHealth) record(_ remotetier.Report, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.passes++
	h.lastErr = err
}

// ready is nil once a pass succeeded and while the latest one did.
func (h *passHealth) ready(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.passes == 0:
		return errors.New("no upload pass finished yet")
	case h.lastErr != nil:
		return fmt.Errorf("the last upload pass failed: %s", strings.Join(strings.Fields(h.lastErr.Error()), " "))
	}
	return nil
}

// noRecords is the sidecar's catalog: its HTTP listener serves /metrics and
// the probes, no records (read them through tiered fetch or serve).
type noRecords struct{}

func (noRecords) Topics(context.Context) ([]fetchcache.TopicInfo, error) { return nil, nil }

func (noRecords) Partition(_ context.Context, topic string, partition int32) (fetchcache.Partition, error) {
	return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
}
