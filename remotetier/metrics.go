package remotetier

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds of tiered_uploader_errors_total.
const (
	ErrKindSource   = "source"   // listing or reading the local/broker log failed
	ErrKindCorrupt  = "corrupt"  // a segment or an index failed its checks
	ErrKindUpload   = "upload"   // a data object could not be stored
	ErrKindManifest = "manifest" // reading or writing a manifest failed
	ErrKindConflict = "conflict" // a segment overlaps committed offsets and cannot be cut
	ErrKindDelete   = "delete"   // deleting an unreferenced object failed (it is left to GC)
)

// ErrorKinds lists every error kind label value.
var ErrorKinds = []string{ErrKindSource, ErrKindCorrupt, ErrKindUpload, ErrKindManifest, ErrKindConflict, ErrKindDelete}

// Metrics are the uploader's Prometheus series:
//
//	tiered_uploader_lag_bytes, tiered_uploader_lag_segments      (gauges, all partitions)
//	tiered_uploader_uploaded_bytes_total                          (every object byte stored)
//	tiered_uploader_uploaded_segments_total                       (segments committed)
//	tiered_uploader_errors_total{kind}
//	tiered_uploader_commits_total                                 (root manifests written)
//	tiered_uploader_commit_conflicts_total                        (lost conditional writes)
//	tiered_uploader_segments_gone_total                           (deleted or replaced mid-upload)
//	tiered_uploader_replaced_segments_total                       (cleaned segments swapped in)
//	tiered_uploader_deleted_objects_total                         (unreferenced objects deleted)
//	tiered_uploader_passes_total
//
// Requests per committed segment are objstore's operations_total over
// uploaded_segments_total.
type Metrics struct {
	lagBytes, lagSegments *prometheus.GaugeVec
	uploadedBytes         prometheus.Counter
	uploadedSegments      prometheus.Counter
	errors                *prometheus.CounterVec
	commits               prometheus.Counter
	conflicts             prometheus.Counter
	gone                  prometheus.Counter
	replaced              prometheus.Counter
	deleted               prometheus.Counter
	passes                prometheus.Counter
}

// NewMetrics registers the uploader series on reg (nil: a private
// registry), every series at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		lagBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tiered_uploader_lag_bytes",
			Help: "Bytes of rolled segments below the high watermark not yet committed to the remote tier."}, nil),
		lagSegments: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tiered_uploader_lag_segments",
			Help: "Rolled segments below the high watermark not yet committed to the remote tier."}, nil),
		uploadedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_uploaded_bytes_total",
			Help: "Bytes stored in the object store by the uploader (segment logs and indexes, all attempts)."}),
		uploadedSegments: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_uploaded_segments_total",
			Help: "Segments committed to a manifest."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tiered_uploader_errors_total",
			Help: "Uploader errors, by kind."}, []string{"kind"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_commits_total",
			Help: "Root manifests written (each may commit several segments)."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_commit_conflicts_total",
			Help: "Conditional manifest writes lost to another writer (re-read and reconciled)."}),
		gone: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_segments_gone_total",
			Help: "Segments deleted or replaced by the log owner while being uploaded; skipped, never half-uploaded."}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_replaced_segments_total",
			Help: "Cleaned segments committed in place of the committed range they rewrote."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_deleted_objects_total",
			Help: "Objects the uploader deleted: superseded by its own commit, or its own attempts that were never committed."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tiered_uploader_passes_total",
			Help: "Upload passes run."}),
	}
	for _, c := range []prometheus.Collector{m.lagBytes, m.lagSegments, m.uploadedBytes, m.uploadedSegments, m.errors,
		m.commits, m.conflicts, m.gone, m.replaced, m.deleted, m.passes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.lagBytes.WithLabelValues().Set(0)
	m.lagSegments.WithLabelValues().Set(0)
	for _, k := range ErrorKinds {
		m.errors.WithLabelValues(k)
	}
	return m, nil
}
