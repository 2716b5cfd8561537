package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
)

var sidecarCmd = &command{
	name:    "sidecar",
	summary: "beside a Kafka broker: upload its rolled segments to a bucket, continuously",
	help: `usage: tiered sidecar --kafka-log-dir DIR --bucket URL [--bootstrap-server H:P] [--http ADDR]
                      [--interval DURATION] [--concurrency N] [--rate BYTES/s] [--gc-grace DURATION]
                      [--manifest-version N]

Runs beside a Kafka broker until SIGINT or SIGTERM. Every --interval it lists the
broker's log dir (one entry of its log.dirs), and uploads each partition's rolled segments
whose offsets are all below the high watermark in replication-offset-checkpoint, committing
them to the partition's manifest in the bucket. It only reads the log dir: nothing is ever
written, renamed or locked there. A segment the broker deletes or replaces while it is
being uploaded is skipped (tiered_uploader_segments_gone_total) and never half-committed.
Orphaned objects (attempts that crashed or lost a race) are garbage-collected once older
than --gc-grace.

With --bootstrap-server, the broker (its id from the log dir's meta.properties: node.id or
broker.id) is asked on every pass which partitions it leads, and only those are uploaded,
so the sidecars of a cluster split the work. Segments a new leader cut at other offsets are
reconciled with the manifest: no gap, no offset twice.

Flags:
  --kafka-log-dir DIR      the broker's log dir (required)
  --bucket URL             file:///dir, mem://name[/prefix] or
                           s3://bucket[/prefix]?endpoint=...&region=...&path_style=true (required)
  --bootstrap-server H:P   the broker's Kafka listener, to upload only the partitions it leads
  --http ADDR              serve /metrics (Prometheus) and /healthz on ADDR (e.g. :9108)
  --interval DURATION      how often to look for rolled segments (default 10s)
  --concurrency N          segments uploaded at once (default 4)
  --rate BYTES/s           throttle the bytes stored per second (default unlimited)
  --gc-grace DURATION      age from which unreferenced objects are deleted (default 1h)
  --manifest-version N     newest manifest format to write (default 2); 1 stores one object
                           per index, readable by releases before format 2 (rolling upgrades)

Example:
  tiered sidecar --kafka-log-dir /var/lib/kafka/data --bucket 's3://logs/prod?region=eu-west-1' \
      --bootstrap-server localhost:9092 --http :9108
`,
	run: runSidecar,
}

func runSidecar(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("sidecar")
	logDir := fs.String("kafka-log-dir", "", "")
	bucketURL := fs.String("bucket", "", "")
	bootstrap := fs.String("bootstrap-server", "", "")
	httpAddr := fs.String("http", "", "")
	interval := fs.Duration("interval", remotetier.DefaultInterval, "")
	concurrency := fs.Int("concurrency", remotetier.DefaultConcurrency, "")
	rateFlag := fs.String("rate", "0", "")
	grace := fs.Duration("gc-grace", remotetier.DefaultGCGrace, "")
	manifestVersion := fs.Int("manifest-version", manifest.Version, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	switch {
	case *logDir == "":
		return usagef("missing required flag --kafka-log-dir")
	case *bucketURL == "":
		return usagef("missing required flag --bucket")
	case *interval <= 0:
		return usagef("--interval %v must be positive", *interval)
	case *grace <= 0:
		return usagef("--gc-grace %v must be positive", *grace)
	case *concurrency < 1 || *concurrency > 256:
		return usagef("--concurrency %d must be from 1 to 256", *concurrency)
	}
	if err := checkManifestVersion(*manifestVersion); err != nil {
		return err
	}
	bps, err := parseByteRate(*rateFlag)
	if err != nil {
		return usagef("--rate: %v", err)
	}
	view, err := localtier.OpenBrokerView(vfs.Default, *logDir)
	if err != nil {
		return err
	}
	src := remotetier.NewBrokerSource(view, vfs.Default)
	if *bootstrap != "" {
		id, err := brokerID(*logDir)
		if err != nil {
			return err
		}
		leads, closeLeads, err := leaderLookup(ctx, *bootstrap, id)
		if err != nil {
			return err
		}
		defer closeLeads()
		src.Leads = leads
	}
	b, err := openReadBucket(ctx, *bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mb := bucketWithMetrics(b, reg)
	logger := slog.New(slog.NewTextHandler(r.Stderr, nil))
	u, err := remotetier.NewUploader(mb, src, remotetier.Options{Concurrency: *concurrency, BytesPerSecond: bps,
		ManifestVersion: *manifestVersion, Interval: *interval, Registerer: reg, Logger: logger, GCInterval: *grace / 2, GCGrace: *grace, Now: r.Now})
	if err != nil {
		return err
	}
	health := &sidecarHealth{started: r.now()}
	var srv *http.Server
	var srvErr chan error
	if *httpAddr != "" {
		ln, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			return fmt.Errorf("--http %s: %w", *httpAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", health.serve)
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		srvErr = make(chan error, 1)
		go func() { srvErr <- srv.Serve(ln) }()
		logger.Info("sidecar serving", "addr", ln.Addr().String())
	}
	logger.Info("sidecar started", "kafka_log_dir", *logDir, "bucket", shownURL(*bucketURL), "interval", *interval)
	err = runSidecarLoop(ctx, u, *interval, health, logger)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		if serr := <-srvErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	logger.Info("sidecar stopped")
	return err
}

// runSidecarLoop runs upload passes (and, every half grace period, garbage
// collection, done by the uploader's Run) until ctx is done.
func runSidecarLoop(ctx context.Context, u *remotetier.Uploader, interval time.Duration, health *sidecarHealth, logger *slog.Logger) error {
	for {
		rep, err := u.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		health.record(rep, err)
		if err != nil {
			logger.Warn("upload pass failed", "err", oneLine(err.Error()))
		} else if rep.UploadedSegments+rep.ReplacedSegments > 0 {
			logger.Info("upload pass", "committed_segments", rep.UploadedSegments, "replaced_segments", rep.ReplacedSegments,
				"bytes", rep.UploadedBytes, "commits", rep.Commits, "lag_segments", rep.LagSegments)
		}
		if gerr := u.MaybeGC(ctx); gerr != nil && ctx.Err() == nil {
			logger.Warn("garbage collection failed", "err", oneLine(gerr.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// sidecarHealth is what /healthz reports: 200 once a pass succeeded and
// while the last one did, 503 otherwise.
type sidecarHealth struct {
	mu       sync.Mutex
	started  time.Time
	passes   int
	lastErr  string
	lastOK   time.Time
	lagSegs  int
	lagBytes int64
}

func (h *sidecarHealth) record(rep remotetier.Report, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.passes++
	h.lagSegs, h.lagBytes = rep.LagSegments, rep.LagBytes
	if err != nil {
		h.lastErr = oneLine(err.Error())
		return
	}
	h.lastErr, h.lastOK = "", time.Now()
}

func (h *sidecarHealth) serve(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	status := http.StatusOK
	state := "ok"
	if h.passes == 0 {
		state = "starting"
	} else if h.lastErr != "" {
		status, state = http.StatusServiceUnavailable, "failing"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": state, "passes": h.passes, "last_error": h.lastErr,
		"lag_segments": h.lagSegs, "lag_bytes": h.lagBytes})
}

// brokerID reads node.id (KRaft) or broker.id (ZooKeeper) from the log
// dir's meta.properties.
func brokerID(dir string) (int32, error) {
	path := filepath.Join(dir, "meta.properties")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("--bootstrap-server needs the broker id: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if k = strings.TrimSpace(k); k == "node.id" || k == "broker.id" {
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || id < 0 {
				return 0, fmt.Errorf("%s: %s=%q is not a broker id", path, k, v)
			}
			return int32(id), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has neither node.id nor broker.id", path)
}

// leaderLookup returns a function asking the cluster which partitions the
// broker id leads. It checks the broker answers before returning.
func leaderLookup(ctx context.Context, bootstrap string, id int32) (func(context.Context) (map[checkpoint.TopicPartition]bool, error), func(), error) {
	if _, _, err := net.SplitHostPort(bootstrap); err != nil {
		return nil, nil, usagef("--bootstrap-server %q is not host:port", bootstrap)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequestRetries(1), kgo.DialTimeout(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("--bootstrap-server %s: %w", bootstrap, err)
	}
	leads := func(ctx context.Context) (map[checkpoint.TopicPartition]bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		// A fresh Metadata request every pass (kadm's Metadata may answer
		// from the client's cache, which would miss a leader change).
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("metadata from %s: %w", bootstrap, err)
		}
		out := map[checkpoint.TopicPartition]bool{}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 || t.Topic == nil {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader == id {
					out[checkpoint.TopicPartition{Topic: *t.Topic, Partition: p.Partition}] = true
				}
			}
		}
		return out, nil
	}
	if _, err := leads(ctx); err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("--bootstrap-server: %w", err)
	}
	return leads, cl.Close, nil
}
