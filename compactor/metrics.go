package compactor

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
)

// metrics are the tiered_compactor_* series. Every one exists at 0 from
// the moment the cleaner is made.
type metrics struct {
	runs           prometheus.Counter
	failures       prometheus.Counter
	bytesRead      prometheus.Counter
	bytesWritten   prometheus.Counter
	recordsKept    prometheus.Counter
	recordsDropped prometheus.Counter
	keyless        prometheus.Counter
	uncleanable    prometheus.Gauge
	maxDirtyRatio  prometheus.Gauge
	maxDelay       prometheus.Gauge
	bufferUtil     prometheus.Gauge
	lastDuration   prometheus.Gauge

	mu      sync.Mutex
	lastRun time.Time
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) *metrics {
	m := &metrics{lastRun: now()}
	name := func(n string) prometheus.Opts {
		return prometheus.Opts{Namespace: "tiered", Subsystem: "compactor", Name: n}
	}
	counter := func(n, help string) prometheus.Counter {
		o := name(n)
		o.Help = help
		return promreg.RegisterOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts(o)))
	}
	gauge := func(n, help string) prometheus.Gauge {
		o := name(n)
		o.Help = help
		return promreg.RegisterOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts(o)))
	}
	m.runs = counter("runs_total", "Cleaning runs completed (one per log cleaned).")
	m.failures = counter("failures_total", "Cleaning runs that failed.")
	m.bytesRead = counter("bytes_read_total", "Bytes the cleaner read, building offset maps and copying.")
	m.bytesWritten = counter("bytes_written_total", "Bytes the cleaner wrote to cleaned segments.")
	m.recordsKept = counter("records_kept_total", "Records copied into cleaned segments.")
	m.recordsDropped = counter("records_dropped_total", "Records removed by cleaning.")
	m.keyless = counter("keyless_records_total", "Records without a key found (and removed) in compacted logs.")
	m.uncleanable = gauge("uncleanable_partitions", "Partitions marked uncleanable after a cleaning failure.")
	m.maxDirtyRatio = gauge("max_dirty_ratio", "Largest dirty ratio (dirty bytes / clean+dirty bytes) of any compacted log at the last selection.")
	m.maxDelay = gauge("max_compaction_delay_seconds", "Largest time any log's dirty part has waited past max.compaction.lag.ms.")
	m.bufferUtil = gauge("buffer_utilization_ratio", "Share of the offset map's slots used by the last cleaning run.")
	m.lastDuration = gauge("last_run_duration_seconds", "Duration of the last cleaning run.")
	o := name("seconds_since_last_run")
	o.Help = "Seconds since the cleaner last finished a run (or started)."
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts(o), func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return now().Sub(m.lastRun).Seconds()
	})
	if reg != nil {
		// The newest cleaner's clock wins.
		reg.Unregister(since)
		if err := reg.Register(since); err != nil {
			panic(err)
		}
	}
	return m
}

func (m *metrics) ranAt(t time.Time) {
	m.mu.Lock()
	m.lastRun = t
	m.mu.Unlock()
}
