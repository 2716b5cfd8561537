package remotetier

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// deleteCounter counts deletions per key.
type deleteCounter struct {
	objstore.Bucket
	mu      sync.Mutex
	deletes map[string]int
}

func (b *deleteCounter) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	b.deletes[key]++
	b.mu.Unlock()
	return b.Bucket.Delete(ctx, key)
}

// TestSidecarRemoteRetention: two sidecars over one bucket apply remote
// retention.bytes in every pass, concurrently. The one that leads counts
// the whole log (remote and source segments), as Kafka; the other only
// the remote segments. The manifest moves first, each unreferenced object
// is deleted exactly once, every segment still listed stays readable, and
// the source log dir is never written.
func TestSidecarRemoteRetention(t *testing.T) {
	ctx := context.Background()
	dir, _, l, _ := upBrokerLog(t, 6)
	local := l.Segments()
	var total int64
	for _, s := range local {
		total += s.Size
	}
	segSize := local[0].Size
	// Keep room for the source's log minus a little more than two segments:
	// Kafka's rule deletes the two oldest (whole) segments.
	limit := total - 2*segSize - segSize/2
	cfg := topicconfig.Defaults()
	cfg.RetentionBytes = limit
	want := retention.Remote(append(remoteSegs(local[:len(local)-1]), retention.FromLog(local[len(local)-1:])...), cfg, 0, upNow)
	if len(want.Delete) != 2 {
		t.Fatalf("test setup: Kafka's rule deletes %d segments, want 2", len(want.Delete))
	}

	mem := &deleteCounter{Bucket: objstore.NewMemory(), deletes: map[string]int{}}
	up := func(leader bool) (*Uploader, *RetentionMetrics) {
		view, err := localtier.OpenBrokerView(&readOnlyFS{FS: vfs.Default, t: t}, dir)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		rm, err := NewRetentionMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		u := upUploader(t, mem, NewBrokerSource(view, &readOnlyFS{FS: vfs.Default, t: t}), Options{Registerer: reg, RetentionMetrics: rm,
			RemoteRetention: func(p Partition) (RetentionRule, bool) {
				return RetentionRule{Config: cfg, CountSource: leader}, true
			}})
		return u, rm
	}
	a, am := up(true)
	b, bm := up(false)
	var wg sync.WaitGroup
	for _, u := range []*Uploader{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	m := upLoad(t, mem, "orders", 0)
	if m.LogStartOffset != want.NewLogStartOffset {
		t.Fatalf("log start %d after retention, want %d (Kafka's rule over the whole log)", m.LogStartOffset, want.NewLogStartOffset)
	}
	for k, n := range mem.deletes {
		if n > 1 {
			t.Errorf("%s deleted %d times", k, n)
		}
	}
	deleted := testutil.ToFloat64(am.segments.WithLabelValues(string(retention.ReasonRetentionBytes))) +
		testutil.ToFloat64(bm.segments.WithLabelValues(string(retention.ReasonRetentionBytes)))
	if deleted != 2 {
		t.Fatalf("the sidecars counted %v remote deletions, want 2", deleted)
	}
	for _, s := range upAllSegments(t, mem, m) {
		upCheckObjects(t, mem, s)
	}
	if len(l.Segments()) != len(local) {
		t.Fatal("the source log changed")
	}

	// Alone, with a limit one segment below the whole log (remote and
	// source): the leader deletes the oldest segment, a sidecar counting
	// only the remote segments deletes nothing (never more than Kafka).
	active := local[len(local)-1].Size
	cfg.RetentionBytes = total - segSize
	for _, leader := range []bool{true, false} {
		mem = &deleteCounter{Bucket: objstore.NewMemory(), deletes: map[string]int{}}
		u, _ := up(leader)
		for range 2 {
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wantStart := int64(0)
		if leader {
			wantStart = local[1].BaseOffset
		}
		if m := upLoad(t, mem, "orders", 0); m.LogStartOffset != wantStart {
			t.Fatalf("leader %v: log start %d, want %d (active segment %d bytes)", leader, m.LogStartOffset, wantStart, active)
		}
	}
}

// remoteSegs turns local segments into uploaded policy segments.
func remoteSegs(infos []localtier.SegmentInfo) []retention.Segment {
	out := retention.FromLog(infos)
	for i := range out {
		out[i].Uploaded, out[i].Active = true, false
	}
	return out
}

// failOpenSource fails to open one segment, every time.
type failOpenSource struct {
	Source
	base int64
}

func (f failOpenSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	if seg.BaseOffset == f.base {
		return nil, fmt.Errorf("injected: segment %d unreadable", seg.BaseOffset)
	}
	return f.Source.Open(ctx, p, seg)
}

// TestSidecarRetentionDespiteUploadError: a partition whose upload fails in
// every pass (its newest rolled segment cannot be read) still gets remote
// retention over what it did commit, as Kafka's retention runs apart from
// its copies; the pass still reports the upload's error.
func TestSidecarRetentionDespiteUploadError(t *testing.T) {
	ctx := context.Background()
	_, _, l, view := upBrokerLog(t, 6)
	local := l.Segments()
	rolled := local[:len(local)-1]
	cfg := topicconfig.Defaults()
	cfg.RetentionBytes = rolled[0].Size // the remote segments alone: keep about one
	mem := objstore.NewMemory()
	src := failOpenSource{Source: NewBrokerSource(view, nil), base: rolled[len(rolled)-1].BaseOffset}
	u := upUploader(t, mem, src, Options{RemoteRetention: func(p Partition) (RetentionRule, bool) {
		return RetentionRule{Config: cfg}, true
	}})
	for range 2 {
		rep, err := u.RunOnce(ctx)
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("pass error %v: want the upload's", err)
		}
		if rep.Errors != 1 {
			t.Fatalf("%d errors reported, want 1", rep.Errors)
		}
	}
	m := upLoad(t, mem, "orders", 0)
	if m.Generation == 0 || m.NextOffset() != rolled[len(rolled)-1].BaseOffset {
		t.Fatalf("manifest ends at %d, want the segments before the unreadable one (%d)", m.NextOffset(), rolled[len(rolled)-1].BaseOffset)
	}
	segs := upAllSegments(t, mem, m)
	var kept int64
	for _, s := range segs {
		kept += s.Log.Size
	}
	if m.LogStartOffset == 0 || kept > cfg.RetentionBytes {
		t.Fatalf("remote log start %d, %d bytes in %d segments kept: retention.bytes %d not applied while the upload failed",
			m.LogStartOffset, kept, len(segs), cfg.RetentionBytes)
	}
	for _, s := range segs {
		upCheckObjects(t, mem, s)
	}
}

// TestSidecarRetentionBytesCountsSourceOnce: the leader's retention.bytes
// counts the remote segments and the source's segments past the remote
// end, as Kafka counts its log (remote, then local past the highest
// uploaded offset). Source segments the listing skips, but the remote tier
// holds, are not counted again: those below a DeleteRecords log start
// (the broker deletes their files later), and every one while the
// broker's high-watermark checkpoint is stale. With retention.bytes the
// whole log's size, nothing is deleted.
func TestSidecarRetentionBytesCountsSourceOnce(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		after func(t *testing.T, dir string, l *localtier.Log)
	}{
		{"below a DeleteRecords log start", func(t *testing.T, dir string, l *localtier.Log) {
			setBrokerLogStart(t, dir, l.Segments()[2].BaseOffset)
		}},
		{"stale high watermark", func(t *testing.T, dir string, l *localtier.Log) {
			if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, checkpoint.ReplicationOffsetFile),
				map[checkpoint.TopicPartition]int64{{Topic: "orders", Partition: 0}: l.LogEndOffset() + 5000}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, _, l, view := upBrokerLog(t, 6)
			mem := objstore.NewMemory()
			cfg := topicconfig.Defaults()
			cfg.RetentionBytes = -1
			rule := func(Partition) (RetentionRule, bool) { return RetentionRule{Config: cfg, CountSource: true}, true }
			u := upUploader(t, mem, NewBrokerSource(view, nil), Options{RemoteRetention: rule})
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			tt.after(t, dir, l)
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			m := upLoad(t, mem, "orders", 0)
			segs := l.Segments()
			if m.NextOffset() != segs[len(segs)-1].BaseOffset {
				t.Fatalf("test setup: the remote log ends at %d, want every rolled segment uploaded (%d)", m.NextOffset(), segs[len(segs)-1].BaseOffset)
			}
			cfg.RetentionBytes = m.LogBytes() + segs[len(segs)-1].Size
			for range 2 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if after := upLoad(t, mem, "orders", 0); after.LogStartOffset != m.LogStartOffset {
				t.Fatalf("remote log start %d, was %d: retention.bytes %d (the whole log) deleted segments", after.LogStartOffset, m.LogStartOffset, cfg.RetentionBytes)
			}
		})
	}
}
