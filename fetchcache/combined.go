package fetchcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tiered/tiered/localtier"
)

// CombinedCatalog serves a local-tier log dir with its remote tier behind it
// (serve mode): the topics and partitions are the log dir's; offsets still
// on local disk are read locally, and offsets below the local log start
// offset (segments uploaded and then deleted by local retention) are read
// from the remote catalog, which should sit on the caching bucket. Only
// partitions whose topic has remote.storage.enable=true consult the remote
// tier. A failing remote tier degrades the partition to its local part: the
// local offsets are still served, and a read below them gets the remote
// error.
type CombinedCatalog struct {
	local  *LocalCatalog
	dir    *localtier.LogDir
	remote *RemoteCatalog
}

// NewCombinedCatalog returns a catalog over dir and remote. The caller keeps
// ownership of both.
func NewCombinedCatalog(dir *localtier.LogDir, remote *RemoteCatalog) *CombinedCatalog {
	return &CombinedCatalog{local: NewLocalCatalog(dir), dir: dir, remote: remote}
}

// Topics lists the log dir's topics: every remote partition of serve's
// bucket belongs to one of them.
func (c *CombinedCatalog) Topics(ctx context.Context) ([]TopicInfo, error) {
	return c.local.Topics(ctx)
}

// Partition returns the local partition, with the remote tier behind it when
// the topic is remote-enabled.
func (c *CombinedCatalog) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	l, err := openLocal(c.dir, topic, partition)
	if err != nil {
		return nil, err
	}
	t, ok := c.dir.Topic(topic)
	if !ok {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	return &CombinedPartition{local: NewLocalPartition(l), log: l, remote: c.remote, topic: topic, topicID: t.ID.StringOrEmpty(), partition: partition,
		partitions: int32(len(t.Partitions))}, nil
}

// RemotePartition is the remote part of a partition of the log dir: its
// topic's own lineage in the bucket (CombinedPartition's remote tier); nil
// when the topic does not use the remote tier, or nothing of that lineage
// was uploaded, or the bucket serves another lineage of the topic now.
func (c *CombinedCatalog) RemotePartition(ctx context.Context, topic string, partition int32) (Partition, error) {
	p, err := c.Partition(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	return p.(*CombinedPartition).remotePart(ctx)
}

var (
	_ SharedReader = (*CombinedPartition)(nil)
	_ SharedReader = (*remotePartition)(nil)
)

// CombinedPartition is one partition of a CombinedCatalog.
type CombinedPartition struct {
	local     *LocalPartition
	log       *localtier.Log
	remote    *RemoteCatalog
	topic     string
	topicID   string // the local topic's ID, "" for a topic without one
	partition int32
	// partitions is how many partitions the local topic has.
	partitions int32
}

// remotePart returns the remote partition, nil when the topic does not use
// the remote tier or nothing of its lineage was uploaded yet.
//
// The bucket may serve another lineage of the topic: one of another topic
// ID (the topic was created again on a fresh data dir, another data dir
// shares the bucket), or an older name-only one under a topic with an ID,
// holds another incarnation's records at these offsets. The partition is
// pinned to the local topic's own lineage (RemoteCatalog.LineagePartition),
// so it reads no other, however the topic object changes between the calls
// of one request.
func (p *CombinedPartition) remotePart(ctx context.Context) (Partition, error) {
	if p.remote == nil || !p.log.Config().RemoteStorageEnable {
		return nil, nil
	}
	rp, err := p.remote.LineagePartition(ctx, p.topic, p.partition, p.topicID, p.partitions)
	if unknownRemote(err) {
		return nil, nil
	}
	return rp, err
}

// unknownRemote reports whether err, from the remote partition, says it is
// gone for this partition: its lineage is no longer the one served
// (another data dir's is, or the topic is marked deleted), or its manifest
// is gone. The partition then reads as one without a remote tier, as when
// remotePart finds none, not as an unknown partition.
func unknownRemote(err error) bool {
	var ue *UnknownTopicOrPartitionError
	return errors.As(err, &ue)
}

// remoteOffsets returns the remote partition and its offsets when it holds
// offsets below the local log start, contiguous with the local log.
func (p *CombinedPartition) remoteOffsets(ctx context.Context, localStart int64) (Partition, Offsets, bool, error) {
	rp, err := p.remotePart(ctx)
	if err != nil || rp == nil {
		return nil, Offsets{}, false, err
	}
	ro, err := rp.Offsets(ctx)
	if unknownRemote(err) {
		return nil, Offsets{}, false, nil
	}
	if err != nil {
		return rp, Offsets{}, false, err
	}
	if ro.LogEnd < localStart {
		// Local retention deletes only uploaded segments, so a remote log
		// ending below the local start is a cached manifest older than
		// the upload that allowed the deletion: re-read it once. A
		// compacted topic can stay so for good (the cleaner removed the
		// records after the last uploaded batch: reaches), so there the
		// re-read is spaced by MinRefresh, not made for every Fetch and
		// long-poll tick; a read inside that gap re-reads first (read).
		if r, ok := rp.(refresher); ok {
			reread, err := r.forceRefresh(ctx, p.log.Config().CleanupPolicy.Compact)
			if reread && err == nil {
				ro, err = rp.Offsets(ctx)
			}
			if unknownRemote(err) {
				return nil, Offsets{}, false, nil
			}
			if err != nil {
				return rp, Offsets{}, false, err
			}
		}
	}
	return rp, ro, p.reaches(ro, localStart), nil
}

// refresher re-reads a remote partition's manifest (remotePartition's
// forceRefresh): now, or with soon unless it was read within MinRefresh.
type refresher interface {
	forceRefresh(ctx context.Context, soon bool) (reread bool, err error)
}

// reaches reports whether the remote offsets ro hold offsets below the
// local start and reach it. The remote log must reach the local start, or
// there is a gap a consumer could not cross. In a compacted topic it need
// not: local retention deletes a segment once the bucket holds its last
// batch, and the cleaner may have removed the records after that batch (a
// tombstone past its delete horizon), so the offsets between the remote
// end and the next local segment are nobody's.
func (p *CombinedPartition) reaches(ro Offsets, localStart int64) bool {
	return ro.LogStart < localStart && (ro.LogEnd >= localStart || ro.LogEnd > ro.LogStart && p.log.Config().CleanupPolicy.Compact)
}

// Offsets are the local offsets, with the log start moved down to the
// remote log start when the remote tier holds the offsets below the local
// ones. A remote failure leaves the local offsets, with the remote log
// start last known when there is one: a store that fails to re-read the
// manifest for a while does not make ListOffsets(earliest) skip the bucket.
func (p *CombinedPartition) Offsets(ctx context.Context) (Offsets, error) {
	o, err := p.local.Offsets(ctx)
	if err != nil {
		return o, err
	}
	rp, ro, ok, err := p.remoteOffsets(ctx, o.LogStart)
	if err != nil {
		k, isK := rp.(interface{ knownOffsets() (Offsets, bool) })
		if !isK {
			return o, nil
		}
		if ro, ok = k.knownOffsets(); ok {
			ok = p.reaches(ro, o.LogStart)
		}
	}
	if ok {
		o.LogStart = ro.LogStart
	}
	return o, nil
}

// read reads locally from the local log start on, and from the remote tier
// below it (up to the remote log end; the next read continues locally),
// each through from.
func (p *CombinedPartition) read(ctx context.Context, offset int64, maxBytes int, from func(Partition, int64) (View, error)) (View, error) {
	lo, err := p.local.Offsets(ctx)
	if err != nil {
		return View{}, err
	}
	if offset >= lo.LogStart {
		v, err := from(p.local, offset)
		var oe *OffsetOutOfRangeError
		if err == nil || !errors.As(err, &oe) {
			return v, err
		}
		if offset >= oe.LogStart {
			// Past the end: the answer names the whole readable range,
			// the bucket's offsets below the local ones included.
			return View{}, p.outOfRange(ctx, offset, oe.LogStart, oe.LogEnd)
		}
		// Local retention moved the log start past offset meanwhile: the
		// remote tier has it now.
		lo.LogStart, lo.LogEnd = oe.LogStart, oe.LogEnd
	}
	rp, ro, ok, err := p.remoteOffsets(ctx, lo.LogStart)
	if err != nil {
		return View{}, fmt.Errorf("read %s-%d at offset %d from the remote tier: %w", p.topic, p.partition, offset, err)
	}
	if !ok || offset < ro.LogStart {
		return View{}, outOfRange(offset, lo, ro, ok)
	}
	if offset >= ro.LogEnd {
		// In a compacted gap between the remote end and the local start,
		// by a manifest that may be up to MinRefresh old: re-read it, so
		// that offsets uploaded since are not skipped.
		if r, ok := rp.(refresher); ok {
			_, err := r.forceRefresh(ctx, false)
			if err == nil {
				ro, err = rp.Offsets(ctx)
			}
			if unknownRemote(err) {
				return View{}, outOfRange(offset, lo, Offsets{}, false)
			}
			if err != nil {
				return View{}, fmt.Errorf("read %s-%d at offset %d from the remote tier: %w", p.topic, p.partition, offset, err)
			}
		}
		if offset >= ro.LogEnd {
			return from(p.local, lo.LogStart)
		}
	}
	v, err := from(rp, offset)
	if unknownRemote(err) {
		return View{}, outOfRange(offset, lo, Offsets{}, false)
	}
	if err != nil {
		return View{}, err
	}
	if v.Len == 0 && offset < lo.LogStart {
		// The remote log ends at offset (a compacted gap up to the
		// local start): continue locally.
		return from(p.local, lo.LogStart)
	}
	return v, nil
}

// outOfRange is the OFFSET_OUT_OF_RANGE of a read at offset past the local
// log [localStart, localEnd), naming the remote offsets below it when the
// remote tier holds them (a remote tier that cannot say leaves the local
// range).
func (p *CombinedPartition) outOfRange(ctx context.Context, offset, localStart, localEnd int64) error {
	lo := Offsets{LogStart: localStart, LogEnd: localEnd}
	_, ro, ok, err := p.remoteOffsets(ctx, localStart)
	return outOfRange(offset, lo, ro, ok && err == nil)
}

// outOfRange is the error of a read at offset outside the local offsets lo
// and, when remote, the remote offsets ro below them.
func outOfRange(offset int64, lo, ro Offsets, remote bool) *OffsetOutOfRangeError {
	if !remote {
		return &OffsetOutOfRangeError{Offset: offset, LogStart: lo.LogStart, LogEnd: lo.LogEnd, Where: WhereLocal}
	}
	return &OffsetOutOfRangeError{Offset: offset, LogStart: ro.LogStart, LogEnd: lo.LogEnd, Where: WhereBoth, LocalStart: lo.LogStart}
}

// ReadView is Read as a View: remote batches stay the cache's shared
// memory (SharedReader), so serve's cold reads are not copied on their way
// to a response.
func (p *CombinedPartition) ReadView(ctx context.Context, offset int64, maxBytes int) (View, error) {
	return p.read(ctx, offset, maxBytes, func(part Partition, off int64) (View, error) {
		return ReadView(ctx, part, off, maxBytes)
	})
}

// Read returns bytes the caller owns, as every Partition's Read does.
func (p *CombinedPartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	v, err := p.read(ctx, offset, maxBytes, func(part Partition, off int64) (View, error) {
		data, err := part.Read(ctx, off, maxBytes)
		return View{Parts: [][]byte{data}, Len: len(data)}, err
	})
	if err != nil || v.Len == 0 {
		return nil, err
	}
	return v.Parts[0], nil
}

// OffsetForTimestamp asks the remote tier first when it holds offsets below
// the local log (its records are older), then the local log.
func (p *CombinedPartition) OffsetForTimestamp(ctx context.Context, ts int64) (int64, int64, bool, error) {
	lo, err := p.local.Offsets(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	rp, _, ok, err := p.remoteOffsets(ctx, lo.LogStart)
	if err != nil {
		return 0, 0, false, fmt.Errorf("find timestamp %d in %s-%d in the remote tier: %w", ts, p.topic, p.partition, err)
	}
	if ok {
		off, t, found, err := rp.OffsetForTimestamp(ctx, ts)
		if err != nil && !unknownRemote(err) {
			return 0, 0, false, err
		}
		if found && off < lo.LogStart {
			return off, t, true, nil
		}
	}
	return p.local.OffsetForTimestamp(ctx, ts)
}

// AbortedTxns merges the remote tier's transactions below the local log
// start with the local ones.
func (p *CombinedPartition) AbortedTxns(ctx context.Context, from, to int64) ([]AbortedTxn, error) {
	local, err := p.local.AbortedTxns(ctx, from, to)
	if err != nil {
		return nil, err
	}
	lo, err := p.local.Offsets(ctx)
	if err != nil || from >= lo.LogStart {
		return local, err
	}
	rp, _, ok, err := p.remoteOffsets(ctx, lo.LogStart)
	if err != nil {
		return nil, fmt.Errorf("aborted transactions of %s-%d in the remote tier: %w", p.topic, p.partition, err)
	}
	if !ok {
		return local, nil
	}
	remote, err := rp.AbortedTxns(ctx, from, to)
	if unknownRemote(err) {
		return local, nil
	}
	if err != nil {
		return nil, err
	}
	type key struct {
		pid   int64
		first int64
	}
	seen := map[key]bool{}
	out := make([]AbortedTxn, 0, len(remote)+len(local))
	for _, t := range append(remote, local...) {
		if k := (key{t.ProducerID, t.FirstOffset}); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, nil
}

// Segments lists the remote segments below the local log, then the local
// ones.
func (p *CombinedPartition) Segments(ctx context.Context) ([]SegmentInfo, error) {
	local, err := p.local.Segments(ctx)
	if err != nil {
		return nil, err
	}
	rp, err := p.remotePart(ctx)
	if err != nil || rp == nil {
		return local, nil
	}
	sl, ok := rp.(SegmentLister)
	if !ok {
		return local, nil
	}
	remote, err := sl.Segments(ctx)
	if err != nil {
		return local, nil
	}
	firstLocal := p.log.LogStartOffset()
	if len(local) > 0 {
		firstLocal = min(firstLocal, local[0].BaseOffset)
	}
	out := make([]SegmentInfo, 0, len(remote)+len(local))
	for _, s := range remote {
		if s.BaseOffset < firstLocal {
			out = append(out, s)
		}
	}
	return append(out, local...), nil
}
