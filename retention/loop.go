package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/localtier"
)

// Broker-level settings of the retention loop (Kafka's names and defaults).
const (
	// CheckIntervalConfig is how often the loop runs a pass.
	CheckIntervalConfig = "log.retention.check.interval.ms"
	// DefaultCheckInterval is Kafka's default for log.retention.check.interval.ms.
	DefaultCheckInterval = 5 * time.Minute
	// DefaultInitialDelay is Kafka's InitialTaskDelayMs: the first pass runs
	// this long after start-up.
	DefaultInitialDelay = 30 * time.Second
)

// CheckInterval validates a log.retention.check.interval.ms value (Kafka:
// LONG, at least 1) and returns it as a duration.
func CheckInterval(ms int64) (time.Duration, error) {
	if ms < 1 {
		//lint:ignore ST1005 Kafka's wording for a refused config value, which operators grep for
		return 0, fmt.Errorf("Invalid value %d for configuration %s: Value must be at least 1", ms, CheckIntervalConfig)
	}
	if ms > int64(1<<63-1)/int64(time.Millisecond) {
		return time.Duration(1<<63 - 1), nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Metrics are the retention loop's Prometheus series.
type Metrics struct {
	deletedSegments *prometheus.CounterVec
	deletedBytes    *prometheus.CounterVec
	earlySegments   prometheus.Counter
	earliestOffset  *prometheus.GaugeVec
	passes          prometheus.Counter
	passErrors      prometheus.Counter
}

// NewMetrics registers the retention series on reg, every reason series at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		deletedSegments: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "deleted_segments_total", Help: "Segments deleted by retention, by the rule that deleted them."}, []string{"reason"}),
		deletedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "deleted_bytes_total", Help: "Bytes of segments deleted by retention, by the rule that deleted them."}, []string{"reason"}),
		earlySegments: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "size_beat_time_segments_total", Help: "Segments retention.bytes deleted while retention.ms would still have kept them."}),
		earliestOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "earliest_offset", Help: "Log start offset of each local partition after the last retention pass; a jump is the alert signal."}, []string{"topic", "partition"}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "passes_total", Help: "Retention passes run."}),
		passErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tiered", Subsystem: "retention",
			Name: "pass_errors_total", Help: "Retention passes that ended with an error."}),
	}
	for _, c := range []prometheus.Collector{m.deletedSegments, m.deletedBytes, m.earlySegments, m.earliestOffset, m.passes, m.passErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register retention metrics: %w", err)
		}
	}
	for _, r := range Reasons() {
		m.deletedSegments.WithLabelValues(string(r))
		m.deletedBytes.WithLabelValues(string(r))
	}
	return m, nil
}

// InitPartitions sets the earliest-offset gauge of every partition in dir, so
// the series exist from start-up.
func (m *Metrics) InitPartitions(dir *localtier.LogDir) {
	for _, name := range dir.Topics() {
		t, ok := dir.Topic(name)
		if !ok {
			continue
		}
		for p, l := range t.Partitions {
			m.earliestOffset.WithLabelValues(name, strconv.Itoa(p)).Set(float64(l.LogStartOffset()))
		}
	}
}

// Observe records a pass (a dry run changes no counter).
func (m *Metrics) Observe(rep PassReport, err error) {
	m.passes.Inc()
	if err != nil {
		m.passErrors.Inc()
	}
	if rep.DryRun {
		return
	}
	for _, s := range rep.Segments {
		m.deletedSegments.WithLabelValues(string(s.Reason)).Inc()
		m.deletedBytes.WithLabelValues(string(s.Reason)).Add(float64(s.SizeBytes))
		if s.SizeBeatTime && s.Reason == ReasonRetentionBytes {
			m.earlySegments.Inc()
		}
	}
	for _, p := range rep.Partitions {
		if p.Error == "" {
			m.earliestOffset.WithLabelValues(p.Topic, strconv.Itoa(int(p.Partition))).Set(float64(p.NewLogStartOffset))
		}
	}
}

// LoopOptions configure the periodic retention loop.
type LoopOptions struct {
	// Interval between passes (log.retention.check.interval.ms); 0 means
	// DefaultCheckInterval.
	Interval time.Duration
	// InitialDelay before the first pass; 0 means DefaultInitialDelay, negative
	// means run the first pass at once.
	InitialDelay time.Duration
	// Now is the clock the policy uses; nil means time.Now.
	Now func() time.Time
	// After waits; nil means time.After. Tests inject a channel they control.
	After func(time.Duration) <-chan time.Time
	// Registerer receives the metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// Remote answers for remote-enabled topics; nil keeps their local segments.
	Remote RemoteLookup
	Logger *slog.Logger
}

// Loop runs a retention pass over a data dir every interval.
type Loop struct {
	dir     *localtier.LogDir
	opts    LoopOptions
	metrics *Metrics
}

// NewLoop registers the metrics (every series at its start value) and returns
// a loop ready to Run.
func NewLoop(dir *localtier.LogDir, opts LoopOptions) (*Loop, error) {
	if opts.Interval == 0 {
		opts.Interval = DefaultCheckInterval
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("retention loop: interval %v must be positive", opts.Interval)
	}
	if opts.InitialDelay == 0 {
		opts.InitialDelay = DefaultInitialDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := NewMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m.InitPartitions(dir)
	return &Loop{dir: dir, opts: opts, metrics: m}, nil
}

// RunOnce runs one pass now and records it in the metrics.
func (l *Loop) RunOnce(ctx context.Context) (PassReport, error) {
	rep, err := RunOnce(ctx, l.dir, PassOptions{Now: l.opts.Now, Remote: l.opts.Remote, Logger: l.opts.Logger})
	l.metrics.Observe(rep, err)
	if err != nil && !errors.Is(err, context.Canceled) {
		l.opts.Logger.Error("retention pass failed", "err", err)
	}
	return rep, err
}

// Run passes after the initial delay and then every interval until ctx is
// done, and returns nil then. A failing pass is logged and counted; the loop
// goes on.
func (l *Loop) Run(ctx context.Context) error {
	wait := l.opts.InitialDelay
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-l.opts.After(wait):
			}
		} else if ctx.Err() != nil {
			return nil
		}
		_, _ = l.RunOnce(ctx)
		wait = l.opts.Interval
	}
}
