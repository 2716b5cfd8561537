package kafkasrv

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
)

// indexGets counts the range GETs of segment index objects.
type indexGets struct {
	objstore.BucketReader
	n atomic.Int64
}

func (b *indexGets) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if !strings.HasSuffix(key, ".log") {
		b.n.Add(1)
	}
	return b.BucketReader.GetRange(ctx, key, off, n)
}

// TestKafkaCutFetchNeedsNoIndex: consumers fetching many partitions at
// once get some of them cut by the response's max bytes (the batches that
// fit, not all a read found); each such partition's next Fetch, at the
// offset after the batches it was sent, continues its sequential read
// without a GET of the segment's index. Every partition is read whole, its
// batches' offsets contiguous to the high watermark.
func TestKafkaCutFetchNeedsNoIndex(t *testing.T) {
	const (
		parts   = 4
		recs    = 400
		partMax = 64 << 10
	)
	mem := uploadedTopic(t, "cut", parts, recs)
	// Cuts fall where a partition's read came back short (at its
	// segment's end), leaving a later one of the wave less room than its
	// read found: several max bytes, so that some do. Without the cuts'
	// streams (View.Served) the reads after them make index GETs.
	for maxBytes := partMax + partMax/2; maxBytes < 4*partMax; maxBytes += 7919 {
		t.Run(fmt.Sprintf("max_bytes=%d", maxBytes), func(t *testing.T) {
			if gets, short := readCut(t, mem, parts, recs, partMax, int32(maxBytes)); gets != 0 {
				t.Fatalf("reading %d partitions sequentially (%d answers short of the partitions' max bytes), made %d index GETs, want none", parts, short, gets)
			}
		})
	}
}

// readCut reads every partition of topic cut (recs records each) to its
// end through a new cache and Kafka listener, in Fetches of all the
// partitions not yet read with the given max bytes, checking that each
// partition's batches follow one another. It returns the GETs of index
// objects and the answers that came back short of the partition's max
// bytes before its end (at a segment's end, or cut).
func readCut(t *testing.T, mem objstore.BucketReader, parts int32, recs int64, partMax, maxBytes int32) (gets, short int64) {
	t.Helper()
	ctx := context.Background()
	counted := &indexGets{BucketReader: mem}
	_, cat := fetchkit.CachedCatalog(t, counted, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20}, fetchcache.RemoteCatalogOptions{})
	for p := range parts {
		part, err := cat.Partition(ctx, "cut", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := part.Offsets(ctx); err != nil { // the end checks, which may read an index
			t.Fatal(err)
		}
	}
	before := counted.n.Load()
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(startKafka(t, cat, KafkaOptions{})))
	defer cl.Close()
	next := make([]int64, parts)
	for round := 0; ; round++ {
		if round == 1000 {
			t.Fatalf("max bytes %d: not read to the end in %d rounds: at %v", maxBytes, round, next)
		}
		var pairs []any
		for p := range parts {
			if next[p] < recs {
				pairs = append(pairs, "cut", p)
			}
		}
		if len(pairs) == 0 {
			break
		}
		req := fetchOf(0, partMax, pairs...)
		req.MaxBytes = maxBytes
		for i := range req.Topics {
			req.Topics[i].Partitions[0].FetchOffset = next[pairs[2*i+1].(int32)]
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			rp := rt.Partitions[0]
			if rp.ErrorCode != 0 {
				t.Fatalf("max bytes %d: partition %d at %d: error %d", maxBytes, rp.Partition, next[rp.Partition], rp.ErrorCode)
			}
			it := record.NewIter(rp.RecordBatches)
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				if b.BaseOffset() != next[rp.Partition] {
					t.Fatalf("max bytes %d: partition %d: batch at %d, want %d", maxBytes, rp.Partition, b.BaseOffset(), next[rp.Partition])
				}
				next[rp.Partition] = b.NextOffset()
			}
			if n := len(rp.RecordBatches); n > 0 && n < int(partMax)-20<<10 && next[rp.Partition] < recs {
				short++
			}
		}
	}
	return counted.n.Load() - before, short
}
