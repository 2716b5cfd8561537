package compactor

import (
	"context"
	"errors"
	"fmt"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// runStats counts one cleaning run of one log.
type runStats struct {
	mapBytesRead      int64
	bytesRead         int64
	bytesWritten      int64
	recordsRead       int64
	recordsKept       int64
	keyless           int64
	tombstonesDropped int64
	abortedDropped    int64
	markersDropped    int64
	batchesCopied     int64
	batchesRewritten  int64
	emptyBatchesKept  int64
	segmentsIn        int
	segmentsOut       int
	endOffset         int64
	mapEntries        int
	mapUtilization    float64
}

// producerLast is what the cleaner keeps of a producer's state: the last
// offset of its last data batch (-1 if none) and its latest epoch.
type producerLast struct {
	lastData      int64
	epoch         int16
	lastTimestamp int64 // max timestamp of its last batch
	segment       int   // the view's segment holding its last batch
}

// worker is one cleaner thread: its offset map (fixed memory, reused for
// every run) and scratch buffers.
type worker struct {
	m    *OffsetMap
	thr  *throttler
	dec  record.Decoder
	enc  record.Encoder
	out  []byte
	kept []record.Record
	// unthrottled bytes not yet reported to the throttler
	pending int64
}

func (w *worker) account(ctx context.Context, n int) error {
	w.pending += int64(n)
	if w.pending < 64<<10 {
		return ctx.Err()
	}
	n64 := w.pending
	w.pending = 0
	if err := w.thr.maybeThrottle(ctx, n64); err != nil {
		return err
	}
	return ctx.Err()
}

// clean runs Kafka's Cleaner.doClean on one log.
func (w *worker) clean(ctx context.Context, p *logToClean, nowMs, producerExpirationMs int64) (runStats, error) {
	var st runStats
	l, v := p.log, p.view
	// The dirty region's offset span bounds its keys: size the map to it.
	var span int64
	for _, i := range overlapping(v, p.firstDirty, p.firstUncleanable) {
		if s := v.Segments[i]; !s.Active {
			span += max(s.NextOffset-max(s.BaseOffset, p.firstDirty), 0)
		}
	}
	if err := w.m.ResetFor(span); err != nil {
		return st, err
	}
	w.m.SetLatestOffset(p.firstDirty - 1)
	producers, err := w.producerState(ctx, l, v)
	if err != nil {
		return st, err
	}
	// Expired producers (producer.id.expiration.ms) keep no state, except
	// one with a transaction still open (at or past the last stable offset).
	// A last batch without a timestamp is as old as its segment's file,
	// which was last written at or after it.
	modTimes := map[int]int64{}
	for pid, pl := range producers {
		if pl.lastData >= v.LastStableOffset {
			continue
		}
		last := pl.lastTimestamp
		if last < 0 {
			t, ok := modTimes[pl.segment]
			if !ok {
				if t, err = l.SegmentModTime(v.Segments[pl.segment]); err != nil {
					return st, fmt.Errorf("read producer state: %w", err)
				}
				modTimes[pl.segment] = t
			}
			last = t
		}
		if nowMs-last >= producerExpirationMs {
			delete(producers, pid)
		}
	}
	if err := w.buildOffsetMap(ctx, p, &st); err != nil {
		return st, err
	}
	st.endOffset = w.m.LatestOffset() + 1
	st.mapEntries, st.mapUtilization = w.m.Size(), w.m.Utilization()
	var segs []localtier.CleanerSegment
	nextBase := map[int64]int64{}
	for i, s := range v.Segments {
		if s.Active || s.BaseOffset >= st.endOffset {
			break
		}
		segs = append(segs, s)
		nextBase[s.BaseOffset] = segEnd(v, i)
	}
	cfg := v.Config
	txn := newTxnState()
	legacy, err := newLegacyDeletes(l, v, p.firstDirty)
	if err != nil {
		return st, err
	}
	for _, g := range groupSegments(segs, cfg.EffectiveSegmentBytes(), cfg.SegmentIndexBytes, p.firstUncleanable) {
		if err := w.cleanGroup(ctx, l, g, nextBase, txn, producers, legacy, nowMs, cfg.DeleteRetentionMs, &st); err != nil {
			return st, err
		}
		st.segmentsIn += len(g)
		st.segmentsOut++
	}
	return st, nil
}

// producerState reads every batch header of the log for each producer's
// last data batch and epoch (Kafka asks its producer state manager).
func (w *worker) producerState(ctx context.Context, l *localtier.Log, v localtier.CleanerView) (map[int64]producerLast, error) {
	m := map[int64]producerLast{}
	for i, seg := range v.Segments {
		if seg.Size == 0 {
			continue
		}
		err := l.ScanBatchHeaders(seg, func(_ int64, _ int, h record.Batch) error {
			if h.IsLegacy() || h.ProducerID() < 0 {
				return nil
			}
			p, ok := m[h.ProducerID()]
			if !ok || p.epoch != h.ProducerEpoch() {
				// Kafka's maybeUpdateProducerEpoch: a new epoch forgets
				// the producer's batches, so a marker that bumped it is
				// the entry kept for fencing.
				p.lastData = -1
			}
			if !h.IsControl() {
				p.lastData = h.LastOffset()
			}
			p.epoch = h.ProducerEpoch()
			p.lastTimestamp, p.segment = h.MaxTimestamp(), i
			m[h.ProducerID()] = p
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read producer state: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// buildOffsetMap puts the keys of the dirty region [firstDirty,
// firstUncleanable) in the map, whole segments at a time while their offsets
// fit, except the first dirty segment, which is mapped as far as the map
// takes its keys (as Kafka maps a segment until its map is full).
func (w *worker) buildOffsetMap(ctx context.Context, p *logToClean, st *runStats) error {
	l, v := p.log, p.view
	txn := newTxnState()
	txn.addAborted(l.AbortedTxns(p.firstDirty, p.firstUncleanable))
	for k, i := range overlapping(v, p.firstDirty, p.firstUncleanable) {
		seg := v.Segments[i]
		if seg.Active {
			break
		}
		from := max(seg.BaseOffset, p.firstDirty)
		// partial: the first dirty segment may hold more keys than the map
		// takes; as Kafka, map it until the map is full.
		partial := false
		if span := seg.NextOffset - from; span > int64(w.m.MaxEntries()-w.m.Size()) {
			if k > 0 {
				return nil // full: clean what the map covers, the rest next run
			}
			partial = true
		}
		err := l.ScanSegment(seg, from, false, func(_ int64, b record.Batch) error {
			st.mapBytesRead += int64(len(b))
			if err := w.account(ctx, len(b)); err != nil {
				return err
			}
			if b.LastOffset() < p.firstDirty {
				return nil
			}
			switch {
			case b.IsControl():
				recs, err := w.dec.Records(b)
				if err != nil {
					return err
				}
				var key []byte
				if len(recs) > 0 {
					key = recs[0].Key
				}
				if _, err := txn.onControl(b, key, len(recs) > 0); err != nil {
					return err
				}
			case !txn.onBatch(b):
				recs, err := w.dec.Records(b)
				if err != nil {
					return err
				}
				for _, r := range recs {
					if r.Key != nil && r.Offset >= p.firstDirty {
						if err := w.m.Put(r.Key, r.Offset); err != nil {
							if partial && errors.Is(err, ErrMapFull) {
								// The map covers every record up to
								// LatestOffset (Put raised it to the last
								// one it took), as Kafka's does when it
								// fills mid-batch; the records after are
								// kept as past what the map covers.
								return err
							}
							return fmt.Errorf("build offset map at offset %d: %w", r.Offset, err)
						}
					}
				}
			}
			w.m.SetLatestOffset(b.LastOffset())
			return nil
		})
		if partial && errors.Is(err, ErrMapFull) {
			// The empty map took at least the first key: the run makes progress.
			return nil // clean what the map covers, the rest next run
		}
		if err != nil {
			return fmt.Errorf("build offset map: %w", err)
		}
		// The whole segment is mapped: the map covers it up to the next
		// segment's base even where its last offsets were cleaned away, as
		// Kafka's buildOffsetMapForSegment fast-forwards to
		// nextSegmentStartOffset - 1. Else the checkpoint lands in that
		// gap and the next plan counts the segment both clean and dirty.
		w.m.SetLatestOffset(min(segEnd(v, i), p.firstUncleanable) - 1)
	}
	return nil
}

// cleanGroup rewrites one group of segments into one cleaned segment and
// swaps it in.
func (w *worker) cleanGroup(ctx context.Context, l *localtier.Log, g []localtier.CleanerSegment, nextBase map[int64]int64,
	txn *txnState, producers map[int64]producerLast, legacy *legacyDeletes, nowMs, deleteRetentionMs int64, st *runStats) (err error) {
	cs, err := l.NewCleanedSegment(g[0].BaseOffset)
	if err != nil {
		return err
	}
	replaced := false
	defer func() {
		if !replaced {
			err = errors.Join(err, cs.Abort())
		}
	}()
	txn.keep = cs.AppendAbortedTxn
	f := &batchFilter{ctx: ctx, w: w, cs: cs, txn: txn, producers: producers, legacy: legacy, nowMs: nowMs, deleteRetentionMs: deleteRetentionMs, st: st}
	for _, seg := range g {
		txn.addAborted(l.AbortedTxns(seg.BaseOffset, nextBase[seg.BaseOffset]))
		legacy.startSegment(seg)
		if err := l.ScanSegment(seg, seg.BaseOffset, true, f.filter); err != nil {
			return fmt.Errorf("clean segment %d: %w", seg.BaseOffset, err)
		}
	}
	txn.keep = nil
	st.bytesWritten += cs.Size()
	replaced = true // ReplaceSegments removes the cleaned files itself on failure
	return l.ReplaceSegments(cs, g)
}

// batchFilter decides, batch by batch, what a cleaned segment keeps
// (Kafka's logCleanerFilter over MemoryRecords.filterTo).
type batchFilter struct {
	ctx               context.Context
	w                 *worker
	cs                *localtier.CleanedSegment
	txn               *txnState
	producers         map[int64]producerLast
	legacy            *legacyDeletes
	nowMs             int64
	deleteRetentionMs int64
	st                *runStats
}

func (f *batchFilter) isLastOfProducer(b record.Batch) bool {
	p, ok := f.producers[b.ProducerID()]
	if !ok {
		return false
	}
	if p.lastData >= 0 {
		return !b.IsControl() && b.LastOffset() == p.lastData
	}
	return b.IsControl() && b.ProducerEpoch() == p.epoch
}

func (f *batchFilter) filter(_ int64, b record.Batch) error {
	w, st := f.w, f.st
	st.bytesRead += int64(len(b))
	if err := w.account(f.ctx, len(b)); err != nil {
		return err
	}
	if b.IsLegacy() {
		return f.filterLegacy(b)
	}
	recs, err := w.dec.Records(b)
	if err != nil {
		return err
	}
	st.recordsRead += int64(len(recs))
	var canDiscard bool
	if b.IsControl() {
		var key []byte
		if len(recs) > 0 {
			key = recs[0].Key
		}
		if canDiscard, err = f.txn.onControl(b, key, len(recs) > 0); err != nil {
			return fmt.Errorf("control batch at offset %d: %w", b.BaseOffset(), err)
		}
	} else {
		canDiscard = f.txn.onBatch(b)
	}
	discardRecords := canDiscard
	if b.IsControl() {
		discardRecords = canDiscard && b.HasDeleteHorizon() && b.DeleteHorizon() <= f.nowMs
	}
	retainEmpty := b.ProducerID() >= 0 && f.isLastOfProducer(b)
	dropAll := func() {
		switch {
		case b.IsControl():
			st.markersDropped += int64(len(recs))
		default:
			st.abortedDropped += int64(len(recs))
		}
	}
	if discardRecords && !retainEmpty {
		dropAll()
		return nil
	}
	kept := w.kept[:0]
	tombstones := false
	for _, r := range recs {
		var keep bool
		switch {
		case discardRecords:
		case b.IsControl():
			keep = true
		default:
			keep = f.retain(b, r)
		}
		if keep {
			kept = append(kept, r)
			tombstones = tombstones || r.Value == nil
		}
	}
	w.kept = kept
	if discardRecords {
		dropAll()
	}
	needHorizon := (tombstones || (canDiscard && b.IsControl())) && !b.HasDeleteHorizon()
	switch {
	case len(kept) == len(recs) && len(kept) > 0 && !needHorizon:
		st.recordsKept += int64(len(kept))
		st.batchesCopied++
		return f.cs.Append(b)
	case len(kept) > 0:
		spec := specOf(b)
		if needHorizon {
			spec.DeleteHorizon = f.nowMs + f.deleteRetentionMs
		}
		if w.out, err = w.enc.AppendBatch(w.out[:0], spec, kept); err != nil {
			return fmt.Errorf("rewrite batch at offset %d: %w", b.BaseOffset(), err)
		}
		st.recordsKept += int64(len(kept))
		st.batchesRewritten++
		return f.cs.Append(w.out)
	case retainEmpty:
		// Keep the batch header so the producer's last sequence and epoch
		// survive (Kafka's BatchRetention.RETAIN_EMPTY).
		spec := specOf(b)
		spec.Codec = codec.None
		spec.DeleteHorizon = record.NoTimestamp
		spec.MaxTimestamp = b.MaxTimestamp()
		if w.out, err = w.enc.AppendBatch(w.out[:0], spec, nil); err != nil {
			return fmt.Errorf("rewrite batch at offset %d: %w", b.BaseOffset(), err)
		}
		st.emptyBatchesKept++
		return f.cs.Append(w.out)
	}
	return nil
}

// filterLegacy cleans a magic 0/1 entry (one message, or a compressed
// wrapper of several) as Kafka's cleaner does: a record superseded by a
// later offset of its key goes, and so does a keyless one, and a delete
// once its segment is past the legacy delete horizon (legacyDeletes). An
// entry that keeps every record is copied unchanged, one that keeps none is
// dropped, and the records a wrapper keeps are up-converted into a v2 batch
// with its codec, as Kafka 4's cleaner writes them (KIP-724).
func (f *batchFilter) filterLegacy(b record.Batch) error {
	w, st := f.w, f.st
	recs, err := w.dec.Records(b)
	if err != nil {
		return err
	}
	st.recordsRead += int64(len(recs))
	kept := w.kept[:0]
	for _, r := range recs {
		switch {
		case r.Offset > w.m.LatestOffset():
		case r.Key == nil:
			st.keyless++
			continue
		case r.Offset < w.m.Get(r.Key):
			continue
		case r.Value == nil:
			retain, err := f.legacy.retain()
			if err != nil {
				return err
			}
			if !retain {
				st.tombstonesDropped++
				continue
			}
		}
		kept = append(kept, r)
	}
	w.kept = kept
	st.recordsKept += int64(len(kept))
	switch {
	case len(kept) == len(recs):
		st.batchesCopied++
		return f.cs.Append(b)
	case len(kept) == 0:
		return nil
	}
	spec := record.NewBatchSpec(kept[0].Offset, b.Codec())
	if spec.LogAppendTime = b.LogAppendTime(); spec.LogAppendTime {
		spec.MaxTimestamp = b.MaxTimestamp()
	}
	if w.out, err = w.enc.AppendBatch(w.out[:0], spec, kept); err != nil {
		return fmt.Errorf("up-convert legacy message at offset %d: %w", b.BaseOffset(), err)
	}
	st.batchesRewritten++
	return f.cs.Append(w.out)
}

// legacyDeletes tells whether the segment being cleaned keeps its legacy
// (magic 0/1) deletes. Those carry no delete horizon of their own, so
// Kafka's cleaner goes by segment last-modified times: a pass's legacy
// delete horizon is delete.retention.ms before the last-modified time of
// the last segment below the first dirty offset (0 when there is none, so
// the pass that first cleans a log keeps every delete), and a segment
// modified at or before it loses its legacy deletes. A cleaned segment
// keeps the last-modified time of the last segment it replaces
// (ReplaceSegments), so a delete goes once the log holds cleaned data
// written delete.retention.ms after the delete's segment was last written.
// A segment's time is read only when one of its records depends on it.
type legacyDeletes struct {
	l          *localtier.Log
	horizon    int64
	seg        localtier.CleanerSegment // the segment being cleaned
	segRead    bool
	segRetains bool
}

// newLegacyDeletes reads the pass's legacy delete horizon before any
// segment is replaced, as Kafka's doClean does.
func newLegacyDeletes(l *localtier.Log, v localtier.CleanerView, firstDirty int64) (*legacyDeletes, error) {
	d := &legacyDeletes{l: l}
	if clean := overlapping(v, -1, firstDirty); len(clean) > 0 {
		t, err := l.SegmentModTime(v.Segments[clean[len(clean)-1]])
		if err != nil {
			return nil, fmt.Errorf("legacy delete horizon: %w", err)
		}
		d.horizon = t - v.Config.DeleteRetentionMs
	}
	return d, nil
}

func (d *legacyDeletes) startSegment(seg localtier.CleanerSegment) {
	d.seg, d.segRead = seg, false
}

// retain reports whether the segment being cleaned keeps its legacy deletes
// (Kafka's retainLegacyDeletesAndTxnMarkers).
func (d *legacyDeletes) retain() (bool, error) {
	if d.segRead {
		return d.segRetains, nil
	}
	t, err := d.l.SegmentModTime(d.seg)
	if err != nil {
		return false, fmt.Errorf("legacy delete horizon: %w", err)
	}
	d.segRead, d.segRetains = true, t > d.horizon
	return d.segRetains, nil
}

// specOf copies a batch's header fields into a spec, keeping its offsets
// (base and last offset delta), producer fields, flags and codec.
func specOf(b record.Batch) record.BatchSpec {
	spec := record.NewBatchSpec(b.BaseOffset(), b.Codec())
	spec.PartitionLeaderEpoch = b.PartitionLeaderEpoch()
	spec.Transactional = b.IsTransactional()
	spec.Control = b.IsControl()
	spec.LogAppendTime = b.LogAppendTime()
	if spec.LogAppendTime {
		spec.MaxTimestamp = b.MaxTimestamp()
	}
	spec.DeleteHorizon = b.DeleteHorizon()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	spec.LastOffsetDelta = b.LastOffsetDelta()
	return spec
}

// retain is Kafka's Cleaner.shouldRetainRecord for a v2 data record.
func (f *batchFilter) retain(b record.Batch, r record.Record) bool {
	if r.Offset > f.w.m.LatestOffset() {
		return true // past what the map covers: next run's business
	}
	if r.Key == nil {
		f.st.keyless++
		return false
	}
	if r.Offset < f.w.m.Get(r.Key) {
		return false
	}
	if r.Value != nil {
		return true
	}
	if !b.HasDeleteHorizon() || f.nowMs < b.DeleteHorizon() {
		return true
	}
	f.st.tombstonesDropped++
	return false
}
