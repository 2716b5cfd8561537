package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/x/ctxsleep"
)

// ReplaySource is where a replay reads: the fetch service (*httpapi.Client) or a
// catalog such as the bucket's (NewCatalogReplaySource).
type ReplaySource interface {
	// Partitions lists the topic's partitions, ascending; an unknown topic
	// is an *fetchcache.UnknownTopicOrPartitionError.
	Partitions(ctx context.Context, topic string) ([]int32, error)
	// TopicID is the topic ID (Kafka's string form) of the topic's
	// lineage the source serves now, as seen through partition; "" when
	// the topic has none or the source cannot tell. A topic deleted and
	// re-created under the same name has a new ID.
	TopicID(ctx context.Context, topic string, partition int32) (string, error)
	// Offsets returns the partition's log start and end offsets.
	Offsets(ctx context.Context, topic string, partition int32) (fetchcache.Offsets, error)
	// OffsetForTimestamp is the first offset with a record timestamp >= ts;
	// found is false when every record is older.
	OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (offset int64, found bool, err error)
	// ReadRaw returns whole batches from the one holding offset: at least
	// one below the log end, more while they fit in maxBytes, and the
	// topic ID of the lineage they were read from (RawRecords.TopicID, ""
	// when the source cannot tell): it costs no request of its own, so a
	// replay checks each answer against the ID it started on.
	ReadRaw(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (httpapi.RawRecords, error)
}

// catalogSource reads a fetchcache.Catalog directly (the bucket's fetchcache.RemoteCatalog, or a
// local one), retrying overload answers within a budget.
type catalogSource struct {
	cat    fetchcache.Catalog
	budget time.Duration
	sleep  func(ctx context.Context, d time.Duration) error
}

// NewCatalogReplaySource returns a ReplaySource over cat: for --bucket, a
// fetchcache.RemoteCatalog over a chunkcache.CachingBucket. Overload answers of the cache's
// gates are retried after their suggested delay for up to
// DefaultReplayThrottleBudget per read.
func NewCatalogReplaySource(cat fetchcache.Catalog) ReplaySource {
	return &catalogSource{cat: cat, budget: DefaultReplayThrottleBudget, sleep: ctxsleep.Sleep}
}

func (s *catalogSource) Partitions(ctx context.Context, topic string) ([]int32, error) {
	ts, err := s.cat.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	for _, t := range ts {
		if t.Name == topic {
			return t.Partitions, nil
		}
	}
	return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
}

// TopicID asks the partition (fresher than the catalog's topic listing,
// and no LIST): a catalog whose partitions do not know their topic ID
// answers "".
func (s *catalogSource) TopicID(ctx context.Context, topic string, partition int32) (string, error) {
	var id string
	err := s.retry(ctx, func() (err error) {
		id, _, err = fetchcache.PartitionTopicID(ctx, s.cat, topic, partition)
		return err
	})
	return id, err
}

// retry runs op again after each overload answer while the budget lasts.
func (s *catalogSource) retry(ctx context.Context, op func() error) error {
	budget := s.budget
	for {
		err := op()
		d, ok := httpapi.RetryAfter(err)
		if err == nil || !ok || d > budget {
			return err
		}
		budget -= d
		if err := s.sleep(ctx, d); err != nil {
			return err
		}
	}
}

func (s *catalogSource) Offsets(ctx context.Context, topic string, partition int32) (fetchcache.Offsets, error) {
	var off fetchcache.Offsets
	err := s.retry(ctx, func() error {
		p, err := s.cat.Partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		off, err = p.Offsets(ctx)
		return err
	})
	return off, err
}

func (s *catalogSource) OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (int64, bool, error) {
	var (
		off   int64
		found bool
	)
	err := s.retry(ctx, func() error {
		p, err := s.cat.Partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		off, _, found, err = p.OffsetForTimestamp(ctx, ts)
		return err
	})
	return off, found, err
}

func (s *catalogSource) ReadRaw(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (httpapi.RawRecords, error) {
	var res httpapi.RawRecords
	err := s.retry(ctx, func() error {
		p, err := s.cat.Partition(ctx, topic, partition)
		if err != nil {
			return err
		}
		off, err := p.Offsets(ctx)
		if err != nil {
			return err
		}
		data, err := p.Read(ctx, offset, maxBytes)
		if err != nil {
			return err
		}
		res = httpapi.RawRecords{Data: data, NextOffset: offset, LogStart: off.LogStart, LogEnd: off.LogEnd}
		// After the read: a manifest re-read during it that moved to
		// another lineage shows (IDs never change back).
		if ider, ok := p.(fetchcache.TopicIDer); ok {
			res.TopicID = ider.TopicID()
		}
		if len(data) > 0 {
			res.NextOffset = fetchcache.LastBatchNext(data)
		}
		return nil
	})
	if err != nil {
		return httpapi.RawRecords{}, fmt.Errorf("read %s-%d at offset %d: %w", topic, partition, offset, err)
	}
	return res, nil
}
