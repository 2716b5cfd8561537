package remotetier

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// agedSource is a memSource whose segment late fails its first open once
// segment early was opened, after moving the clock past the attempt age:
// its retry is a fresh attempt while early's is too old to commit.
type agedSource struct {
	*memSource
	clock       *atomic.Int64 // Unix ns
	early, late int64
	opened      chan struct{}
	once        sync.Once
	failed      atomic.Bool
	// slowEarly: every open of early takes past the attempt age (a segment
	// too slow to store in time).
	slowEarly atomic.Bool
}

func (s *agedSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	switch seg.BaseOffset {
	case s.early:
		if s.slowEarly.Load() {
			s.clock.Add(int64(2 * time.Hour))
		}
		s.once.Do(func() { close(s.opened) })
	case s.late:
		if !s.failed.Swap(true) {
			<-s.opened
			s.clock.Add(int64(2 * time.Hour))
			return nil, errors.New("transient read error")
		}
	}
	return s.memSource.Open(ctx, p, seg)
}

// TestTooOldAppendHoldsLaterAppends: of one commit's appends, the first
// is dropped as too old to commit (its attempt began long ago; the next
// one's was retried, so it is fresh). The appends after it were committed
// anyway, past a hole where its records are: in a partition that is not
// compacted the hole was recorded as lost (the source still holds it), in
// a compacted one readers skipped it as the cleaner's, and either way the
// segment was never uploaded again (every offset of it lies below the
// committed end: Reconcile skips it). On the first commit the remote log
// even starts after it.
func TestTooOldAppendHoldsLaterAppends(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compacted bool
		first     bool // the appends are the partition's first commit
	}{
		{"first commit", false, true},
		{"later commit", false, false},
		{"compacted", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			ms := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
			ms.p.Compacted = tc.compacted
			var clock atomic.Int64
			clock.Store(upNow.UnixNano())
			now := func() time.Time { return time.Unix(0, clock.Load()) }
			if !tc.first {
				ms.p.Segments = []SegmentMeta{ms.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...))}
				if _, err := upUploader(t, mem, ms, Options{Now: now}).RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ms.p.Segments = append(ms.p.Segments,
				ms.segment(10, 20, 20, ccRecords(t, 10, ccSeq("k", 10, 20, "v")...)),
				ms.segment(20, 30, 30, ccRecords(t, 20, ccSeq("k", 20, 30, "v")...)))
			src := &agedSource{memSource: ms, clock: &clock, early: 10, late: 20, opened: make(chan struct{})}
			u := upUploader(t, mem, src, Options{Now: now})
			for range 3 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			m := upLoad(t, mem, "c", 0)
			if len(m.Gaps) != 0 {
				t.Errorf("gaps %+v recorded lost: the source holds every offset", m.Gaps)
			}
			var held []int64
			for _, s := range upAllSegments(t, mem, m) {
				held = append(held, s.BaseOffset)
			}
			if m.NextOffset() != 30 || len(held) == 0 || held[len(held)-1] != 20 || m.LogStartOffset > 10 {
				t.Fatalf("segments at %v, log start %d, end %d; want [10, 19] and [20, 29] uploaded", held, m.LogStartOffset, m.NextOffset())
			}
			if held[len(held)-2] != 10 {
				t.Fatalf("segments at %v: [10, 19], which the source holds, was never uploaded", held)
			}
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}

// TestTooOldReplaceHoldsLaterReplaces: the cleaner dropped K=v (17) and,
// later, K's tombstone (35); [0, 19] and [20, 39] are replaced in offset
// order, so the value goes before its tombstone. When the replace of
// [0, 19] was too old to commit and the one of [20, 39] (retried) was not,
// the tombstone went alone: the remote tier served deleted key K again,
// until a pass stored [0, 19] in time (never, for a segment too slow to
// store within the attempt age).
func TestTooOldReplaceHoldsLaterReplaces(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	ms, r0, r1 := ccDeletedKeyLog(t)
	var clock atomic.Int64
	clock.Store(upNow.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	if _, err := upUploader(t, mem, ms, Options{Now: now}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	ccCleanDeletedKey(t, ms, r0, r1)
	src := &agedSource{memSource: ms, clock: &clock, early: 0, late: 20, opened: make(chan struct{})}
	src.slowEarly.Store(true)
	u := upUploader(t, mem, src, Options{Now: now})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, table := ecConsume(t, mem, "c"); table["K"] != "" {
		t.Fatalf("the remote tier serves deleted key K=%s (its tombstone replaced away before it): %v", table["K"], recs)
	}
	src.slowEarly.Store(false)
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, table := ecConsume(t, mem, "c"); table["K"] != "" || ecHas(recs, "35:K=<tombstone>") || ecHas(recs, "17:K=v") {
		t.Fatalf("after a further pass the remote tier serves %v", recs)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}
