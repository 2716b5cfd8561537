package kafkasrv

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// coldCatalog serves its partitions as a caching bucket would before their
// data is cached: a cached-only read answers ErrNotCached (and would start
// the loads), a prefetch read is recorded and answers the same; other
// reads are served.
type coldCatalog struct {
	fetchcache.Catalog
	mu         sync.Mutex
	prefetches []string // "partition@offset/maxBytes", in the order asked
}

func (c *coldCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return &coldPartition{Partition: part, c: c, p: p}, nil
}

func (c *coldCatalog) taken() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.prefetches)
}

type coldPartition struct {
	fetchcache.Partition
	c *coldCatalog
	p int32
}

func (p *coldPartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	if objstore.Prefetch(ctx) {
		p.c.mu.Lock()
		p.c.prefetches = append(p.c.prefetches, fmt.Sprintf("%d@%d/%d", p.p, offset, maxBytes))
		p.c.mu.Unlock()
	}
	if objstore.CachedOnly(ctx) {
		return nil, fmt.Errorf("read %d at %d: %w", p.p, offset, objstore.ErrNotCached)
	}
	return p.Partition.Read(ctx, offset, maxBytes)
}

// TestKafkaFetchReloadsWhatItMissed: the partitions a Fetch answered
// empty because their cached-only reads missed (their read-ahead took only
// free capacity, which the Fetch's own loads held) are asked for again
// once the Fetch has its answer, as prefetch reads (objstore.WithPrefetch)
// at their fetch offsets and max bytes, in request order, up to twice the
// Fetch's max bytes of them (reloadResponses); the partitions it answered,
// and a Fetch that missed nothing, prefetch nothing.
func TestKafkaFetchReloadsWhatItMissed(t *testing.T) {
	const (
		parts   = 8
		partMax = 6 << 10
	)
	e := fetchkit.NewEnv(t)
	e.Topic("tl", parts, nil)
	for p := range int32(parts) {
		e.Produce(e.Log("tl", p), fetchkit.ProduceOpts{Per: 4}, fetchkit.GenRecs(200, ts0, fmt.Sprint("tl", p)))
	}
	cat := &coldCatalog{Catalog: e.Cat}
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(startKafka(t, cat, KafkaOptions{})))
	ctx := context.Background()
	var pairs []any
	for p := range int32(parts) {
		pairs = append(pairs, "tl", p)
	}
	// The first partition's max bytes exceed the Fetch's: it is planned
	// all of them, and every partition after it starts the tail, read
	// cached-only: they miss. Their prefetches stop once they reach twice
	// the Fetch's max bytes: 6 of the 7.
	req := fetchOf(0, partMax, pairs...)
	req.MaxBytes = 16 << 10
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 20
	req.Topics[2].Partitions[0].FetchOffset = 7
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var empty []int32
	for _, rt := range resp.Topics {
		if rp := rt.Partitions[0]; rp.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
		} else if len(rp.RecordBatches) == 0 {
			empty = append(empty, rp.Partition)
		}
	}
	if !slices.Equal(empty, []int32{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("empty answers of partitions %v, want 1 to 7 (missed)", empty)
	}
	// Each within what is left of twice the Fetch's max bytes: the sixth
	// 2 KiB.
	want := []string{fmt.Sprintf("1@0/%d", partMax), fmt.Sprintf("2@7/%d", partMax)}
	for p := 3; p <= 5; p++ {
		want = append(want, fmt.Sprintf("%d@0/%d", p, partMax))
	}
	want = append(want, fmt.Sprintf("6@0/%d", 2*(16<<10)-5*partMax))
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(cat.taken(), want) {
		if time.Now().After(deadline) || len(cat.taken()) > len(want) {
			t.Fatalf("prefetches %v, want %v", cat.taken(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A Fetch that misses nothing prefetches nothing.
	if _, err := fetchOf(0, partMax, "tl", int32(0)).RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a wrong prefetch would show within it; none may ever
	if got := cat.taken(); !slices.Equal(got, want) {
		t.Fatalf("after a Fetch that missed nothing: prefetches %v, want still %v", got, want)
	}
}
