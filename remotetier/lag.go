package remotetier

import (
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// NoLimit is a Lag headroom with no bound: nothing is waiting for upload, or the broker's
// retention never deletes by that measure.
const NoLimit int64 = -1

// LagSegment is one local segment of a partition as PartitionLag needs it.
type LagSegment struct {
	BaseOffset, NextOffset int64
	Size                   int64
	MaxTimestamp           int64 // largest batch timestamp, -1 if none
	Active                 bool  // the segment the broker appends to: never uploaded, never deleted
}

// LagSegments converts a broker view's segments.
func LagSegments(segs []localtier.BrokerSegment) []LagSegment {
	out := make([]LagSegment, len(segs))
	for i, s := range segs {
		out[i] = LagSegment{BaseOffset: s.BaseOffset, NextOffset: s.NextOffset, Size: s.Size, MaxTimestamp: s.MaxTimestamp, Active: s.Active}
	}
	return out
}

// Lag is how far a partition's upload trails its local log, and how long the broker's own
// retention leaves before it deletes a segment that is not in the bucket yet.
type Lag struct {
	// LocalBytes is the size of every local segment (the active one included).
	LocalBytes int64 `json:"local_bytes"`
	// Bytes and Segments are the rolled, non-empty local segments not yet uploaded (their
	// offsets reach past the uploaded end).
	Bytes    int64 `json:"lag_bytes"`
	Segments int   `json:"lag_segments"`
	// OldestBase is the base offset of the oldest of them, -1 when none.
	OldestBase int64 `json:"oldest_pending_base_offset"`
	// HeadroomMs is the time before the broker's time retention (retention.ms, under
	// cleanup.policy delete) deletes the oldest pending segment: its largest timestamp plus
	// retention.ms minus now, 0 when it is due already; NoLimit without a pending segment,
	// without time retention, or when the segment has no timestamp.
	HeadroomMs int64 `json:"headroom_ms"`
	// HeadroomBytes is how many more bytes the partition may grow before the broker's size
	// retention (retention.bytes) deletes the oldest pending segment, 0 when it is due;
	// NoLimit as for HeadroomMs.
	HeadroomBytes int64 `json:"headroom_bytes"`
}

// PartitionLag computes a partition's Lag from its local segments (oldest first), the
// offset after the last uploaded one (the manifest's NextOffset; segments ending at or
// below it are in the bucket), the topic's effective config on the broker (cleanup.policy,
// retention.ms, retention.bytes: the broker's local window) and now. Kafka's rules: the
// active segment is never deleted; time retention deletes a rolled segment whose largest
// timestamp is more than retention.ms old; size retention deletes the oldest segments while
// the log minus the segment stays at or above retention.bytes.
func PartitionLag(segs []LagSegment, uploadedEnd int64, cfg topicconfig.Config, now time.Time) Lag {
	lag := Lag{OldestBase: -1, HeadroomMs: NoLimit, HeadroomBytes: NoLimit}
	oldest := -1
	for i, s := range segs {
		lag.LocalBytes += s.Size
		if s.Active || s.Size == 0 || s.NextOffset <= s.BaseOffset || s.NextOffset <= uploadedEnd {
			continue
		}
		lag.Bytes += s.Size
		lag.Segments++
		if oldest < 0 {
			oldest = i
		}
	}
	if oldest < 0 || !cfg.CleanupPolicy.Delete {
		if oldest >= 0 {
			lag.OldestBase = segs[oldest].BaseOffset
		}
		return lag
	}
	seg := segs[oldest]
	lag.OldestBase = seg.BaseOffset
	if cfg.RetentionMs >= 0 && seg.MaxTimestamp >= 0 {
		lag.HeadroomMs = max(0, seg.MaxTimestamp+cfg.RetentionMs-now.UnixMilli())
	}
	if cfg.RetentionBytes >= 0 {
		var after int64 // bytes of the segments after the oldest pending one
		for _, s := range segs[oldest+1:] {
			after += s.Size
		}
		lag.HeadroomBytes = max(0, cfg.RetentionBytes-after)
	}
	return lag
}
