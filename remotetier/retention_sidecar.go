package remotetier

import (
	"context"
	"fmt"

	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// RetentionRule is one partition's remote retention in the sidecar.
type RetentionRule struct {
	// Config holds the rules retention.Remote applies: retention.ms,
	// retention.bytes (the policy's remote values) and cleanup.policy
	// (without delete, nothing goes by time or size).
	Config topicconfig.Config
	// CountSource counts the source's segments that the remote tier does
	// not hold yet toward retention.bytes (Kafka's total log size). Only
	// the partition's leader sees the whole log; a sidecar that cannot
	// tell counts the remote segments alone, which never deletes more than
	// Kafka's rule would.
	CountSource bool
}

// retainPartition applies remote retention to p after its upload, on the
// manifest the uploader holds: planned over the committed segments (and,
// with CountSource, the source's segments past them), committed with a
// conditional root write, the objects deleted after. A lost race re-reads
// the root and plans again, so two sidecars never both delete: the loser
// finds the segments gone. The source's own files are never touched.
func (u *Uploader) retainPartition(ctx context.Context, p Partition, st *partState, rule RetentionRule, pr *PartitionReport) error {
	var local []retention.Segment
	if rule.CountSource {
		for _, s := range p.Segments {
			local = append(local, retention.Segment{BaseOffset: s.BaseOffset, LastOffset: s.LastOffset(), Size: s.Size, MaxTimestamp: s.MaxTimestamp})
		}
		// The active segment and what lies above the high watermark,
		// never deletable, count toward the log's size, and so does what
		// the listing skipped, each where it lies: only the source's
		// segments past the remote end are counted (remoteDecision), so a
		// segment the remote tier holds, below a DeleteRecords log start,
		// or while the high watermark is stale, is not counted twice.
		for _, s := range p.unlisted() {
			local = append(local, retention.Segment{BaseOffset: s.BaseOffset, LastOffset: max(s.NextOffset, s.BaseOffset) - 1, Size: s.Size, MaxTimestamp: -1, Active: true})
		}
	}
	opts := RetentionOptions{Prefix: u.opts.Prefix, Now: u.opts.Now, Metrics: u.opts.RetentionMetrics}
	for attempt := 1; ; attempt++ {
		step, err := retentionStep(ctx, u.store, st.m, st.etag, local, rule.Config, 0, opts, u.logger)
		if objstore.IsPreconditionFailed(err) && attempt < 4*u.opts.Retry.Attempts {
			u.metrics.conflicts.Inc()
			pr.CommitConflicts++
			if rerr := u.reload(ctx, p, st); rerr != nil {
				return rerr
			}
			continue
		}
		if err != nil {
			u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
			return fmt.Errorf("remote retention: %w", err)
		}
		if step.commit != nil {
			st.m, st.etag = step.commit.Root, step.etag
			pr.Commits++
			r := step.pr
			pr.Retention = &r
		}
		return nil
	}
}
