package groups

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Results of tiered_fetch_group_puts_total.
const (
	PutOK       = "ok"
	PutConflict = "conflict" // lost the conditional PUT to another writer
	PutRefused  = "refused"  // read-only bucket or access denied
	PutError    = "error"
)

var putResults = []string{PutOK, PutConflict, PutRefused, PutError}

var states = []string{StateEmpty, StatePreparingRebalance, StateCompletingRebalance, StateStable}

// Metrics are the coordinator's series (subsystem fetch), all present from
// creation at 0.
type Metrics struct {
	groups     *prometheus.GaugeVec // tiered_fetch_groups{state}
	members    prometheus.Gauge     // tiered_fetch_group_members
	rebalances prometheus.Counter   // tiered_fetch_group_rebalances_total
	commit     prometheus.Histogram // tiered_fetch_group_commit_duration_seconds
	puts       *prometheus.CounterVec
	putLatency prometheus.Histogram
}

// NewMetrics creates the series and registers them with reg (nil: not
// registered; a second registration reuses the first's collectors).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	lat := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &Metrics{
		groups: promreg.RegisterOrReuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tiered_fetch_groups",
			Help: "Consumer groups this fetch replica coordinates, by state (Kafka's names).",
		}, []string{"state"})),
		members: promreg.RegisterOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tiered_fetch_group_members",
			Help: "Members of the consumer groups this fetch replica coordinates.",
		})),
		rebalances: promreg.RegisterOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_group_rebalances_total",
			Help: "Rebalances started (a group entering PreparingRebalance).",
		})),
		commit: promreg.RegisterOrReuse(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tiered_fetch_group_commit_duration_seconds",
			Help:    "Time from an OffsetCommit's arrival to its offsets being durable in the bucket.",
			Buckets: lat,
		})),
		puts: promreg.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_group_puts_total",
			Help: "Conditional PUTs of group objects, by result.",
		}, []string{"result"})),
		putLatency: promreg.RegisterOrReuse(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tiered_fetch_group_put_duration_seconds",
			Help:    "Duration of one conditional PUT of a group object.",
			Buckets: lat,
		})),
	}
	for _, s := range states {
		m.groups.WithLabelValues(s)
	}
	for _, r := range putResults {
		m.puts.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) observePut(err error, d time.Duration) {
	r := PutOK
	switch {
	case err == nil:
	case objstore.IsPreconditionFailed(err):
		r = PutConflict
	case errors.Is(err, objstore.ErrReadOnly) || errors.Is(err, objstore.ErrAccessDenied):
		r = PutRefused
	default:
		r = PutError
	}
	m.puts.WithLabelValues(r).Inc()
	m.putLatency.Observe(d.Seconds())
}
