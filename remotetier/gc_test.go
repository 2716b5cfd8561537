package remotetier

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// TestGC: orphans past the grace period are deleted; young ones, referenced
// objects and foreign keys stay; a partition whose manifest is corrupt is
// skipped, never collected on its word.
func TestGC(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "g", 2)
	for p := int32(0); p < 2; p++ {
		upSegments(t, upPartition(t, d, "g", p), 2, 2, 3, 10)
	}
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewLocalSource(d, nil), Options{})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	putKey := func(key string) {
		if _, err := mem.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	orphan, _ := manifest.DataKeys("", "g", 0, 0, manifest.NewAttemptID())
	putKey(orphan.Log)
	putKey(orphan.Index)
	never, _ := manifest.DataKeys("", "never", 5, 7, manifest.NewAttemptID()) // a partition without a manifest
	putKey(never.Log)
	putKey("foreign/object.txt")
	corrupt, _ := manifest.ManifestKey("", "g", 1)
	orphan1, _ := manifest.DataKeys("", "g", 1, 0, manifest.NewAttemptID())
	putKey(orphan1.Log)
	putKey(corrupt) // overwrite partition 1's root with garbage
	referenced := upReferenced(t, mem, manifest.Key{Topic: "g", Partition: 0})

	// Within the grace period nothing goes.
	rep, err := GC(ctx, mem, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 0 || rep.Young != 3 || len(rep.Skipped) != 1 {
		t.Fatalf("young gc: %+v", rep)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	rep, err = GC(ctx, mem, GCOptions{Now: later, DryRun: true})
	if err != nil || len(rep.Deleted) != 3 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if _, err := mem.Attributes(ctx, orphan.Log); err != nil {
		t.Fatal("a dry run deleted")
	}
	rep, err = GC(ctx, mem, GCOptions{Now: later})
	if err != nil || len(rep.Deleted) != 3 {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	for _, k := range []string{orphan.Log, orphan.Index, never.Log} {
		if _, err := mem.Attributes(ctx, k); !objstore.IsNotFound(err) {
			t.Fatalf("orphan %s survived", k)
		}
	}
	for _, k := range append(keysOf(referenced), "foreign/object.txt", orphan1.Log, corrupt) {
		if _, err := mem.Attributes(ctx, k); err != nil {
			t.Fatalf("%s was deleted: %v", k, err)
		}
	}
	// The uploader reports the corrupt manifest and does not overwrite it.
	u2 := upUploader(t, mem, NewLocalSource(d, nil), Options{})
	_, err = u2.RunOnce(ctx)
	var cme *manifest.CorruptManifestError
	if !errors.As(err, &cme) {
		t.Fatalf("upload over a corrupt manifest: %v", err)
	}
	if got := remotekit.Get(t, mem, corrupt); !bytes.Equal(got, []byte("x")) {
		t.Fatal("the corrupt manifest was overwritten")
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRemoteRetention: retention.ms over the whole log removes the oldest
// remote segments, manifest first, then their objects and the local copies;
// the lookup gates local deletion on what the remote tier holds.
func TestRemoteRetention(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "ret", 1, "retention.ms", "3600000", "local.retention.ms", "60000")
	l := upPartition(t, d, "ret", 0)
	upSegments(t, l, 4, 2, 3, 10) // timestamps at upNow
	mem := objstore.NewMemory()
	lookup, err := RemoteLookup(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing uploaded yet: the remote tier holds nothing, local stays.
	st, err := lookup(ctx, upPartitionLog(t, d, "ret", 0))
	if err != nil || !st.Consulted || st.HighestOffset != -1 {
		t.Fatalf("empty remote: %+v, %v", st, err)
	}
	u := upUploader(t, mem, filterSource{NewLocalSource(d, nil), 2}, Options{})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	st, err = lookup(ctx, upPartitionLog(t, d, "ret", 0))
	if err != nil || st.HighestOffset != segs[1].NextOffset-1 {
		t.Fatalf("remote state %+v, want highest %d", st, segs[1].NextOffset-1)
	}
	// Local retention (local.retention.ms = 1 min, 10 min later) deletes only uploaded segments.
	prep, err := retention.RunOnce(ctx, d, retention.PassOptions{Now: func() time.Time { return upNow.Add(10 * time.Minute) }, Remote: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if prep.DeletedSegments != 2 || l.Segments()[0].BaseOffset != segs[2].BaseOffset {
		t.Fatalf("local retention: %+v", prep)
	}
	// Upload the rest; two hours later retention.ms expires everything rolled.
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := upReferenced(t, mem, manifest.Key{Topic: "ret", Partition: 0})
	reg := newTestRegistry()
	rm, err := NewRetentionMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	opts := RetentionOptions{Now: func() time.Time { return upNow.Add(2 * time.Hour) }, Metrics: rm}
	dry := opts
	dry.DryRun = true
	rrep, err := RemoteRetention(ctx, mem, d, dry)
	if err != nil || rrep.DeletedSegments != 4 || len(upKeys(t, mem)) != len(before) {
		t.Fatalf("dry run: %+v, %v", rrep, err)
	}
	rrep, err = RemoteRetention(ctx, mem, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rrep.DeletedSegments != 4 || rrep.Segments[0].Reason != retention.ReasonRetentionMs {
		t.Fatalf("remote retention: %+v", rrep)
	}
	m := upLoad(t, mem, "ret", 0)
	if m.SegmentCount() != 0 || m.LogStartOffset != segs[4].BaseOffset {
		t.Fatalf("manifest after retention: %d segments, log start %d", m.SegmentCount(), m.LogStartOffset)
	}
	if keys := upKeys(t, mem); len(keys) != 1 {
		t.Fatalf("objects left after remote retention: %v", keys)
	}
	if l.LogStartOffset() != segs[4].BaseOffset || len(l.Segments()) != 1 {
		t.Fatalf("local log start %d, %d segments", l.LogStartOffset(), len(l.Segments()))
	}
}

func newTestRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// listThen runs after once, right after a List of a prefix match accepts.
type listThen struct {
	objstore.Bucket
	match func(prefix string) bool
	after func()
	once  sync.Once
}

func (b *listThen) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	err := b.Bucket.List(ctx, prefix, fn)
	if b.match(prefix) {
		b.once.Do(b.after)
	}
	return err
}

// TestGCKeepsResealableSub: a commit that wrote a sub-manifest (sealing the
// oldest inline segments) and then failed to write the root leaves it
// unreferenced. Its key names its content, so the next commit seals the
// same segments into the same object, however old it has grown: GC keeps
// it while the root lists those segments inline, even past the grace
// period and with that commit landing between GC's listing and its
// deletes, and verify does not count it past its grace. Once the root
// references it, the committed manifest is whole.
func TestGCKeepsResealableSub(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "g", 1)
	l := upPartition(t, d, "g", 0)
	upSegments(t, l, 2, 2, 3, 10)
	mem := objstore.NewMemory()
	pol := manifest.Policy{InlineMax: 2, SubSegments: 2}
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{Policy: pol}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	root, _ := manifest.ManifestKey("", "g", 0)
	upSegments(t, l, 1, 2, 3, 10) // the next commit seals the 2 inline segments
	refuseRoot := objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool {
		return c.Op == objstore.OpPut && c.Key == root
	}, nil))
	if _, err := upUploader(t, refuseRoot, NewLocalSource(d, nil), Options{Policy: pol}).RunOnce(ctx); err == nil {
		t.Fatal("the root write was refused, yet the pass succeeded")
	}
	var sub string
	if err := mem.List(ctx, "", func(o objstore.ObjectInfo) error {
		if k, err := manifest.ParseKey(o.Key); err == nil && k.Type == manifest.KeySub {
			sub = o.Key
		}
		return nil
	}); err != nil || sub == "" {
		t.Fatalf("no sub-manifest left by the failed commit (%v)", err)
	}
	later := func() time.Time { return time.Now().Add(2 * DefaultGCGrace) }
	vr, err := VerifyBucket(ctx, mem, VerifyOptions{Grace: DefaultGCGrace, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range vr.Orphans {
		if o.Key == sub && o.PastGrace {
			t.Errorf("verify counts the resealable sub-manifest %s past its grace", sub)
		}
	}
	next := upUploader(t, mem, NewLocalSource(d, nil), Options{Policy: pol})
	hook := &listThen{Bucket: mem, match: func(p string) bool { return strings.HasSuffix(p, "/sub/") }, after: func() {
		if _, err := next.RunOnce(ctx); err != nil {
			t.Errorf("upload pass during GC: %v", err)
		}
	}}
	rep, err := GC(ctx, hook, GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Deleted {
		if o.Key == sub {
			t.Errorf("GC deleted the resealable sub-manifest %s", sub)
		}
	}
	m := upLoad(t, mem, "g", 0)
	if len(m.Sealed) == 0 || m.Sealed[0].Key != sub {
		t.Fatalf("the next commit sealed %+v, want %s", m.Sealed, sub)
	}
	store, err := newManifestStore(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReferencedKeys(ctx, store.subs); err != nil {
		t.Fatalf("the committed manifest references a missing object: %v", err)
	}
	// A sub-manifest over offsets no longer inline (sealed now) is garbage.
	stale := sub[:strings.LastIndex(sub, "-")+1] + "0123456789abcdef.json"
	if _, err := mem.Put(ctx, stale, strings.NewReader("{}"), 2, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	if rep, err = GC(ctx, mem, GCOptions{Now: later}); err != nil || len(rep.Deleted) != 1 || rep.Deleted[0].Key != stale {
		t.Fatalf("GC of a sub-manifest over sealed offsets: deleted %+v (%v), want %s", rep.Deleted, err, stale)
	}
}
