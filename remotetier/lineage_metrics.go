package remotetier

import "github.com/prometheus/client_golang/prometheus"

// lineageMetrics are the uploader's topic-identity series, beside Metrics:
//
//	tiered_uploader_refused_partitions_total   (not the topic's current lineage: not uploaded)
//	tiered_uploader_removed_lineages_total     (superseded lineages removed from the bucket)
//	tiered_uploader_reconciled_topics_total    (marked deleted by the broker's live topics, no record reporting it)
type lineageMetrics struct {
	refused    prometheus.Counter
	removed    prometheus.Counter
	reconciled prometheus.Counter
}

// newLineageMetrics registers the series on reg (nil: a private registry),
// at 0.
func newLineageMetrics(reg prometheus.Registerer) (*lineageMetrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &lineageMetrics{
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_refused_partitions_total",
			Help: "Partitions not uploaded in a pass because their topic ID is not the topic's current lineage (a stale directory of a deleted or re-created topic)."}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_removed_lineages_total",
			Help: "Superseded topic lineages (deleted or re-created topics' old data) removed from the bucket."}),
		reconciled: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_reconciled_topics_total",
			Help: "Topics marked deleted because the broker's KRaft image no longer holds their current lineage (deleted or re-created while no sidecar ran; no record reported it)."}),
	}
	for _, c := range []prometheus.Collector{m.refused, m.removed, m.reconciled} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
