package remotetier

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// beforeRootWrite runs hook once, just before the first root manifest
// write through it: another writer commits under the uploader's feet.
type beforeRootWrite struct {
	objstore.Bucket
	once sync.Once
	hook func()
}

func (b *beforeRootWrite) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	if strings.HasSuffix(key, "manifest.json") {
		b.once.Do(b.hook)
	}
	return b.Bucket.Put(ctx, key, r, size, cond)
}

// TestRaceLostAppendHoldsLaterAppends: two sidecars upload one partition
// (the old leader's has not learned it no longer leads; or leadership is
// unknown and every replica uploads), their segments rolled at other
// offsets. The old leader commits [10, 14] while the new leader's commit
// of [10, 19] and [20, 29] is in flight; the new leader's write loses the
// race, and against the re-read root [10, 19] overlaps the committed end
// (dropped) while [20, 29] still appends. It was committed past the hole
// [15, 19], recorded lost though both sources hold it (a compacted
// partition served it as the cleaner's), and [10, 19] was never offered
// again: every offset of it lies below the committed end.
func TestRaceLostAppendHoldsLaterAppends(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		name := "delete"
		if compacted {
			name = "compacted"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			recs := ccSeq("k", 0, 30, "v")
			src := func(rolls ...int64) *memSource {
				s := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
				s.p.Compacted, s.p.CleanedUpTo = compacted, 0
				prev := int64(0)
				for _, r := range rolls {
					s.p.Segments = append(s.p.Segments, s.segment(prev, r, r, ccRecords(t, prev, recs[prev:r]...)))
					prev = r
				}
				return s
			}
			if _, err := upUploader(t, mem, src(10), Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			old := upUploader(t, mem, src(10, 15), Options{})
			bkt := &beforeRootWrite{Bucket: mem, hook: func() {
				if _, err := old.RunOnce(ctx); err != nil {
					t.Error(err)
				}
			}}
			lead := src(10, 20, 30)
			u := upUploader(t, bkt, lead, Options{})
			for range 3 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			m := upLoad(t, mem, "c", 0)
			if len(m.Gaps) != 0 {
				t.Errorf("gaps %+v recorded lost: both sources hold every offset", m.Gaps)
			}
			got, _ := ecConsume(t, mem, "c")
			if len(got) != 30 || m.NextOffset() != 30 {
				t.Fatalf("the remote tier serves %d records to %d, want 30 (offsets 0..29): %v", len(got), m.NextOffset(), got)
			}
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}
