package kafkasrv

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// demandCatalog records the objstore.DemandGroup each read of its
// partitions is made in, and asks for the read's bytes at once, as a
// caching bucket does when it claims the read's loads.
type demandCatalog struct {
	fetchcache.Catalog
	mu       sync.Mutex
	groups   map[int32]*objstore.DemandGroup
	took     int // callbacks the groups took
	settled  int // and ran
	sawOwn   int // reads that saw their group pending before they asked
	noGroups int // reads made outside any group
}

func (c *demandCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return &demandPartition{Partition: part, c: c, p: p}, nil
}

type demandPartition struct {
	fetchcache.Partition
	c *demandCatalog
	p int32
}

func (p *demandPartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	g := objstore.DemandOf(ctx)
	c := p.c
	c.mu.Lock()
	if g == nil {
		c.noGroups++
	} else {
		c.groups[p.p] = g
		c.sawOwn++
	}
	c.mu.Unlock()
	if g != nil && g.OnSettled(func() { c.mu.Lock(); c.settled++; c.mu.Unlock() }) {
		c.mu.Lock()
		c.took++
		c.mu.Unlock()
	}
	objstore.DemandAsked(ctx)
	return p.Partition.Read(ctx, offset, maxBytes)
}

// TestKafkaFetchReadsAskTogether: the partitions of one Fetch wave are read
// in one objstore.DemandGroup (so their read-ahead waits until every one
// of them has asked for its own bytes), at most FetchFillConcurrency at a
// time or not; the group settles once, after the last read asked. A Fetch
// of one partition reads outside any group.
func TestKafkaFetchReadsAskTogether(t *testing.T) {
	const parts = 6
	e := smallTopic(t, "dem", parts)
	for _, concurrency := range []int{0, 2} {
		t.Run(fmt.Sprint("concurrency=", concurrency), func(t *testing.T) {
			cat := &demandCatalog{Catalog: e.Cat, groups: map[int32]*objstore.DemandGroup{}}
			addr := startKafka(t, cat, KafkaOptions{FetchFillConcurrency: concurrency})
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
			var pairs []any
			for p := range int32(parts) {
				pairs = append(pairs, "dem", p)
			}
			resp, err := fetchOf(0, 1<<20, pairs...).RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
						t.Fatalf("partition %d: error %d, %d bytes", rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
					}
				}
			}
			cat.mu.Lock()
			g0 := cat.groups[0]
			for p := range int32(parts) {
				if g := cat.groups[p]; g == nil || g != g0 {
					t.Fatalf("partition %d read in group %p, partition 0 in %p: want one group for the Fetch", p, g, g0)
				}
			}
			if cat.sawOwn != parts || cat.noGroups != 0 {
				t.Fatalf("%d reads saw their group pending, %d had none; want %d and 0", cat.sawOwn, cat.noGroups, parts)
			}
			if g0.Pending() || cat.took == 0 || cat.settled != cat.took {
				t.Fatalf("group pending %v; %d callbacks taken, %d ran", g0.Pending(), cat.took, cat.settled)
			}
			cat.mu.Unlock()
			if _, err := fetchOf(0, 1<<20, "dem", int32(0)).RequestWith(context.Background(), cl); err != nil {
				t.Fatal(err)
			}
			cat.mu.Lock()
			defer cat.mu.Unlock()
			if cat.noGroups != 1 {
				t.Fatalf("a Fetch of one partition: %d reads outside a group, want 1", cat.noGroups)
			}
		})
	}
}
