package daemon

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tiered/tiered/fetchcache"
)

// Status is a snapshot of serve for `tiered demo`'s status line.
type Status struct {
	Ready bool
	// Local tier: segments and bytes on disk.
	LocalSegments int
	LocalBytes    int64
	// Remote tier: committed segments and their log bytes, over the
	// remote-enabled partitions.
	RemoteSegments int
	RemoteBytes    int64
	// Uploads is tiered_uploader_uploaded_segments_total.
	Uploads float64
	// CleanerRuns is tiered_compactor_runs_total.
	CleanerRuns float64
	// LocalDeletes is tiered_retention_deleted_segments_total, all reasons.
	LocalDeletes float64
	// CacheHits and CacheMisses are tiered_fetch_cache_{hits,misses}_total,
	// all tiers.
	CacheHits, CacheMisses float64
}

// CacheHitRatio is hits / (hits + misses), 0 without lookups.
func (st Status) CacheHitRatio() float64 {
	if st.CacheHits+st.CacheMisses == 0 {
		return 0
	}
	return st.CacheHits / (st.CacheHits + st.CacheMisses)
}

// Status reads the log dir, the remote manifests the catalog holds and the
// registry.
func (s *Serve) Status(ctx context.Context) (Status, error) {
	var st Status
	select {
	case <-s.readyCh:
		st.Ready = true
	default:
	}
	d := s.LogDir()
	if d != nil {
		_, st.LocalSegments, st.LocalBytes = localUsage(d)
		cat := fetchcache.NewCombinedCatalog(d, s.remote)
		for _, pl := range d.RemotePartitions(nil) {
			rp, err := cat.RemotePartition(ctx, pl.Topic, pl.Partition)
			if err != nil || rp == nil {
				continue // nothing of the topic's own lineage uploaded yet
			}
			sl, ok := rp.(fetchcache.SegmentLister)
			if !ok {
				continue
			}
			if _, err := rp.Offsets(ctx); err != nil { // refreshes the manifest when stale
				continue
			}
			segs, err := sl.Segments(ctx)
			if err != nil {
				continue
			}
			for _, sg := range segs {
				st.RemoteSegments += max(1, sg.SegmentCount)
				st.RemoteBytes += sg.SizeBytes
			}
		}
	}
	sums, err := sumMetrics(s.reg, "tiered_uploader_uploaded_segments_total", "tiered_compactor_runs_total",
		"tiered_retention_deleted_segments_total", "tiered_fetch_cache_hits_total", "tiered_fetch_cache_misses_total")
	if err != nil {
		return st, err
	}
	st.Uploads = sums["tiered_uploader_uploaded_segments_total"]
	st.CleanerRuns = sums["tiered_compactor_runs_total"]
	st.LocalDeletes = sums["tiered_retention_deleted_segments_total"]
	st.CacheHits = sums["tiered_fetch_cache_hits_total"]
	st.CacheMisses = sums["tiered_fetch_cache_misses_total"]
	return st, nil
}

// sumMetrics sums every series of each named counter or gauge.
func sumMetrics(g prometheus.Gatherer, names ...string) (map[string]float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !want[mf.GetName()] {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += metricValue(m)
		}
	}
	return out, nil
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}
