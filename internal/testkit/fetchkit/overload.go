package fetchkit

import (
	"context"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
)

// OverloadedPartition answers reads (and timestamp lookups) as an
// overloaded store does.
type OverloadedPartition struct{ fetchcache.Partition }

func (p OverloadedPartition) Read(context.Context, int64, int) ([]byte, error) {
	return nil, &gate.OverloadedError{Gate: gate.Bytes, RetryAfter: 1500 * time.Millisecond}
}

func (p OverloadedPartition) OffsetForTimestamp(context.Context, int64) (int64, int64, bool, error) {
	return 0, 0, false, &gate.OverloadedError{Gate: gate.Gets, RetryAfter: 700 * time.Millisecond}
}

// OverloadedCatalog serves its partitions as OverloadedPartitions.
type OverloadedCatalog struct{ fetchcache.Catalog }

func (c OverloadedCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return OverloadedPartition{part}, nil
}
