package fetchcache

import "context"

// Tiers are a partition's offsets by tier, for ListOffsets' KIP-405 and
// KIP-1005 timestamps.
type Tiers struct {
	// LocalStart is the first offset served from local data (-4,
	// EARLIEST_LOCAL_TIMESTAMP); for a partition served only from the
	// bucket, the remote log start.
	LocalStart int64
	// HighestTiered is the last offset in the bucket (-5,
	// LATEST_TIERED_TIMESTAMP); -1 when nothing is tiered or the
	// partition has no remote tier, as Kafka answers.
	HighestTiered int64
}

// TierLister is implemented by partitions that know their tiers. Without
// tiered only LocalStart is asked for: it needs no bucket read where there
// is local data, as Kafka answers -4 from its local log alone.
type TierLister interface {
	Tiers(ctx context.Context, tiered bool) (Tiers, error)
}

// TopicIDer is implemented by partitions that know the topic ID of the
// lineage they serve (Kafka's string form; "" when none).
type TopicIDer interface {
	TopicID() string
}

// TopicID is the served lineage's topic ID as of the last manifest read
// (fresher than a Topics listing).
func (p *remotePartition) TopicID() string { return p.log.TopicID() }

// Tiers of a partition read only from the bucket: everything served is
// tiered.
func (p *remotePartition) Tiers(ctx context.Context, _ bool) (Tiers, error) {
	o, err := p.Offsets(ctx)
	if err != nil {
		return Tiers{}, err
	}
	return Tiers{LocalStart: o.LogStart, HighestTiered: highestTiered(o)}, nil
}

// Tiers of a local partition: no remote tier.
func (p *LocalPartition) Tiers(ctx context.Context, _ bool) (Tiers, error) {
	o, err := p.Offsets(ctx)
	if err != nil {
		return Tiers{}, err
	}
	return Tiers{LocalStart: o.LogStart, HighestTiered: -1}, nil
}

// Tiers of a combined partition: the local log start, and the remote
// tier's last offset when the topic uses it (only with tiered: the local
// log start alone does not depend on the bucket).
func (p *CombinedPartition) Tiers(ctx context.Context, tiered bool) (Tiers, error) {
	lo, err := p.local.Offsets(ctx)
	if err != nil {
		return Tiers{}, err
	}
	t := Tiers{LocalStart: lo.LogStart, HighestTiered: -1}
	if !tiered {
		return t, nil
	}
	rp, err := p.remotePart(ctx)
	if err != nil || rp == nil {
		return t, err
	}
	ro, err := rp.Offsets(ctx)
	if err != nil {
		return Tiers{}, err
	}
	t.HighestTiered = highestTiered(ro)
	return t, nil
}

// highestTiered is the last offset of a remote log's offsets, -1 when it
// holds none.
func highestTiered(o Offsets) int64 {
	if o.LogEnd <= o.LogStart {
		return -1
	}
	return o.LogEnd - 1
}
