package remotetier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
)

// task is one segment to upload: appended (from cut on) or replacing the
// committed range [from, to]; or, with drop, a range the cleaner emptied
// (seg is the empty segment): nothing to upload, the committed segments in
// [from, to] are removed.
type task struct {
	seg       SegmentMeta
	cut       int64 // first offset uploaded (seg.BaseOffset unless cut)
	replace   bool
	drop      bool // with replace: replace [from, to] with no segment
	from, to  int64
	compacted bool
	// members > 0: the task is one of members tasks, the source's
	// consecutive cleaned segments and emptied ranges tiling [gFrom, gTo],
	// that replace every committed segment there in one Replace, all or
	// none: a committed segment crosses a boundary between them (see
	// groupTasks).
	members    int
	gFrom, gTo int64
	// needsAppend: a replace (or group) of the newest committed segments
	// that ends below the committed end; Replace refuses it (the end never
	// moves back) unless the first append after it is in the same commit.
	needsAppend bool
}

// uploaded is a task whose objects are stored.
type uploaded struct {
	task
	seg     manifest.Segment
	bytes   int64
	started time.Time // when the attempt began storing objects
	// txns is what the segment's batches did to transactions (applyTxns).
	txns map[int64]txnEffect
}

func (u *Uploader) uploadPartition(ctx context.Context, p Partition) (PartitionReport, error) {
	pr := PartitionReport{Topic: p.Topic, Partition: p.Partition, HighWatermark: p.HighWatermark}
	st := u.partState(p)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		if err := u.reload(ctx, p, st); err != nil {
			return pr, err
		}
	}
	var err error
	for {
		var tasks []task
		tasks, err = u.plan(ctx, p, st.m)
		if err != nil || len(tasks) == 0 {
			break
		}
		tasks = limitTasks(tasks, u.opts.MaxCommitSegments)
		var done []uploaded
		var upErr error
		done, upErr = u.uploadTasks(ctx, p, tasks, &pr)
		if len(done) > 0 {
			var committed []uploaded
			genBefore := st.m.Generation
			committed, err = u.commit(ctx, p, st, done, &pr)
			for _, d := range committed {
				if d.drop {
					pr.Committed = append(pr.Committed, CommittedSegment{BaseOffset: d.from, LastOffset: d.to, Replaced: true, Emptied: true})
					continue
				}
				pr.Committed = append(pr.Committed, CommittedSegment{BaseOffset: d.seg.BaseOffset, LastOffset: d.seg.LastOffset,
					Bytes: d.bytes, AttemptID: d.seg.AttemptID, Replaced: d.replace, Cut: d.cut > d.task.seg.BaseOffset})
			}
			if err != nil || len(committed) == 0 && st.m.Generation == genBefore {
				break // no progress: try again next pass
			}
		}
		if upErr != nil {
			err = upErr
			break
		}
		if len(done) < len(tasks) {
			break // a segment went away: list again next pass
		}
	}
	pr.OldestLagMs, pr.HeadroomMs, pr.HeadroomBytes = -1, NoLimit, NoLimit
	if st.m != nil {
		next := st.m.NextOffset()
		pr.RemoteNextOffset = next
		for _, s := range p.Segments {
			if s.NextOffset > next {
				if st.listed == nil {
					st.listed = map[int64]bool{}
				}
				st.listed[s.BaseOffset] = true
				if pr.LagSegments == 0 {
					pr.OldestLagMs = s.MaxTimestamp
				}
				pr.LagSegments++
				pr.LagBytes += s.Size
			}
		}
		lag := PartitionLag(sourceLagSegments(p), next, sourceRetention(p), u.opts.Now())
		pr.HeadroomMs, pr.HeadroomBytes = lag.HeadroomMs, lag.HeadroomBytes
	}
	// Remote retention runs even when the upload failed, as Kafka's runs
	// apart from its copies: a partition whose upload keeps failing (a
	// segment the source cannot read, a refused PUT) must not grow the
	// bucket for ever. It plans on the manifest held and commits
	// conditionally, so a stale one only costs a re-read.
	if u.opts.RemoteRetention != nil && st.m != nil && ctx.Err() == nil {
		if rule, ok := u.opts.RemoteRetention(p); ok {
			err = errors.Join(err, u.retainPartition(ctx, p, st, rule, &pr))
		}
	}
	u.partitionGauges(p, pr)
	return pr, err
}

// limitTasks keeps the first n tasks (one commit's), never part of a group:
// one cut off goes to the next commit, or whole when it is the first. A
// replace that needs the append after it keeps that append, one more.
func limitTasks(tasks []task, n int) []task {
	if len(tasks) <= n {
		return tasks
	}
	if t := tasks[n]; t.members > 0 && tasks[n-1].members > 0 && tasks[n-1].gFrom == t.gFrom {
		start := n - 1
		for start > 0 && tasks[start-1].members > 0 && tasks[start-1].gFrom == t.gFrom {
			start--
		}
		if n = start; n == 0 {
			n = t.members
		}
	}
	if n < len(tasks) && tasks[n-1].needsAppend && !tasks[n].replace {
		n++
	}
	return tasks[:n]
}

// sourceLagSegments are the source's segments as PartitionLag takes them:
// the rolled ones listed, then one standing for the rest of the log (the
// active segment and what lies above the high watermark), which counts
// toward its size.
func sourceLagSegments(p Partition) []LagSegment {
	out := make([]LagSegment, 0, len(p.Segments)+1)
	for _, s := range p.Segments {
		out = append(out, LagSegment{BaseOffset: s.BaseOffset, NextOffset: s.NextOffset, Size: s.Size, MaxTimestamp: s.MaxTimestamp})
	}
	var rest int64
	for _, s := range p.unlisted() {
		rest += s.Size
	}
	if rest > 0 {
		out = append(out, LagSegment{Size: rest, MaxTimestamp: -1, Active: true})
	}
	return out
}

// sourceRetention is the source's own retention as PartitionLag reads it.
func sourceRetention(p Partition) topicconfig.Config {
	cfg := topicconfig.Defaults()
	cfg.RetentionMs, cfg.RetentionBytes = p.SourceRetentionMs, p.SourceRetentionBytes
	return cfg
}

// partitionGauges sets the partition's lag and headroom series.
func (u *Uploader) partitionGauges(p Partition, pr PartitionReport) {
	lbl := []string{p.Topic, strconv.Itoa(int(p.Partition))}
	u.metrics.partLagBytes.WithLabelValues(lbl...).Set(float64(pr.LagBytes))
	age := 0.0
	if pr.OldestLagMs >= 0 {
		age = max(0, float64(u.opts.Now().UnixMilli()-pr.OldestLagMs)/1000)
	}
	u.metrics.partLagSeconds.WithLabelValues(lbl...).Set(age)
	hs, hb := math.Inf(1), math.Inf(1)
	if p.SourceRetentionMs >= 0 {
		hs = float64(p.SourceRetentionMs) / 1000
		if pr.HeadroomMs != NoLimit {
			hs = float64(pr.HeadroomMs) / 1000
		}
	}
	if p.SourceRetentionBytes >= 0 {
		hb = float64(p.SourceRetentionBytes)
		if pr.HeadroomBytes != NoLimit {
			hb = float64(pr.HeadroomBytes)
		}
	}
	u.metrics.headroomSeconds.WithLabelValues(lbl...).Set(hs)
	u.metrics.headroomBytes.WithLabelValues(lbl...).Set(hb)
}

// plan decides, against the committed manifest m, which of the partition's
// segments to upload: appends (Reconcile: the first that is not skipped, and
// every later one), cut copies (conflict), cleaned segments that replace a
// committed range they rewrote, ranges the cleaner emptied (dropTasks), and
// runs of these that replace their committed range together because a
// committed segment crosses a boundary between them (groupTasks).
func (u *Uploader) plan(ctx context.Context, p Partition, m *manifest.Manifest) ([]task, error) {
	var tasks []task
	var straddled []int64 // cleaned ranges a committed segment crosses
	appending, historyChecked := false, false
	lags, err := u.cleanerLags(ctx, p, m)
	if err != nil {
		return nil, err
	}
	for _, s := range p.Segments {
		if s.NextOffset > p.HighWatermark {
			break
		}
		compacted := p.Compacted && s.NextOffset <= p.CleanedUpTo
		t := task{seg: s, cut: s.BaseOffset, compacted: compacted}
		if appending {
			tasks = append(tasks, t)
			continue
		}
		d := manifest.Reconcile(m, manifest.Range{Base: s.BaseOffset, Last: s.LastOffset()})
		if d.Action != manifest.ActionSkip && !historyChecked {
			if err := u.checkHistory(ctx, p, m); err != nil {
				return nil, err
			}
			historyChecked = true // it depends on p and m alone
		}
		switch d.Action {
		case manifest.ActionAppend:
			appending = true
			if d.Gap && !p.Compacted && m.SegmentCount() > 0 {
				u.logger.Warn("segment leaves a gap in the remote log", "topic", p.Topic, "partition", p.Partition,
					"remote_next_offset", d.Next, "segment_base", s.BaseOffset)
			}
			tasks = append(tasks, t)
		case manifest.ActionConflict:
			appending = true
			if compacted {
				// A cleaned segment spanning the committed end: the cleaner
				// may have removed the batch a cut would start at, so the
				// whole segment replaces the committed range it covers.
				rt, ok, crossed, err := u.spanningReplaceTask(ctx, m, t)
				if err != nil {
					return nil, err
				}
				if ok {
					tasks = append(tasks, rt)
					continue
				}
				if crossed {
					straddled = append(straddled, s.BaseOffset)
				}
			}
			t.cut = d.Next
			tasks = append(tasks, t)
		case manifest.ActionSkip:
			if !compacted || lags {
				continue
			}
			rt, ok, crossed, err := u.replaceTask(ctx, m, t)
			if err != nil {
				return nil, err
			}
			if ok {
				tasks = append(tasks, rt)
			}
			if crossed {
				straddled = append(straddled, s.BaseOffset)
			}
		}
	}
	var drops []task
	var crossedDrops []int64
	if !lags {
		if drops, crossedDrops, err = u.dropTasks(ctx, p, m); err != nil {
			return nil, err
		}
	}
	straddled = append(straddled, crossedDrops...)
	var groups []task
	if len(straddled) > 0 {
		if groups, err = u.groupTasks(ctx, p, m, straddled); err != nil {
			return nil, err
		}
	}
	if len(drops) > 0 || len(groups) > 0 {
		tasks = append(tasks, drops...)
		if len(groups) > 0 {
			// A group replaces its range whole: no other task there.
			tasks = slices.DeleteFunc(tasks, func(t task) bool {
				return slices.ContainsFunc(groups, func(g task) bool {
					return t.seg.BaseOffset >= g.gFrom && t.seg.BaseOffset <= g.gTo
				})
			})
			tasks = append(tasks, groups...)
		}
		slices.SortStableFunc(tasks, func(a, b task) int { return cmp.Compare(a.seg.BaseOffset, b.seg.BaseOffset) })
	}
	// A cleaned segment whose range reaches the committed end but whose
	// last batch ends below it would move the end back (Replace refuses):
	// it waits until a later segment is appended in the same commit
	// (needsAppend: limitTasks keeps that append with it). A group waits
	// whole unless one of its segments ends there.
	end := m.NextOffset() - 1
	waits := map[int64]bool{}
	for _, t := range tasks {
		if t.members > 0 && t.gTo == end {
			if _, ok := waits[t.gFrom]; !ok {
				waits[t.gFrom] = true
			}
			if !t.drop && t.seg.LastOffset() == end {
				waits[t.gFrom] = false
			}
		}
	}
	kept := tasks[:0]
	for _, t := range tasks {
		t.needsAppend = t.members > 0 && waits[t.gFrom] || t.members == 0 && t.replace && t.to == end && t.seg.LastOffset() < t.to
		if appending || !t.needsAppend {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// cleanerLags reports whether a committed segment that a cleaner wrote
// reaches the source's cleaner checkpoint: another replica's cleaner (an
// earlier leader's) has been further than the source's, and may have
// dropped there a record (a key's tombstone, past delete.retention.ms; a
// transaction's marker) that supersedes one the source's cleaned segments
// below still hold, its own cleaner not having been that far. A replace
// below it would then bring the superseded record back with nothing after
// it in the bucket (a deleted key served again), so none is planned, nor
// any removal, until the source's cleaner is past every such segment (it
// then cleans below with those records in its map). The source's own
// cleaned segments are committed only below its checkpoint.
func (u *Uploader) cleanerLags(ctx context.Context, p Partition, m *manifest.Manifest) (bool, error) {
	end := m.NextOffset()
	if !p.Compacted || m.SegmentCount() == 0 || p.CleanedUpTo >= end {
		return false, nil
	}
	lags := false
	err := u.store.segmentsIn(ctx, m, max(p.CleanedUpTo, m.LogStartOffset), end-1, func(s manifest.Segment) {
		lags = lags || s.Compacted
	})
	return lags, err
}

// groupTasks replaces, for each source segment or emptied range at
// straddled (base offsets) that a committed segment crosses a boundary of,
// the committed segments of the smallest run of consecutive cleaned
// source segments and emptied ranges that no committed segment crosses out
// of: the segments were rolled at other offsets than the committed ones
// (another leader's), so no source segment can replace its committed range
// alone (a replace never cuts), yet the crossing committed segment holds
// the records the cleaner dropped there, and a deleted key's value once the
// tombstone after it is cleaned away. The run's cleaned segments hold every
// record the source kept in the range, so the replace loses none. Its last
// segment may reach past the committed end (the commit then moves the end,
// as spanningReplaceTask's). No group is made when the run would need a
// source segment that is not cleaned or not listed, or offsets below the
// committed log start: the committed segments stay until it can. Nor when
// the run has more than MaxCommitSegments pieces: its whole committed
// range would be uploaded again, and every piece stored within
// maxAttemptAge, so a long run (a large partition whose leaders rolled
// everywhere at other offsets) keeps its committed segments, stale records
// included, rather than re-upload the partition or never commit.
func (u *Uploader) groupTasks(ctx context.Context, p Partition, m *manifest.Manifest, straddled []int64) ([]task, error) {
	slices.Sort(straddled)
	end := m.NextOffset()
	type piece struct {
		seg  SegmentMeta
		drop bool
		// spans: the segment's records reach past the committed end (the
		// last piece of a run then; the replace moves the end forward).
		spans bool
	}
	var pcs []piece
	for _, s := range p.Segments {
		if s.NextOffset > p.HighWatermark {
			break
		}
		if p.Compacted && s.NextOffset <= p.CleanedUpTo && s.BaseOffset < end && s.NextBase > s.BaseOffset {
			pcs = append(pcs, piece{seg: s, spans: s.LastOffset() >= end})
		}
	}
	for _, e := range p.Emptied {
		if p.Compacted && e.NextBase <= p.HighWatermark && e.NextBase <= p.CleanedUpTo && e.BaseOffset < end && e.NextBase > e.BaseOffset {
			pcs = append(pcs, piece{seg: e, drop: true})
		}
	}
	slices.SortFunc(pcs, func(a, b piece) int { return cmp.Compare(a.seg.BaseOffset, b.seg.BaseOffset) })
	last := func(i int) int64 {
		if pcs[i].spans {
			return pcs[i].seg.LastOffset()
		}
		return min(pcs[i].seg.NextBase, end) - 1
	}
	var out []task
	grouped := -1 // pieces up to this index are in a group already
	for _, base := range straddled {
		i, found := slices.BinarySearchFunc(pcs, base, func(pc piece, b int64) int { return cmp.Compare(pc.seg.BaseOffset, b) })
		if !found || i <= grouped {
			continue
		}
		lo, hi := i, i
		from, to := pcs[i].seg.BaseOffset, last(i)
		ok := true
		for ok {
			first, lastIn, n := int64(math.MaxInt64), int64(-1), 0
			if err := u.store.segmentsIn(ctx, m, from, to, func(s manifest.Segment) {
				first, lastIn, n = min(first, s.BaseOffset), max(lastIn, s.LastOffset), n+1
			}); err != nil {
				return nil, err
			}
			if n == 0 {
				break
			}
			grown := false
			for ok && first < from {
				if ok = lo > 0 && pcs[lo-1].seg.NextBase == pcs[lo].seg.BaseOffset; ok {
					lo--
					from, grown = pcs[lo].seg.BaseOffset, true
				}
			}
			for ok && lastIn > to {
				if ok = hi+1 < len(pcs) && pcs[hi+1].seg.BaseOffset == pcs[hi].seg.NextBase; ok {
					hi++
					to, grown = last(hi), true
				}
			}
			if !grown {
				break
			}
			if hi-lo+1 > u.opts.MaxCommitSegments {
				// Larger than one commit: bounded, as an upload attempt
				// must be stored within maxAttemptAge and the run's
				// committed range is uploaded again whole.
				ok = false
			}
		}
		if !ok || lo == hi || from < m.LogStartOffset {
			continue
		}
		for j := lo; j <= hi; j++ {
			pc := pcs[j]
			out = append(out, task{seg: pc.seg, cut: pc.seg.BaseOffset, replace: true, drop: pc.drop,
				from: pc.seg.BaseOffset, to: last(j), compacted: true, members: hi - lo + 1, gFrom: from, gTo: to})
		}
		grouped = hi
	}
	return out, nil
}

// replaceTask decides whether a cleaned local segment, whose offsets are all
// committed, must replace what is committed for its range: unless exactly
// one committed segment holds the range, compacted, with the same base, last
// offset and size (the cheap identity of a cleaned segment). crossed: it
// declined because a committed segment straddles the range (groupTasks).
func (u *Uploader) replaceTask(ctx context.Context, m *manifest.Manifest, t task) (_ task, ok, crossed bool, _ error) {
	from := t.seg.BaseOffset
	to := min(t.seg.NextBase, m.NextOffset()) - 1
	if to < t.seg.LastOffset() || from < m.LogStartOffset {
		return t, false, false, nil
	}
	var in []manifest.Segment
	if err := u.store.segmentsIn(ctx, m, from, to, func(s manifest.Segment) { in = append(in, s) }); err != nil {
		return t, false, false, err
	}
	if len(in) == 0 {
		return t, false, false, nil
	}
	if len(in) == 1 && in[0].Compacted && in[0].BaseOffset == from && in[0].LastOffset == t.seg.LastOffset() && in[0].Log.Size == t.seg.Size {
		return t, false, false, nil
	}
	// A committed segment straddling the range cannot be replaced by this
	// segment alone (Replace never cuts).
	if in[0].BaseOffset < from || in[len(in)-1].LastOffset > to {
		return t, false, true, nil
	}
	t.replace, t.from, t.to = true, from, to
	return t, true, false, nil
}

// dropTasks are the ranges the cleaner emptied (p.Emptied) that still hold
// committed segments: each is replaced by nothing, leaving a compaction
// gap, so the remote tier stops serving records the cleaner dropped. A
// range a committed segment straddles a boundary of cannot be removed
// alone (a replace never cuts): its base is in crossed, for groupTasks.
func (u *Uploader) dropTasks(ctx context.Context, p Partition, m *manifest.Manifest) (out []task, crossed []int64, _ error) {
	for _, e := range p.Emptied {
		if e.NextBase > p.HighWatermark || e.NextBase > p.CleanedUpTo || !p.Compacted {
			continue
		}
		from, to := e.BaseOffset, min(e.NextBase, m.NextOffset())-1
		if to < from {
			continue // nothing committed there yet
		}
		var in []manifest.Segment
		if err := u.store.segmentsIn(ctx, m, from, to, func(s manifest.Segment) { in = append(in, s) }); err != nil {
			return nil, nil, err
		}
		if len(in) == 0 {
			continue
		}
		if in[0].BaseOffset < from || in[len(in)-1].LastOffset > to {
			crossed = append(crossed, e.BaseOffset)
			continue
		}
		out = append(out, task{seg: e, cut: e.BaseOffset, replace: true, drop: true, from: from, to: to, compacted: true})
	}
	return out, crossed, nil
}

// spanningReplaceTask makes a cleaned segment that starts inside the
// committed range and ends past it replace every committed segment from its
// base on (the commit moves the end forward). It declines when a committed
// segment straddles the segment's base (a replace never cuts; crossed, for
// groupTasks).
func (u *Uploader) spanningReplaceTask(ctx context.Context, m *manifest.Manifest, t task) (_ task, ok, crossed bool, _ error) {
	from, end := t.seg.BaseOffset, m.NextOffset()-1
	if from < m.LogStartOffset || t.seg.LastOffset() <= end {
		return t, false, false, nil
	}
	var in []manifest.Segment
	if err := u.store.segmentsIn(ctx, m, from, end, func(s manifest.Segment) { in = append(in, s) }); err != nil {
		return t, false, false, err
	}
	if len(in) == 0 || in[0].BaseOffset < from {
		return t, false, len(in) > 0, nil
	}
	t.replace, t.from, t.to = true, from, t.seg.LastOffset()
	return t, true, false, nil
}

// ErrDivergedHistory is a source log whose leader epochs disagree with the
// committed segments' at the committed end: an unclean leader election gave
// the partition another history from some offset below it. Nothing from
// that log is appended: it would serve two histories as one log.
var ErrDivergedHistory = errors.New("the source log's history diverged from the committed one (an unclean leader election?): this partition uploads nothing more; delete and re-create the topic, or remove its remote lineage, to tier it again")

// checkHistory compares the epoch of the last committed offset in the
// committed segments with its epoch in the source's leader epochs. Every
// replica's committed batches carry the same epochs, so a difference means
// the source truncated below the committed end and wrote other records
// there. Unknown on either side (no epochs, offsets the source no longer
// has) is no evidence.
func (u *Uploader) checkHistory(ctx context.Context, p Partition, m *manifest.Manifest) error {
	if len(p.LeaderEpochs) == 0 || m.SegmentCount() == 0 {
		return nil
	}
	last := m.NextOffset() - 1
	var remote []manifest.EpochEntry
	if err := u.store.segmentsIn(ctx, m, last, last, func(s manifest.Segment) { remote = s.LeaderEpochs }); err != nil {
		return err
	}
	re, ok := epochAt(remote, last)
	if !ok {
		return nil
	}
	le, ok := epochAt(p.LeaderEpochs, last)
	if !ok || le == re {
		return nil
	}
	return fmt.Errorf("offset %d is in leader epoch %d in the bucket and %d in the source log: %w", last, re, le, ErrDivergedHistory)
}

// epochAt is the epoch of offset in es (sorted by start offset), false
// when es has none starting at or below it.
func epochAt(es []manifest.EpochEntry, offset int64) (int32, bool) {
	var e int32
	ok := false
	for _, x := range es {
		if x.StartOffset > offset {
			break
		}
		e, ok = x.Epoch, true
	}
	return e, ok
}
