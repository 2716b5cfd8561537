package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/localtier"
)

// NewRegistry returns the one registry a daemon's subsystems register on,
// with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewLogger returns the slog logger c asks for (text or json, at c.Level)
// writing to w.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		level = slog.LevelInfo
	}
	o := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// localMetrics are the tiered_localtier_* series of serve's log dir: the
// partitions, segments and bytes on local disk (read from the log dir at
// scrape time) and what the HTTP API appended and flushed.
type localMetrics struct {
	mu  sync.Mutex
	dir *localtier.LogDir // nil until recovery finished

	recovering     atomic.Bool
	partitions     *prometheus.Desc
	segments       *prometheus.Desc
	sizeBytes      *prometheus.Desc
	recoveringDesc *prometheus.Desc
	openFiles      *prometheus.Desc
	fileReopens    *prometheus.Desc
	fileEvictions  *prometheus.Desc
	reopenErrors   *prometheus.Desc

	appendedRecords prometheus.Counter
	appendedBytes   prometheus.Counter
	appendErrors    prometheus.Counter
	flushes         prometheus.Counter
	flushErrors     prometheus.Counter
	recoverySeconds prometheus.Gauge
}

func newLocalMetrics(reg prometheus.Registerer) (*localMetrics, error) {
	name := func(n string) string { return prometheus.BuildFQName("tiered", "localtier", n) }
	m := &localMetrics{
		partitions:     prometheus.NewDesc(name("partitions"), "Partitions in the local log dir.", nil, nil),
		segments:       prometheus.NewDesc(name("segments"), "Segments on local disk, active ones included.", nil, nil),
		sizeBytes:      prometheus.NewDesc(name("size_bytes"), "Bytes of segment logs on local disk.", nil, nil),
		recoveringDesc: prometheus.NewDesc(name("recovering"), "1 while the log dir is being recovered at start-up.", nil, nil),
		openFiles: prometheus.NewDesc(name("open_files"),
			"File descriptors the log dir's partitions hold (bounded by localtier.max_open_files).", nil, nil),
		fileReopens: prometheus.NewDesc(name("file_reopens_total"),
			"Segment and index files reopened on demand after the open-file table closed them.", nil, nil),
		fileEvictions: prometheus.NewDesc(name("file_evictions_total"),
			"Descriptors the open-file table closed to stay under localtier.max_open_files.", nil, nil),
		reopenErrors: prometheus.NewDesc(name("file_reopen_errors_total"),
			"Reopens of closed segment and index files that failed (the operation failed with them).", nil, nil),
		appendedRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: name("appended_records_total"),
			Help: "Records appended through the HTTP API."}),
		appendedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: name("appended_bytes_total"),
			Help: "Record batch bytes appended through the HTTP API."}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: name("append_errors_total"),
			Help: "Appends through the HTTP API that failed after validation (storage errors)."}),
		flushes: prometheus.NewCounter(prometheus.CounterOpts{Name: name("flushes_total"),
			Help: "Flushes serve made before acknowledging appends to topics with a finite flush.messages or flush.ms."}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: name("flush_errors_total"),
			Help: "Failed flushes (periodic flush.ms flushes and acknowledgement flushes)."}),
		recoverySeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("recovery_duration_seconds"),
			Help: "How long opening and recovering the log dir took at start-up."}),
	}
	m.recovering.Store(true)
	for _, c := range []prometheus.Collector{m, m.appendedRecords, m.appendedBytes, m.appendErrors, m.flushes, m.flushErrors, m.recoverySeconds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register localtier metrics: %w", err)
		}
	}
	return m, nil
}

func (m *localMetrics) setDir(d *localtier.LogDir) {
	m.mu.Lock()
	m.dir = d
	m.mu.Unlock()
	m.recovering.Store(false)
}

// Describe implements prometheus.Collector.
func (m *localMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.partitions
	ch <- m.segments
	ch <- m.sizeBytes
	ch <- m.recoveringDesc
	ch <- m.openFiles
	ch <- m.fileReopens
	ch <- m.fileEvictions
	ch <- m.reopenErrors
}

// Collect implements prometheus.Collector.
func (m *localMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	d := m.dir
	m.mu.Unlock()
	var parts, segs int
	var size int64
	var files localtier.FileTableStats
	if d != nil {
		parts, segs, size = localUsage(d)
		files, _, _ = d.OpenFiles()
	}
	rec := 0.0
	if m.recovering.Load() {
		rec = 1
	}
	ch <- prometheus.MustNewConstMetric(m.partitions, prometheus.GaugeValue, float64(parts))
	ch <- prometheus.MustNewConstMetric(m.segments, prometheus.GaugeValue, float64(segs))
	ch <- prometheus.MustNewConstMetric(m.sizeBytes, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(m.recoveringDesc, prometheus.GaugeValue, rec)
	ch <- prometheus.MustNewConstMetric(m.openFiles, prometheus.GaugeValue, float64(files.Open))
	ch <- prometheus.MustNewConstMetric(m.fileReopens, prometheus.CounterValue, float64(files.Reopens))
	ch <- prometheus.MustNewConstMetric(m.fileEvictions, prometheus.CounterValue, float64(files.Evictions))
	ch <- prometheus.MustNewConstMetric(m.reopenErrors, prometheus.CounterValue, float64(files.Failed))
}

// localUsage counts the partitions, segments and bytes of d.
func localUsage(d *localtier.LogDir) (parts, segs int, size int64) {
	for _, name := range d.Topics() {
		t, ok := d.Topic(name)
		if !ok {
			continue
		}
		for _, l := range t.Partitions {
			parts++
			segs += len(l.Segments())
			size += l.Size()
		}
	}
	return parts, segs, size
}
