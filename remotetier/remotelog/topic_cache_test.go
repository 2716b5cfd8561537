package remotelog

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// slowGets counts and delays every Get.
type slowGets struct {
	objstore.Bucket
	n atomic.Int64
}

func (b *slowGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.n.Add(1)
	time.Sleep(50 * time.Millisecond)
	return b.Bucket.Get(ctx, key)
}

// TestRereadShared: re-reads of one topic asked side by side (the end
// checks of a topic's partitions, each opening a pinned log) share one read
// of its topic object, and answer what it says now.
func TestRereadShared(t *testing.T) {
	mem := objstore.NewMemory()
	s, _, _, err := manifest.ObserveTopic("", "orders", nil, manifest.Observation{TopicID: "o3Bx6y0QQxyxS2FrDcDiOw", Partitions: 8, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	b := &slowGets{Bucket: mem}
	c := NewTopicCache(time.Hour, 0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, id, err := c.Reread(context.Background(), b, "", "orders"); err != nil || id != "o3Bx6y0QQxyxS2FrDcDiOw" {
				t.Errorf("reread: %q, %v", id, err)
			}
		})
	}
	wg.Wait()
	if n := b.n.Load(); n > 2 {
		t.Fatalf("8 re-reads asked together read the topic object %d times", n)
	}
}
