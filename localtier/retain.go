package localtier

import (
	"errors"
	"fmt"
)

// ErrDeleteActiveSegment is returned by DeleteSegments when asked to delete
// offsets held by the active segment: retention never deletes the segment
// the log appends to.
var ErrDeleteActiveSegment = errors.New("delete segments: the active segment is never deleted")

// RetentionSegments lists the segments like Segments, with MaxTimestamp
// resolved as Kafka's LogSegment.largestTimestamp: the largest record
// timestamp, or the .log file's last-modified time (Unix ms) when no record
// in the segment carries one (an empty segment, or records without
// timestamps).
func (l *Log) RetentionSegments() ([]SegmentInfo, error) {
	segs := l.Segments()
	for i := range segs {
		if segs[i].MaxTimestamp >= 0 {
			continue
		}
		fi, err := l.fs.Stat(segs[i].Path)
		if err != nil {
			return nil, fmt.Errorf("retention segments %s: %w", l.dir, err)
		}
		segs[i].MaxTimestamp = fi.ModTime().UnixMilli()
	}
	return segs, nil
}

// DeleteSegments deletes, oldest first, every segment whose offsets all lie
// below upTo (NextOffset <= upTo), the way Kafka's UnifiedLog.deleteSegments
// does: the log start offset first moves forward to the base offset of the
// first segment that remains (it never moves back), the segments leave the
// log, then each one's files are renamed to .deleted, the directory synced,
// and the files removed. Everything happens under the log's write lock.
//
// The deleted set is always a prefix of the log. upTo past the active
// segment's base offset asks for offsets the active segment holds and is
// refused with ErrDeleteActiveSegment, with nothing changed. The caller
// writes the log dir's log-start-offset checkpoint afterwards
// (LogDir.Checkpoint).
//
// If removing a segment's files fails, the segments before it are gone and it
// and the rest of the prefix are out of the log (closed; readers never see
// them again), and the error is returned with the segments that were fully
// deleted. Files left behind are resolved on the next open: .deleted files
// are removed, and whole segments below the checkpointed log start offset are
// deleted by the next retention pass (reason log-start-offset).
func (l *Log) DeleteSegments(upTo int64) (deleted []SegmentInfo, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("delete segments: log is closed")
	}
	active := l.active()
	if upTo > active.base {
		return nil, fmt.Errorf("%w: %s: offsets below %d requested, active segment starts at %d",
			ErrDeleteActiveSegment, l.dir, upTo, active.base)
	}
	n := 0
	for n < len(l.segments)-1 && l.segments[n].nextOffset <= upTo {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	victims := append([]*Segment(nil), l.segments[:n]...)
	remaining := l.segments[n:]
	// Kafka increments the log start offset before the segments leave the
	// lookup structure, so no reader is ever pointed at a deleted segment.
	if next := remaining[0].base; next > l.logStart {
		l.logStart = next
	}
	// As Kafka's updateLogStartOffset: the recovery point never lags the
	// log start offset.
	if l.logStart > l.recoveryPoint {
		l.recoveryPoint = l.logStart
	}
	l.segments = append([]*Segment(nil), remaining...)
	for i, s := range victims {
		info := SegmentInfo{BaseOffset: s.base, NextOffset: s.nextOffset, Size: s.size, MaxTimestamp: s.maxTimestamp, Path: s.LogPath()}
		if err := s.delete(); err != nil {
			// The rest are out of the log already: close them; their files
			// are removed or completed on the next open.
			for _, rest := range victims[i+1:] {
				_ = rest.close()
			}
			return deleted, fmt.Errorf("delete segments of %s: %w", l.dir, err)
		}
		deleted = append(deleted, info)
	}
	// Producer snapshots go with their segments (Kafka's deleteProducerSnapshots).
	if err := l.removeSnapshotsBelowLocked(l.logStart); err != nil {
		return deleted, fmt.Errorf("delete segments of %s: %w", l.dir, err)
	}
	l.logger.Info("deleted segments", "dir", l.dir, "segments", len(deleted), "log_start_offset", l.logStart)
	return deleted, nil
}
