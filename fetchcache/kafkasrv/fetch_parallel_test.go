package kafkasrv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// barrier holds the first n calls that reach it until all n have arrived
// (then every later call passes at once), or until a deadline, after which
// it fails every call: a step that runs one partition after the other
// never gets n of them in at once.
type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
	// broken is closed when a call waited in vain: from then on every call
	// fails (a client's retry of the request must not pass it).
	broken    chan struct{}
	breakOnce sync.Once
	inside    atomic.Int64 // calls between arrive and leave
	maxInner  atomic.Int64 // the most ever inside at once
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, open: make(chan struct{}), broken: make(chan struct{})}
}

var errNotParallel = errors.New("barrier: the other partitions never came")

func (b *barrier) wait(ctx context.Context) error {
	in := b.inside.Add(1)
	defer b.inside.Add(-1)
	for m := b.maxInner.Load(); in > m && !b.maxInner.CompareAndSwap(m, in); m = b.maxInner.Load() {
	}
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.open)
	}
	b.mu.Unlock()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-b.broken:
		return errNotParallel
	default:
	}
	select {
	case <-b.open:
		return nil
	case <-t.C:
		b.breakOnce.Do(func() { close(b.broken) })
		return errNotParallel
	case <-b.broken:
		return errNotParallel
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedCatalog serves its partitions through a barrier: on Offsets, on
// reads, or both (the reads of the data, not the ones past the log end).
type gatedCatalog struct {
	fetchcache.Catalog
	offsets, reads *barrier
}

func (c *gatedCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return &gatedPartition{Partition: part, c: c}, nil
}

type gatedPartition struct {
	fetchcache.Partition
	c *gatedCatalog
}

func (p *gatedPartition) Offsets(ctx context.Context) (fetchcache.Offsets, error) {
	if p.c.offsets != nil {
		if err := p.c.offsets.wait(ctx); err != nil {
			return fetchcache.Offsets{}, err
		}
	}
	return p.Partition.Offsets(ctx)
}

func (p *gatedPartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	if p.c.reads != nil {
		if err := p.c.reads.wait(ctx); err != nil {
			return nil, err
		}
	}
	return p.Partition.Read(ctx, offset, maxBytes)
}

// smallTopic is an env holding a local topic of parts partitions of 50
// records each.
func smallTopic(t *testing.T, topic string, parts int) *fetchkit.Env {
	t.Helper()
	e := fetchkit.NewEnv(t)
	e.Topic(topic, parts, map[string]string{"internal.segment.bytes": "1048576"})
	for p := range int32(parts) {
		e.Produce(e.Log(topic, p), fetchkit.ProduceOpts{}, fetchkit.GenRecs(50, ts0, fmt.Sprint(topic, p)))
	}
	return e
}

// TestKafkaFetchFillsPartitionsInParallel: the partitions named in one
// Fetch are filled at once — their offsets (a remote partition's manifest)
// and their data (its chunks) — at most FetchFillConcurrency at a time:
// every partition's step waits until all of them are in it, which a fill
// of one partition after the other never gets past, and the answer is
// every partition's data.
func TestKafkaFetchFillsPartitionsInParallel(t *testing.T) {
	const parts = 8
	e := smallTopic(t, "par", parts)
	tests := []struct {
		name        string
		concurrency int // FetchFillConcurrency
		offsets     bool
		reads       bool
		together    int // the barrier: calls that must be in at once
		partMax     int
		maxTotal    int
	}{
		{"offsets", 0, true, false, parts, 1 << 20, 50 << 20},
		{"reads", 0, false, true, parts, 1 << 20, 50 << 20},
		{"both", 0, true, true, parts, 1 << 20, 50 << 20},
		{"bounded", 3, false, true, 3, 1 << 20, 50 << 20},
		// The Fetch's max bytes run out in the first partition: the
		// others are still read together (the wave's tail), not one
		// after the other to find that nothing more fits.
		{"max_bytes_run_out", 0, false, true, parts, 2 << 10, 2<<10 + 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := &gatedCatalog{Catalog: e.Cat}
			if tt.offsets {
				cat.offsets = newBarrier(tt.together)
			}
			if tt.reads {
				cat.reads = newBarrier(tt.together)
			}
			addr := startKafka(t, cat, KafkaOptions{FetchFillConcurrency: tt.concurrency})
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
			var pairs []any
			for p := range int32(parts) {
				pairs = append(pairs, "par", p)
			}
			req := fetchOf(0, int32(tt.partMax), pairs...)
			req.MaxBytes = int32(tt.maxTotal)
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			want := sequentialFill(t, e.Cat, "par", make([]int64, parts), tt.partMax, tt.maxTotal)
			for i, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 || !bytes.Equal(rp.RecordBatches, want[i]) {
						t.Fatalf("partition %d: error %d, %d bytes; want %d bytes (its fill waited for the others in vain)", rp.Partition, rp.ErrorCode, len(rp.RecordBatches), len(want[i]))
					}
				}
			}
			if len(want[0]) == 0 {
				t.Fatal("the case reads nothing: it tests nothing")
			}
			for _, b := range []*barrier{cat.offsets, cat.reads} {
				if b != nil && tt.concurrency > 0 && b.maxInner.Load() > int64(tt.concurrency) {
					t.Fatalf("%d partitions filled at once, over FetchFillConcurrency %d", b.maxInner.Load(), tt.concurrency)
				}
			}
		})
	}
}

// sequentialFill is the reference for what one Fetch returns: Kafka's
// read of the partitions one after the other in request order, each
// given min(its max bytes, what the earlier ones left of the Fetch's max
// bytes), the first with data keeping at least one whole batch (KIP-74),
// a later one nothing when its first batch does not fit.
func sequentialFill(t *testing.T, cat fetchcache.Catalog, topic string, offsets []int64, partMax, maxTotal int) [][]byte {
	t.Helper()
	ctx := context.Background()
	out := make([][]byte, len(offsets))
	total := 0
	for p, off := range offsets {
		part, err := cat.Partition(ctx, topic, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		o, err := part.Offsets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		budget := min(partMax, maxTotal-total)
		if off >= o.LogEnd || budget <= 0 && total > 0 {
			continue
		}
		data, err := part.Read(ctx, off, max(budget, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 || total > 0 && len(data) > budget {
			continue
		}
		out[p] = data
		total += len(data)
	}
	return out
}

// TestKafkaFetchParallelFillIsSequential: filled in parallel, a Fetch
// answers exactly what the sequential fill of its partitions in request
// order does, under every kind of limit: partitions with less data than
// their max bytes (whose unused share goes to the later ones), the
// Fetch's max bytes running out part-way through a partition, a first
// batch larger than every limit, partitions at their log end, and one
// partition's max bytes of 0.
func TestKafkaFetchParallelFillIsSequential(t *testing.T) {
	const parts = 6
	e := fetchkit.NewEnv(t)
	e.Topic("seq", parts, map[string]string{"internal.segment.bytes": "1048576"})
	sizes := []int{20, 400, 5, 400, 0, 300} // records per partition
	for p, n := range sizes {
		e.Produce(e.Log("seq", int32(p)), fetchkit.ProduceOpts{}, fetchkit.GenRecs(n, ts0, fmt.Sprint("seq", p)))
	}
	// Partition 2 ends with a batch of ~24 KB, over every limit below.
	big := make([]fetchkit.Rec, 4)
	for i := range big {
		big[i] = fetchkit.Rec{Timestamp: ts0 + int64(i), Value: bytes.Repeat([]byte{'b'}, 6000)}
	}
	e.Produce(e.Log("seq", 2), fetchkit.ProduceOpts{Per: 4}, big)
	zero := make([]int64, parts)
	atBig := []int64{20, 400, 5, 400, 0, 300} // partition 2 at its big batch, the others at their end
	atBig[0], atBig[2] = 20, 5
	tests := []struct {
		name        string
		offsets     []int64
		partMax     int
		maxTotal    int
		concurrency int
	}{
		{"roomy", zero, 1 << 20, 50 << 20, 0},
		{"fetch_max_midway", zero, 8 << 10, 13 << 10, 0},
		{"fetch_max_tight", zero, 4 << 10, 5 << 10, 0},
		{"fetch_max_below_part", zero, 16 << 10, 3 << 10, 0},
		{"one_at_a_time", zero, 8 << 10, 13 << 10, 1},
		{"two_at_a_time", zero, 6 << 10, 20 << 10, 2},
		{"big_first_batch", atBig, 4 << 10, 6 << 10, 0},
		{"part_max_zero", zero, 0, 50 << 20, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := sequentialFill(t, e.Cat, "seq", tt.offsets, tt.partMax, tt.maxTotal)
			addr := startKafka(t, e.Cat, KafkaOptions{FetchFillConcurrency: tt.concurrency})
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
			var pairs []any
			for p := range int32(parts) {
				pairs = append(pairs, "seq", p)
			}
			req := fetchOf(0, int32(tt.partMax), pairs...)
			req.MaxBytes = int32(tt.maxTotal)
			for i := range req.Topics {
				req.Topics[i].Partitions[0].FetchOffset = tt.offsets[i]
			}
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != parts {
				t.Fatalf("response has %d topics; want the request's %d", len(resp.Topics), parts)
			}
			some := false
			for i, rt := range resp.Topics {
				if len(rt.Partitions) != 1 {
					t.Fatalf("topic entry %d has %d partitions; want 1", i, len(rt.Partitions))
				}
				rp := rt.Partitions[0]
				if rp.Partition != int32(i) || rp.ErrorCode != 0 {
					t.Fatalf("partition %d at place %d, error %d", rp.Partition, i, rp.ErrorCode)
				}
				if !bytes.Equal(rp.RecordBatches, want[i]) {
					t.Errorf("partition %d: %d bytes, the sequential fill %d", i, len(rp.RecordBatches), len(want[i]))
				}
				some = some || len(want[i]) > 0
			}
			if !some {
				t.Fatal("the case reads nothing: it tests nothing")
			}
		})
	}
}
