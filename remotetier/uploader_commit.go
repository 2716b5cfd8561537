package remotetier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// commit commits done (in offset order) to the partition's manifest: replaced
// ranges and appended segments in one root write, conditional on the root
// it was computed from. A lost race re-reads the root and reconciles each
// segment again: those now committed by someone else, or overlapping what
// is committed, are dropped and their objects deleted. An error of unknown
// outcome re-reads the root to learn whether the write landed. It returns
// the segments committed.
func (u *Uploader) commit(ctx context.Context, p Partition, st *partState, done []uploaded, pr *PartitionReport) ([]uploaded, error) {
	// ambiguous is set once a root write failed without telling whether it
	// landed: from then on no dropped attempt is deleted (one may be
	// committed after all); garbage collection decides later.
	ambiguous := false
	for attempt := 1; ; attempt++ {
		var dropped []uploaded
		c, kept, err := u.buildCommit(ctx, p, st.m, done, &dropped)
		if !ambiguous {
			u.deleteDropped(ctx, st.m, dropped)
		}
		if err != nil {
			u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
			return nil, err
		}
		done = kept
		if len(kept) == 0 {
			return nil, nil
		}
		prevGen := st.m.Generation
		prev := st.m
		etag, err := u.store.write(ctx, c, prevGen, st.etag)
		if err == nil {
			st.m, st.etag = c.Root, etag
			pr.Commits++
			u.committed(kept)
			u.recordLost(p, st, prev, c.Root, pr)
			u.deleteKeys(ctx, c.Unreferenced)
			return kept, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if objstore.IsPreconditionFailed(err) {
			u.metrics.conflicts.Inc()
			pr.CommitConflicts++
			u.logger.Info("manifest changed under the commit; re-reading", "topic", p.Topic, "partition", p.Partition)
			if rerr := u.reload(ctx, p, st); rerr != nil {
				return nil, rerr
			}
			if attempt >= 4*u.opts.Retry.Attempts {
				return nil, fmt.Errorf("commit: lost %d races in a row: %w", attempt, err)
			}
			continue
		}
		u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
		ambiguous = true
		if attempt >= u.opts.Retry.Attempts {
			return nil, err
		}
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return nil, err
		}
		// The write may have landed: re-read and see.
		if rerr := u.reload(ctx, p, st); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		if u.landed(ctx, st.m, c.Root, kept) {
			pr.Commits++
			u.committed(kept)
			u.recordLost(p, st, prev, c.Root, pr)
			u.deleteKeys(ctx, c.Unreferenced)
			return kept, nil
		}
	}
}

// deleteDropped deletes the objects of the attempts dropped from a commit
// against m, except those m references: a root write reported as a lost
// race may have landed after all (the store's client retried a write whose
// response was lost, and the retry found the root this very write made),
// and then the root re-read commits them.
func (u *Uploader) deleteDropped(ctx context.Context, m *manifest.Manifest, dropped []uploaded) {
	for _, d := range dropped {
		if d.drop {
			continue // no objects
		}
		referenced := false
		err := u.store.segmentsIn(ctx, m, d.seg.BaseOffset, d.seg.LastOffset, func(s manifest.Segment) {
			referenced = referenced || s.Log.Key == d.seg.Log.Key
		})
		if err != nil || referenced {
			continue // unknown, or committed: garbage collection decides
		}
		u.deleteKeys(ctx, d.seg.Keys())
	}
}

// maxAttemptAge is the oldest upload attempt a commit may reference: half
// the garbage-collection grace period, so a collector never deletes the
// objects of an attempt that is about to be committed.
func (u *Uploader) maxAttemptAge() time.Duration {
	g := u.opts.GCGrace
	if g <= 0 {
		g = DefaultGCGrace
	}
	return g / 2
}

func (u *Uploader) committed(kept []uploaded) {
	u.metrics.commits.Inc()
	for _, k := range kept {
		if k.replace {
			u.metrics.replaced.Inc()
		} else {
			u.metrics.uploadedSegments.Inc()
		}
	}
}

// landed reports whether cur is the root this uploader tried to write
// (same generation, and it holds the attempts).
func (u *Uploader) landed(ctx context.Context, cur, want *manifest.Manifest, kept []uploaded) bool {
	if cur.Generation != want.Generation {
		return false
	}
	ours := map[string]bool{}
	for _, k := range kept {
		if !k.drop {
			ours[k.seg.Log.Key] = true
		}
	}
	found := 0
	for _, k := range kept {
		if k.drop {
			// Landed when the range holds no segment any more.
			left := false
			if err := u.store.segmentsIn(ctx, cur, k.from, k.to, func(manifest.Segment) { left = true }); err != nil || left {
				return false
			}
			found++
			continue
		}
		err := u.store.segmentsIn(ctx, cur, k.seg.BaseOffset, k.seg.LastOffset, func(s manifest.Segment) {
			if ours[s.Log.Key] {
				found++
			}
		})
		if err != nil {
			return false
		}
	}
	return found == len(kept)
}

// buildCommit computes the commit of done against m. Segments that no longer
// fit (committed meanwhile by another writer, or overlapping it) go to
// dropped.
func (u *Uploader) buildCommit(ctx context.Context, p Partition, m *manifest.Manifest, done []uploaded, dropped *[]uploaded) (*manifest.Commit, []uploaded, error) {
	var kept []uploaded
	var steps []*manifest.Commit
	cur := m
	var appends, replaces []uploaded
	// Each attempt's age is taken once: the clock moving between a
	// group's count and its members' checks would split it.
	now := u.opts.Now()
	tooOld := func(d uploaded) bool { return now.Sub(d.started) > u.maxAttemptAge() }
	// A group (task.members) commits whole or not at all: every member
	// stored and young enough.
	ready := map[int64]int{}
	for _, d := range done {
		if d.members > 0 && !tooOld(d) {
			ready[d.gFrom]++
		}
	}
	// spans: a replace that commits offsets past m's end, which the
	// appends after it must not leave a hole at (they wait with it).
	spans := func(d uploaded) bool { return d.replace && max(d.to, d.gTo) >= m.NextOffset() }
	spanDropped := false
	// appendDropped: an append was too old to commit. The appends after it
	// wait with it: committed past its records they would leave a hole
	// (recorded lost, or a compaction gap) that nothing fills again, every
	// offset of it then lying below the committed end. replaceDropped: a
	// replace was; the replaces after it wait too, as replaces go in offset
	// order: one after it may remove a key's tombstone whose older value
	// only the dropped one removes (a deleted key served again).
	appendDropped, replaceDropped := false, false
	for _, d := range done {
		if tooOld(d) {
			// Garbage collection may take objects this old for orphans.
			u.logger.Warn("upload attempt too old to commit; dropped", "topic", p.Topic, "partition", p.Partition,
				"base_offset", d.seg.BaseOffset, "age", now.Sub(d.started))
			*dropped = append(*dropped, d)
			spanDropped = spanDropped || spans(d)
			appendDropped = appendDropped || !d.replace
			replaceDropped = replaceDropped || d.replace
			continue
		}
		if d.replace && replaceDropped || !d.replace && appendDropped {
			*dropped = append(*dropped, d)
			spanDropped = spanDropped || spans(d)
			continue
		}
		if d.members > 0 && ready[d.gFrom] != d.members {
			*dropped = append(*dropped, d)
			spanDropped = spanDropped || spans(d)
			continue
		}
		if d.drop && d.members == 0 {
			// Another writer may have removed the range already.
			held := false
			if err := u.store.segmentsIn(ctx, m, d.from, d.to, func(manifest.Segment) { held = true }); err != nil {
				return nil, nil, err
			}
			if !held {
				*dropped = append(*dropped, d)
				continue
			}
		}
		if d.replace {
			replaces = append(replaces, d)
		} else {
			appends = append(appends, d)
		}
	}
	if spanDropped {
		*dropped = append(*dropped, appends...)
		appends = nil
	}
	// Appends first: a replaced range then lies below the committed end,
	// which a replace may not move back.
	var segs []manifest.Segment
	var fx []map[int64]txnEffect // segs' transaction effects
	for i, d := range appends {
		r := manifest.Range{Base: d.seg.BaseOffset, Last: d.seg.LastOffset}
		if len(segs) == 0 {
			dec := manifest.Reconcile(cur, r)
			if dec.Action == manifest.ActionSkip {
				*dropped = append(*dropped, d) // committed by another writer
				continue
			}
			if dec.Action != manifest.ActionAppend {
				// It overlaps the end another writer committed (rolled
				// elsewhere): the appends after it would leave a hole where
				// its records past that end are, which nothing fills again
				// (every offset of it then lies below the committed end).
				*dropped = append(*dropped, appends[i:]...)
				break
			}
		} else if d.seg.BaseOffset <= segs[len(segs)-1].LastOffset {
			*dropped = append(*dropped, appends[i:]...)
			break
		}
		segs = append(segs, d.seg)
		fx = append(fx, d.txns)
		kept = append(kept, d)
	}
	if len(segs) > 0 {
		if cur.Generation == 0 && cur.SegmentCount() == 0 {
			// The first commit: the remote log starts where the source
			// log does, inside the first segment.
			start := min(max(p.LogStartOffset, segs[0].BaseOffset), segs[0].LastOffset)
			fresh, err := manifest.NewID(u.store.prefix, p.Topic, p.keyID, p.Partition, start)
			if err != nil {
				return nil, nil, err
			}
			cur = fresh
		}
		// Runs of segments that follow one another, each appended after
		// the gap before it when that gap is a loss (lostBefore).
		for start := 0; start < len(segs); {
			end := start + 1
			for end < len(segs) && (p.Compacted || segs[end].BaseOffset <= segs[end-1].LastOffset+1) {
				end++
			}
			var c *manifest.Commit
			var err error
			open := cur.OpenTxns
			if gap, ok := u.lostBefore(p, cur, segs[start]); ok {
				c, err = manifest.AppendLost(cur, u.opts.Policy, gap, segs[start:end]...)
				open = nil // what the lost offsets opened and closed is gone with them
			} else {
				c, err = manifest.Append(cur, u.opts.Policy, segs[start:end]...)
			}
			if err != nil {
				return nil, nil, err
			}
			for _, e := range fx[start:end] {
				open = applyTxns(open, e)
			}
			if err := c.Root.SetOpenTxns(open); err != nil {
				return nil, nil, fmt.Errorf("commit: %w", err)
			}
			steps = append(steps, c)
			cur = c.Root
			start = end
		}
	}
	appended := len(segs) > 0
	for i := 0; i < len(replaces); {
		// An earlier step may have sealed the replaced range into a
		// sub-manifest that is stored only with the whole commit.
		var r manifest.Resolver = u.store.subs
		if pending := pendingSubs(steps); len(pending) > 0 {
			r = pendingResolver{pending: pending, r: u.store.subs}
		}
		// One replace, or a group's members (consecutive in done) in one.
		d := replaces[i]
		from, to, n := d.from, d.to, 1
		if d.members > 0 {
			from, to, n = d.gFrom, d.gTo, d.members
		}
		if i+n > len(replaces) || slices.ContainsFunc(replaces[i:i+n], func(x uploaded) bool { return x.members != d.members || x.gFrom != d.gFrom }) {
			return nil, nil, fmt.Errorf("commit: replace group [%d, %d] is not whole", from, to) // a planning bug
		}
		these := replaces[i : i+n]
		i += n
		var segs []manifest.Segment
		for _, x := range these {
			if !x.drop { // else the cleaner emptied the range
				segs = append(segs, x.seg)
			}
		}
		c, err := manifest.Replace(ctx, r, cur, u.opts.Policy, from, to, segs)
		var ce *manifest.ConflictError
		if errors.As(err, &ce) {
			u.logger.Debug("cleaned segment cannot replace its committed range", "topic", p.Topic, "partition", p.Partition, "err", err)
			*dropped = append(*dropped, these...)
			if to >= m.NextOffset() && appended {
				// The appends would leave the records it had past the
				// end a hole: nothing of this commit.
				*dropped = append(append(*dropped, kept...), replaces[i:]...)
				return nil, nil, nil
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if to >= m.NextOffset() {
			// The replace commits offsets past the end m was committed to
			// (a cleaned segment spanning it): the transactions open at
			// the new end are those open before from, then what the
			// replacing segments and the appends after them did.
			open := slices.DeleteFunc(slices.Clone(m.OpenTxns), func(t manifest.OpenTxn) bool { return t.FirstOffset >= from })
			for _, x := range these {
				open = applyTxns(open, x.txns)
			}
			for _, e := range fx {
				open = applyTxns(open, e)
			}
			if err := c.Root.SetOpenTxns(open); err != nil {
				return nil, nil, fmt.Errorf("commit: %w", err)
			}
		}
		steps = append(steps, c)
		cur = c.Root
		kept = append(kept, these...)
	}
	if len(steps) == 0 {
		return nil, nil, nil
	}
	return chainCommit(m, steps), kept, nil
}

// pendingSubs are the sub-manifests steps created, by key: not stored until
// the chained commit is written.
func pendingSubs(steps []*manifest.Commit) map[string][]byte {
	out := map[string][]byte{}
	for _, c := range steps {
		for _, ns := range c.Subs {
			out[ns.Ref.Key] = ns.Data
		}
	}
	return out
}

// pendingResolver loads the sub-manifests of an unwritten commit from
// memory and every other one through r.
type pendingResolver struct {
	pending map[string][]byte
	r       manifest.Resolver
}

func (p pendingResolver) Load(ctx context.Context, key string, size int64) ([]byte, error) {
	if data, ok := p.pending[key]; ok {
		return data, nil
	}
	return p.r.Load(ctx, key, size)
}

// lostBefore reports the gap that appending first after cur leaves, when
// it is data loss: a partition whose offsets follow one another (not
// compacted; a cleaner's gaps are no loss) that was committed before, and
// whose next rolled segment starts past the committed end: the source
// deleted the offsets in between before they were uploaded (its retention
// ran while the upload stalled, or a DeleteRecords). The first commit of a
// partition records none: the remote log starts where the source log did.
func (u *Uploader) lostBefore(p Partition, cur *manifest.Manifest, first manifest.Segment) (manifest.Gap, bool) {
	if p.Compacted || cur.Generation == 0 || first.BaseOffset <= cur.NextOffset() {
		return manifest.Gap{}, false
	}
	return manifest.Gap{BaseOffset: cur.NextOffset(), LastOffset: first.BaseOffset - 1, DetectedMs: u.opts.Now().UnixMilli()}, true
}

// recordLost reports the gaps root recorded that prev did not: counted,
// in the pass report, and logged at ERROR (data the tier will never have).
func (u *Uploader) recordLost(p Partition, st *partState, prev, root *manifest.Manifest, pr *PartitionReport) {
	from := prev.NextOffset()
	for _, g := range root.Gaps {
		if g.BaseOffset < from {
			continue
		}
		segs := 0
		for base := range st.listed {
			if base >= g.BaseOffset && base <= g.LastOffset {
				segs++
			}
		}
		segs = max(segs, 1) // one at least; more when earlier passes listed them
		pr.Lost = append(pr.Lost, g)
		pr.SegmentsLost += segs
		u.metrics.lostSegments.Add(float64(segs))
		u.metrics.lostOffsets.Add(float64(g.LastOffset - g.BaseOffset + 1))
		u.logger.Error("segments deleted at the source before they were uploaded: the remote tier has a gap (data loss)",
			"topic", p.Topic, "partition", p.Partition, "base_offset", g.BaseOffset, "last_offset", g.LastOffset,
			"offsets", g.LastOffset-g.BaseOffset+1, "segments", segs, "source_log_start_offset", p.LogStartOffset,
			"source_retention_ms", p.SourceRetentionMs, "source_retention_bytes", p.SourceRetentionBytes)
	}
	for base := range st.listed {
		if base < root.NextOffset() {
			delete(st.listed, base)
		}
	}
}
