package kafkasrv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// heldLoads holds the chunk loads (range GETs from a .log's first byte) of
// the objects whose key contains one of the marks, until released.
type heldLoads struct {
	objstore.BucketReader
	marks    []string
	mu       sync.Mutex
	released chan struct{}
}

func (b *heldLoads) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	b.mu.Lock()
	marks := b.marks
	b.mu.Unlock()
	if off == 0 && strings.HasSuffix(key, ".log") {
		for _, m := range marks {
			if strings.Contains(key, m) {
				select {
				case <-b.released:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
	}
	return b.BucketReader.GetRange(ctx, key, off, n)
}

func (b *heldLoads) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.released:
	default:
		close(b.released)
	}
}

// uploadedTopic is a remote-storage topic of parts partitions, each of
// recs records of 1,000-byte values in batches of 16 and segments of 256
// KiB, all rolled and uploaded to a new memory bucket.
func uploadedTopic(t *testing.T, topic string, parts, recs int) *objstore.Memory {
	t.Helper()
	e := fetchkit.NewEnv(t)
	e.Topic(topic, parts, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "262144"})
	val := bytes.Repeat([]byte{'v'}, 1000)
	for p := range int32(parts) {
		l := e.Log(topic, p)
		rs := make([]fetchkit.Rec, recs)
		for i := range rs {
			rs[i] = fetchkit.Rec{Timestamp: ts0 + int64(i), Key: []byte(fmt.Sprint(i)), Value: val}
		}
		e.Produce(l, fetchkit.ProduceOpts{Per: 16}, rs)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	return mem
}

// TestKafkaColdFetchAnswersWithoutTheTail: a cold Fetch whose first
// partition fills its max bytes answers at once with that partition's
// data, while the store still holds the loads of the partitions after it,
// which get nothing (and no error) instead of costing the response a GET
// each; those loads go on, and the next Fetch finds their data.
func TestKafkaColdFetchAnswersWithoutTheTail(t *testing.T) {
	const parts = 4
	mem := uploadedTopic(t, "tail", parts, 400)
	held := &heldLoads{BucketReader: mem, released: make(chan struct{})}
	t.Cleanup(held.release)
	_, cat := fetchkit.CachedCatalog(t, held, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20}, fetchcache.RemoteCatalogOptions{})
	// The partitions' ends are checked (as ListOffsets would) before the
	// loads of their first chunks are held.
	for p := range int32(parts) {
		part, err := cat.Partition(context.Background(), "tail", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := part.Offsets(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	held.mu.Lock()
	held.marks = []string{"/tail-1/", "/tail-2/", "/tail-3/"}
	held.mu.Unlock()
	addr := startKafka(t, cat, KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	const partMax = 64 << 10
	req := fetchOf(0, partMax, "tail", int32(0), "tail", int32(1), "tail", int32(2), "tail", int32(3))
	req.MaxBytes = partMax + 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("the Fetch waited for the held loads of the partitions after the first: %v", err)
	}
	for i, rt := range resp.Topics {
		rp := rt.Partitions[0]
		switch {
		case rp.ErrorCode != 0:
			t.Fatalf("partition %d: error %d", i, rp.ErrorCode)
		case i == 0 && len(rp.RecordBatches) == 0:
			t.Fatal("partition 0 answered no data")
		case i > 0 && len(rp.RecordBatches) > 0:
			t.Fatalf("partition %d answered %d bytes while its load is held", i, len(rp.RecordBatches))
		}
	}
	held.release()
	// The loads the first Fetch started bring the data in.
	deadline := time.Now().Add(10 * time.Second)
	for p := int32(1); p < parts; p++ {
		for {
			r := fetchOf(0, partMax, "tail", p)
			resp, err := r.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if rp := resp.Topics[0].Partitions[0]; rp.ErrorCode != 0 || len(rp.RecordBatches) > 0 {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: error %d", p, rp.ErrorCode)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d answers no data after its loads were released", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
