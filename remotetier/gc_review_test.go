package remotetier

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestGCKeepsSubRewrittenByRetention: a retention commit that rewrote the
// sealed sub-manifest straddling its new log start and then failed to write
// the root leaves that rewrite unreferenced. Its key names its content, so
// the next retention pass that takes the same decision (retention.bytes on
// an idle partition) finds it there however old it is and references it.
// GC must not delete it while it may be reused: otherwise a commit landing
// between GC's listing and its deletes leaves a root naming a missing
// sub-manifest.
func TestGCKeepsSubRewrittenByRetention(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "rb", 1)
	l := upPartition(t, d, "rb", 0)
	upSegments(t, l, 4, 2, 3, 10)
	mem := objstore.NewMemory()
	pol := manifest.Policy{InlineMax: 2, SubSegments: 2}
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{Policy: pol}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := newManifestStore(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := store.load(ctx, "rb", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sealed) != 1 || m.Sealed[0].Segments < 2 {
		t.Fatalf("want one sealed sub-manifest of 2 segments, have %+v", m.Sealed)
	}
	first := upAllSegments(t, mem, m)[0]
	cfg := topicconfig.Defaults()
	cfg.RetentionBytes = m.LogBytes() - first.Log.Size // exactly the first segment goes
	opts := RetentionOptions{Now: func() time.Time { return upNow }}
	logger := slog.New(slog.DiscardHandler)

	root, _ := manifest.ManifestKey("", "rb", 0)
	refuseRoot := objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool {
		return c.Op == objstore.OpPut && c.Key == root
	}, nil))
	failing, err := newManifestStore(refuseRoot, "")
	if err != nil {
		t.Fatal(err)
	}
	m, etag, err := failing.load(ctx, "rb", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := retentionStep(ctx, failing, m, etag, nil, cfg, 0, opts, logger); err == nil {
		t.Fatal("the root write was refused, yet retention succeeded")
	}

	later := func() time.Time { return time.Now().Add(2 * DefaultGCGrace) }
	vr, err := VerifyBucket(ctx, mem, VerifyOptions{Grace: DefaultGCGrace, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if len(vr.Orphans) != 1 || vr.Orphans[0].PastGrace {
		t.Errorf("verify: want the rewritten sub-manifest listed, not past its grace: %+v", vr.Orphans)
	}
	hook := &listThen{Bucket: mem, match: func(p string) bool { return strings.HasSuffix(p, "/sub/") }, after: func() {
		s, err := newManifestStore(mem, "")
		if err != nil {
			t.Error(err)
			return
		}
		m, etag, err := s.load(ctx, "rb", 0, 0)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := retentionStep(ctx, s, m, etag, nil, cfg, 0, opts, logger); err != nil {
			t.Errorf("retention during GC: %v", err)
		}
	}}
	if _, err := GC(ctx, hook, GCOptions{Now: later}); err != nil {
		t.Fatal(err)
	}
	m = upLoad(t, mem, "rb", 0)
	if m.LogStartOffset != first.NextOffset() {
		t.Fatalf("retention did not commit: log start %d", m.LogStartOffset)
	}
	fresh, err := newManifestStore(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := m.ReferencedKeys(ctx, fresh.subs)
	if err != nil {
		t.Fatalf("the committed manifest is broken: %v", err)
	}
	for _, k := range keys {
		if _, err := mem.Attributes(ctx, k); err != nil {
			t.Errorf("referenced object %s: %v", k, err)
		}
	}
}

// TestCommitLandedButReportedLost: a conditional root write that landed
// but was reported as a lost precondition — the S3 client retried a PUT
// whose response was lost (a response header timeout, a reset connection)
// and the retry found the root already changed, by this very write. The
// uploader re-reads the root, finds its segments committed and drops them
// from the next commit; it must not delete their objects, which the
// committed root references.
func TestCommitLandedButReportedLost(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "lp", 1)
	l := upPartition(t, d, "lp", 0)
	upSegments(t, l, 2, 2, 3, 10)
	mem := objstore.NewMemory()
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	upSegments(t, l, 2, 2, 3, 10)
	root, _ := manifest.ManifestKey("", "lp", 0)
	var once sync.Once
	landedLost := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
		var f *objstore.Fault
		if c.Op == objstore.OpPut && c.Key == root {
			once.Do(func() { f = &objstore.Fault{After: true, Err: objstore.ErrPreconditionFailed} })
		}
		return f
	}))
	_, _ = upUploader(t, landedLost, NewLocalSource(d, nil), Options{}).RunOnce(ctx)
	m := upLoad(t, mem, "lp", 0)
	if m.SegmentCount() != 4 {
		t.Fatalf("%d segments committed, want 4", m.SegmentCount())
	}
	for k := range upReferenced(t, mem, manifest.Key{Topic: "lp", Partition: 0}) {
		if _, err := mem.Attributes(ctx, k); err != nil {
			t.Errorf("object %s of the committed manifest: %v", k, err)
		}
	}
}
