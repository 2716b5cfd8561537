package fetchcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tiered/tiered/localtier"
)

// LocalCatalog serves the partitions of a local-tier log dir (serve mode).
// Topics created while it serves are found on the next request.
type LocalCatalog struct {
	dir *localtier.LogDir
}

// NewLocalCatalog returns a catalog over dir. The caller keeps ownership of
// dir and closes it after the servers using the catalog stopped.
func NewLocalCatalog(dir *localtier.LogDir) *LocalCatalog {
	return &LocalCatalog{dir: dir}
}

// Topics lists the log dir's topics with their partitions and topic IDs
// (partition.metadata; none for a topic created before tiered gave its
// topics IDs).
func (c *LocalCatalog) Topics(ctx context.Context) ([]TopicInfo, error) {
	names := c.dir.Topics()
	out := make([]TopicInfo, 0, len(names))
	for _, name := range names {
		t, ok := c.dir.Topic(name)
		if !ok {
			continue // deleted meanwhile
		}
		ti := TopicInfo{Name: name, ID: t.ID.StringOrEmpty(), Partitions: make([]int32, len(t.Partitions))}
		for i := range t.Partitions {
			ti.Partitions[i] = int32(i)
		}
		out = append(out, ti)
	}
	return out, nil
}

// openLocal opens one partition of a log dir, an unknown one as this
// package's *UnknownTopicOrPartitionError.
func openLocal(dir *localtier.LogDir, topic string, partition int32) (*localtier.Log, error) {
	l, err := dir.Partition(topic, partition)
	if err != nil {
		var ue *localtier.UnknownTopicOrPartitionError
		if errors.As(err, &ue) {
			return nil, &UnknownTopicOrPartitionError{Topic: ue.Topic, Partition: ue.Partition}
		}
		return nil, fmt.Errorf("open partition %s-%d: %w", topic, partition, err)
	}
	return l, nil
}

// Partition returns one partition's log.
func (c *LocalCatalog) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	l, err := openLocal(c.dir, topic, partition)
	if err != nil {
		return nil, err
	}
	return NewLocalPartition(l), nil
}

// LocalPartition adapts a *localtier.Log to Partition and SegmentLister.
type LocalPartition struct {
	log *localtier.Log
}

// NewLocalPartition wraps l.
func NewLocalPartition(l *localtier.Log) *LocalPartition { return &LocalPartition{log: l} }

// Offsets reads the log's offsets from memory.
func (p *LocalPartition) Offsets(ctx context.Context) (Offsets, error) {
	// Three lock acquisitions, not one snapshot: clamp so that callers
	// always see start <= lso <= end.
	o := Offsets{LogStart: p.log.LogStartOffset(), LastStable: p.log.LastStableOffset(), LogEnd: p.log.LogEndOffset()}
	o.LastStable = min(max(o.LastStable, o.LogStart), o.LogEnd)
	o.LogStart = min(o.LogStart, o.LogEnd)
	return o, nil
}

// Read returns whole batches from the one holding offset, each checked by
// the log before it is returned (localtier.Log.Read: CRC, header, offsets
// within the segment and following one another); a batch failing them is
// a *record.CorruptError naming the segment file and position.
func (p *LocalPartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := p.log.Read(offset, maxBytes, true)
	if err != nil {
		var oe *localtier.OffsetOutOfRangeError
		if errors.As(err, &oe) {
			return nil, &OffsetOutOfRangeError{Offset: oe.Offset, LogStart: oe.LogStartOffset, LogEnd: oe.LogEndOffset, Where: WhereLocal}
		}
		return nil, fmt.Errorf("read %s at offset %d: %w", p.log.Dir(), offset, err)
	}
	return res.Data, nil
}

// OffsetForTimestamp looks the timestamp up in the log's time indexes.
func (p *LocalPartition) OffsetForTimestamp(ctx context.Context, ts int64) (int64, int64, bool, error) {
	off, t, found, err := p.log.OffsetForTimestamp(ts)
	if err != nil {
		return 0, 0, false, fmt.Errorf("find timestamp %d in %s: %w", ts, p.log.Dir(), err)
	}
	return off, t, found, nil
}

// AbortedTxns reads the segments' transaction indexes.
func (p *LocalPartition) AbortedTxns(ctx context.Context, from, to int64) ([]AbortedTxn, error) {
	txns := p.log.AbortedTxns(from, to)
	out := make([]AbortedTxn, len(txns))
	for i, t := range txns {
		out[i] = AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset}
	}
	slices.SortStableFunc(out, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, nil
}

// Segments lists the log's segments.
func (p *LocalPartition) Segments(ctx context.Context) ([]SegmentInfo, error) {
	segs := p.log.Segments()
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = SegmentInfo{BaseOffset: s.BaseOffset, NextOffset: s.NextOffset, SizeBytes: s.Size, MaxTimestamp: s.MaxTimestamp, Tier: "local"}
	}
	return out, nil
}
