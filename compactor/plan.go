package compactor

import (
	"time"

	"github.com/tiered/tiered/localtier"
)

// logToClean is a compacted log with its cleanable range, as Kafka's
// LogCleanerManager computes it (cleanableOffsets, LogToClean).
type logToClean struct {
	topic     string
	partition int32
	log       *localtier.Log
	view      localtier.CleanerView
	// firstDirty is the first offset not yet cleaned; firstUncleanable the
	// base offset of the first segment that may not be cleaned (active
	// segment, last stable offset, min.compaction.lag.ms).
	firstDirty, firstUncleanable int64
	cleanBytes, cleanableBytes   int64
	ratio                        float64
	// delay is how long the dirty part has waited past max.compaction.lag.ms.
	delay time.Duration
	// checkpointReset is set when the checkpointed offset was out of range.
	checkpointReset bool
}

// segEnd is where segment i's offsets end: the next segment's base offset,
// or the log end offset for the active segment.
func segEnd(v localtier.CleanerView, i int) int64 {
	if i+1 < len(v.Segments) {
		return v.Segments[i+1].BaseOffset
	}
	return v.LogEndOffset
}

// overlapping lists the segments holding offsets of [from, to), as Kafka's
// logSegments(from, to): from the one whose range holds from.
func overlapping(v localtier.CleanerView, from, to int64) []int {
	var out []int
	for i, s := range v.Segments {
		if s.BaseOffset < to && segEnd(v, i) > from {
			out = append(out, i)
		}
	}
	return out
}

// planLog computes the cleanable range and dirty ratio of a log. ckpt is
// the cleaner checkpoint (hasCkpt false when absent). force ignores
// min.compaction.lag.ms.
func planLog(v localtier.CleanerView, ckpt int64, hasCkpt bool, now time.Time, force bool) logToClean {
	p := logToClean{view: v, firstDirty: v.LogStartOffset}
	if hasCkpt {
		if ckpt < v.LogStartOffset || ckpt > v.LogEndOffset {
			p.checkpointReset = true
		} else {
			p.firstDirty = ckpt
		}
	}
	nowMs := now.UnixMilli()
	cfg := v.Config
	active := v.Segments[len(v.Segments)-1]
	uncleanable := min(v.LastStableOffset, active.BaseOffset)
	nonActiveDirty := overlapping(v, p.firstDirty, active.BaseOffset)
	if !force && cfg.MinCompactionLagMs > 0 {
		for _, i := range nonActiveDirty {
			if s := v.Segments[i]; s.MaxTimestamp > nowMs-cfg.MinCompactionLagMs {
				uncleanable = min(uncleanable, s.BaseOffset)
				break
			}
		}
	}
	uncleanable = max(uncleanable, p.firstDirty)
	// Round down to the base of the segment holding it.
	p.firstUncleanable = active.BaseOffset
	for i, s := range v.Segments {
		if s.BaseOffset <= uncleanable && uncleanable < segEnd(v, i) || s.Active {
			p.firstUncleanable = s.BaseOffset
			break
		}
	}
	for _, i := range overlapping(v, -1, p.firstDirty) {
		p.cleanBytes += v.Segments[i].Size
	}
	for _, i := range overlapping(v, min(p.firstDirty, p.firstUncleanable), p.firstUncleanable) {
		p.cleanableBytes += v.Segments[i].Size
	}
	if total := p.cleanBytes + p.cleanableBytes; total > 0 {
		p.ratio = float64(p.cleanableBytes) / float64(total)
	}
	// max.compaction.lag.ms: the earliest first-batch timestamp of a dirty
	// non-active segment.
	if maxLag := max(cfg.MaxCompactionLagMs, 0); maxLag < nowMs {
		earliest := int64(-1)
		for _, i := range nonActiveDirty {
			if ts := v.Segments[i].FirstBatchTimestamp; ts > 0 && (earliest < 0 || ts < earliest) {
				earliest = ts
			}
		}
		if until := nowMs - maxLag; earliest >= 0 && earliest < until {
			p.delay = time.Duration(until-earliest) * time.Millisecond
		}
	}
	return p
}

// cleanable reports whether the log should be cleaned now.
func (p *logToClean) cleanable(force bool) bool {
	if force {
		return true
	}
	return (p.delay > 0 && p.cleanableBytes > 0) || p.ratio > p.view.Config.MinCleanableDirtyRatio
}

// groupSegments groups adjacent segments so that each group's log, offset
// index and time index stay within segment.bytes and segment.index.bytes
// and its offsets within 2^31-1 of its base (Kafka's groupSegmentsBySize).
func groupSegments(segs []localtier.CleanerSegment, maxSize, maxIndexSize, firstUncleanable int64) [][]localtier.CleanerSegment {
	var groups [][]localtier.CleanerSegment
	for len(segs) > 0 {
		g := []localtier.CleanerSegment{segs[0]}
		size, idx, tidx := segs[0].Size, segs[0].OffsetIndexBytes, segs[0].TimeIndexBytes
		segs = segs[1:]
		for len(segs) > 0 {
			s := segs[0]
			lastOffset := firstUncleanable - 1
			if len(segs) > 1 {
				lastOffset = segs[1].BaseOffset - 1
			}
			if s.Size == 0 {
				// An empty segment adds no offsets (Kafka skips the range
				// check for it), but if it ends the group, the swap writes
				// an empty batch at its base offset (ReplaceSegments), which
				// must be within range of the group's base too.
				lastOffset = s.BaseOffset
			}
			if size+s.Size > maxSize || idx+s.OffsetIndexBytes > maxIndexSize || tidx+s.TimeIndexBytes > maxIndexSize ||
				lastOffset-g[0].BaseOffset > 1<<31-1 {
				break
			}
			g = append(g, s)
			size, idx, tidx = size+s.Size, idx+s.OffsetIndexBytes, tidx+s.TimeIndexBytes
			segs = segs[1:]
		}
		groups = append(groups, g)
	}
	return groups
}
