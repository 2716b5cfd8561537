package retention

import (
	"fmt"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Reason says which rule made a segment deletable. Values are the Kafka config
// names that decided, so operators can grep for them.
type Reason string

// The reasons a segment is deleted.
const (
	// ReasonRetentionMs: the segment's largest timestamp is older than retention.ms.
	ReasonRetentionMs Reason = topicconfig.RetentionMsConfig
	// ReasonRetentionBytes: the partition was over retention.bytes.
	ReasonRetentionBytes Reason = topicconfig.RetentionBytesConfig
	// ReasonLocalRetentionMs: a local copy older than local.retention.ms (the
	// remote tier holds the data).
	ReasonLocalRetentionMs Reason = topicconfig.LocalRetentionMsConfig
	// ReasonLocalRetentionBytes: the local tier was over local.retention.bytes
	// (the remote tier holds the data).
	ReasonLocalRetentionBytes Reason = topicconfig.LocalRetentionBytesConfig
	// ReasonLogStartOffset: every offset of the segment is below the log start offset.
	ReasonLogStartOffset Reason = "log-start-offset"
)

// Reasons lists every Reason, in a fixed order.
func Reasons() []Reason {
	return []Reason{ReasonRetentionMs, ReasonRetentionBytes, ReasonLocalRetentionMs, ReasonLocalRetentionBytes, ReasonLogStartOffset}
}

// Segment is what the policy knows about one segment.
type Segment struct {
	BaseOffset int64 `json:"base_offset"`
	// LastOffset is the last offset the segment covers (next offset - 1;
	// BaseOffset-1 for an empty segment).
	LastOffset int64 `json:"last_offset"`
	Size       int64 `json:"size_bytes"`
	// MaxTimestamp is Kafka's largestTimestamp in Unix ms: the largest record
	// timestamp, or the file's last-modified time when no record has one
	// (localtier.Log.RetentionSegments resolves it). Negative means unknown:
	// such a segment is never deleted by time.
	MaxTimestamp int64 `json:"max_timestamp"`
	// Active is the segment the log appends to; it is never deleted.
	Active bool `json:"active,omitempty"`
	// Uploaded says the remote tier holds this segment (used by Remote; Local
	// asks RemoteState, which covers offsets rather than segments).
	Uploaded bool `json:"uploaded,omitempty"`
}

// NextOffset is the offset after the segment.
func (s Segment) NextOffset() int64 { return s.LastOffset + 1 }

// FromLog converts a log's segment list (Segments or RetentionSegments) to
// policy segments.
func FromLog(infos []localtier.SegmentInfo) []Segment {
	out := make([]Segment, len(infos))
	for i, s := range infos {
		out[i] = Segment{BaseOffset: s.BaseOffset, LastOffset: s.NextOffset - 1, Size: s.Size, MaxTimestamp: s.MaxTimestamp, Active: s.Active}
	}
	return out
}

// RemoteState is what the remote tier says about one partition.
type RemoteState struct {
	// Consulted is true when a remote tier was asked. Without one, a topic with
	// remote.storage.enable=true keeps every local segment: nobody can tell
	// whether they were uploaded.
	Consulted bool
	// HighestOffset is the highest offset the remote tier holds contiguously
	// from the start of the log (Kafka's highestOffsetInRemoteStorage); -1
	// when it holds nothing.
	HighestOffset int64
	// NotOurs, when set, says why what the bucket holds under the
	// partition's name is not this log's (another lineage: a topic created
	// again, another data dir's): HighestOffset is -1 then, and the local
	// segments are all kept.
	NotOurs string
}

// Holds reports whether the remote tier holds every offset of s.
func (r RemoteState) Holds(s Segment) bool { return r.Consulted && s.LastOffset <= r.HighestOffset }

// Deletion is one deletable segment and the rule that made it so.
type Deletion struct {
	Segment Segment `json:"segment"`
	Reason  Reason  `json:"reason"`
	// SizeBeatTime is set when a byte cap (retention.bytes or
	// local.retention.bytes) deleted a segment its time limit (retention.ms or
	// local.retention.ms) would still have kept. It is never set when the time
	// limit is unlimited.
	SizeBeatTime bool `json:"size_beat_time,omitempty"`
}

// Decision is the outcome of a policy function.
type Decision struct {
	// Delete is an oldest-first prefix of the segments given, in order.
	Delete []Deletion `json:"delete"`
	// NewLogStartOffset is the log start offset once Delete is applied; it is
	// never below the one given.
	NewLogStartOffset int64 `json:"new_log_start_offset"`
	// SizeBeatTime is set when any deletion has SizeBeatTime.
	SizeBeatTime bool `json:"size_beat_time,omitempty"`
	// Held, when not empty, says why the first segment a rule wanted to delete
	// was kept (not yet in the remote tier, no remote tier consulted).
	Held string `json:"held,omitempty"`
}

// Bytes is the total size of the deletable segments.
func (d Decision) Bytes() int64 {
	var n int64
	for _, del := range d.Delete {
		n += del.Segment.Size
	}
	return n
}

// UpTo is the offset below which every deletable segment lies (the next offset
// of the last one), or -1 when nothing is deletable. It is the argument for
// localtier.Log.DeleteSegments.
func (d Decision) UpTo() int64 {
	if len(d.Delete) == 0 {
		return -1
	}
	return d.Delete[len(d.Delete)-1].Segment.NextOffset()
}

// expiredLocal is Kafka's local time rule: now - largestTimestamp > retentionMs.
func expiredLocal(s Segment, limitMs, nowMs int64) bool {
	return limitMs >= 0 && s.MaxTimestamp >= 0 && nowMs-s.MaxTimestamp > limitMs
}

// Local decides which segments of a partition's local log may be deleted.
// segs is the whole local log, oldest first; the last segment is the active
// one whether or not it is marked. It applies Kafka's three passes in Kafka's
// order, each continuing where the previous stopped: log-start-offset
// (the next segment starts at or below logStart), then the byte cap, then the
// time limit. The byte cap runs only when the log (after the first pass) is
// at least the cap, and deletes a segment while the log without it is still at
// least the cap. With remote.storage.enable the limits are
// local.retention.ms/bytes and every deleted segment must be held by the
// remote tier (remote); a segment that is not stops all passes, keeping the
// deletable set a prefix.
func Local(segs []Segment, cfg topicconfig.Config, logStart int64, now time.Time, remote RemoteState) Decision {
	d := Decision{NewLogStartOffset: logStart}
	msLimit, bytesLimit := cfg.RetentionMs, cfg.RetentionBytes
	msReason, bytesReason := ReasonRetentionMs, ReasonRetentionBytes
	if cfg.RemoteStorageEnable {
		msLimit, bytesLimit = cfg.EffectiveLocalRetentionMs(), cfg.EffectiveLocalRetentionBytes()
		msReason, bytesReason = ReasonLocalRetentionMs, ReasonLocalRetentionBytes
	}
	if !cfg.CleanupPolicy.Delete {
		msLimit, bytesLimit = -1, -1
	}
	nowMs := now.UnixMilli()
	i := 0
	// take deletes segs[i] for reason r if it may go; false stops every pass.
	take := func(r Reason, sizeBeatTime bool) bool {
		s := segs[i]
		if s.Active || i == len(segs)-1 {
			return false
		}
		if cfg.RemoteStorageEnable && !remote.Holds(s) {
			if !remote.Consulted {
				d.Held = fmt.Sprintf("%s=true and no remote tier was consulted: local segments are kept until their upload can be confirmed", topicconfig.RemoteStorageEnableConfig)
			} else if remote.NotOurs != "" {
				d.Held = fmt.Sprintf("segment %d..%d (%s) is not in the remote tier: %s", s.BaseOffset, s.LastOffset, r, remote.NotOurs)
			} else {
				d.Held = fmt.Sprintf("segment %d..%d (%s) is not yet in the remote tier, which holds offsets up to %d", s.BaseOffset, s.LastOffset, r, remote.HighestOffset)
			}
			return false
		}
		d.Delete = append(d.Delete, Deletion{Segment: s, Reason: r, SizeBeatTime: sizeBeatTime})
		d.SizeBeatTime = d.SizeBeatTime || sizeBeatTime
		i++
		return true
	}
	blocked := false
	for !blocked && i+1 < len(segs) && segs[i+1].BaseOffset <= logStart {
		blocked = !take(ReasonLogStartOffset, false)
	}
	if !blocked && bytesLimit >= 0 && i < len(segs) {
		var size int64
		for _, s := range segs[i:] {
			size += s.Size
		}
		if size >= bytesLimit {
			diff := size - bytesLimit
			for !blocked && i < len(segs) && diff-segs[i].Size >= 0 {
				sz := segs[i].Size
				if blocked = !take(bytesReason, msLimit >= 0 && !expiredLocal(segs[i], msLimit, nowMs)); !blocked {
					diff -= sz
				}
			}
		}
	}
	for !blocked && i < len(segs) && expiredLocal(segs[i], msLimit, nowMs) {
		blocked = !take(msReason, false)
	}
	if len(d.Delete) > 0 {
		next := d.Delete[len(d.Delete)-1].Segment.NextOffset()
		if i < len(segs) {
			next = segs[i].BaseOffset
		}
		d.NewLogStartOffset = max(logStart, next)
	}
	return d
}

// Remote decides which segments of the remote tier may be deleted, by
// retention.ms and retention.bytes over the whole log, as Kafka's
// RemoteLogManager does. segs is the whole partition log, oldest first: remote
// segments (Uploaded) and the local segments the remote tier does not hold
// yet, each offset range once. retention.bytes is measured against the size
// of all of them. Segments are taken oldest first while one of these holds,
// checked in this order: every offset is below logStart (log-start-offset);
// the largest timestamp is at or before now - retention.ms (retention.ms;
// lowers the remaining byte excess by its size, not below zero); the log is
// still over retention.bytes by at least the segment's size (retention.bytes).
// The first segment that is not uploaded, is active, or meets none of these
// ends the set. Without delete in cleanup.policy only log-start-offset applies.
//
// NewLogStartOffset is the offset after the last deletable segment (or
// logStart, if higher); the caller deletes the remote segments (manifest
// first) and then the local copies below it.
func Remote(segs []Segment, cfg topicconfig.Config, logStart int64, now time.Time) Decision {
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	p := NewRemotePlan(cfg, logStart, now, total)
	for _, s := range segs {
		if !p.Offer(s) {
			break
		}
	}
	return p.Decision()
}

// RemotePlan is Remote one segment at a time, for a caller that holds the
// log in groups it would rather not read (a manifest's sealed
// sub-manifests, summarized in the root): it offers the segments in offset
// order, and before reading a group asks Kept whether what it knows of the
// group's first segment already ends the set. Offer and Decision give
// exactly Remote's decision over the segments offered, given the whole
// log's size.
type RemotePlan struct {
	d            Decision
	logStart     int64
	msLimit      int64
	cleanupUntil int64
	excess       int64
	done         bool
}

// NewRemotePlan starts Remote's decision for a log of totalBytes (every
// segment's size, remote and local: retention.bytes is measured against it).
func NewRemotePlan(cfg topicconfig.Config, logStart int64, now time.Time, totalBytes int64) *RemotePlan {
	msLimit, bytesLimit := cfg.RetentionMs, cfg.RetentionBytes
	if !cfg.CleanupPolicy.Delete {
		msLimit, bytesLimit = -1, -1
	}
	p := &RemotePlan{d: Decision{NewLogStartOffset: logStart}, logStart: logStart, msLimit: msLimit,
		cleanupUntil: now.UnixMilli() - msLimit}
	if bytesLimit >= 0 && totalBytes > bytesLimit {
		p.excess = totalBytes - bytesLimit
	}
	return p
}

// Offer decides the next segment in offset order: true when it is
// deletable (Decision lists it), false when it ends the set (it and every
// later segment are kept; later offers are ignored).
func (p *RemotePlan) Offer(s Segment) bool {
	if p.done || s.Active || !s.Uploaded {
		p.done = true
		return false
	}
	var del Deletion
	switch {
	case s.LastOffset < p.logStart:
		del = Deletion{Segment: s, Reason: ReasonLogStartOffset}
		p.excess = max(0, p.excess-s.Size)
	case p.expired(s.MaxTimestamp):
		del = Deletion{Segment: s, Reason: ReasonRetentionMs}
		p.excess = max(0, p.excess-s.Size)
	case p.excess > 0 && p.excess-s.Size >= 0:
		del = Deletion{Segment: s, Reason: ReasonRetentionBytes, SizeBeatTime: p.msLimit >= 0}
		p.excess -= s.Size
	default:
		p.done = true
		return false
	}
	p.d.Delete = append(p.d.Delete, del)
	p.d.SizeBeatTime = p.d.SizeBeatTime || del.SizeBeatTime
	p.d.NewLogStartOffset = max(p.logStart, s.NextOffset())
	return true
}

// expired is the retention.ms rule for a largest timestamp.
func (p *RemotePlan) expired(maxTimestamp int64) bool {
	return p.msLimit >= 0 && maxTimestamp >= 0 && maxTimestamp <= p.cleanupUntil
}

// Kept reports whether the next segment is surely kept, knowing of it only
// bounds: its last offset is at least lastAtLeast, its largest timestamp
// (MaxTimestamp) at least tsAtLeast, its size at least sizeAtLeast. True
// means no rule can take it (or the set has ended already), so the set ends
// before it whatever it holds; false means it must be offered to know.
func (p *RemotePlan) Kept(lastAtLeast, tsAtLeast, sizeAtLeast int64) bool {
	switch {
	case p.done:
		return true
	case lastAtLeast < p.logStart:
		return false
	case p.msLimit >= 0 && p.cleanupUntil >= 0 && tsAtLeast <= p.cleanupUntil:
		return false // it may be old enough (a negative timestamp never is)
	case p.excess > 0 && p.excess >= sizeAtLeast:
		return false
	}
	return true
}

// Decision is the decision over the segments offered so far.
func (p *RemotePlan) Decision() Decision { return p.d }
