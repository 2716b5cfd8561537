package remotetier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

func TestUploadLocalReadBack(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 2)
	upTopic(t, d, "local-only", 1, "remote.storage.enable", "false")
	l0 := upPartition(t, d, "orders", 0)
	l1 := upPartition(t, d, "orders", 1)
	upSegments(t, l0, 5, 30, 7, 300) // ~5 segments of ~70 KB: several index entries each
	upSegments(t, l1, 2, 3, 5, 10)
	upSegments(t, upPartition(t, d, "local-only", 0), 2, 3, 5, 10)

	bkt := objstore.NewMemory()
	reg := prometheus.NewRegistry()
	u := upUploader(t, bkt, NewLocalSource(d, nil), Options{Registerer: reg, MaxCommitSegments: 2})
	if got := testutil.ToFloat64(u.metrics.uploadedSegments); got != 0 {
		t.Fatalf("uploaded segments at start %v", got)
	}
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.UploadedSegments != 7 || rep.LagSegments != 0 || rep.Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := testutil.ToFloat64(u.metrics.commits); got != 4 { // 5 segments in commits of 2, and 1 commit of 2
		t.Fatalf("commits %v, want 4", got)
	}
	segs := upCheckRemote(t, bkt, l0, "orders", 0, l0.Segments()[5].BaseOffset)
	upCheckRemote(t, bkt, l1, "orders", 1, l1.Segments()[2].BaseOffset)
	if len(segs) != 5 {
		t.Fatalf("%d segments committed, want 5", len(segs))
	}
	m := upLoad(t, bkt, "local-only", 0)
	if m.Generation != 0 {
		t.Fatal("a topic without remote.storage.enable was uploaded")
	}

	// The built indexes are the engine's own, byte for byte.
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		for _, pair := range []struct {
			suffix string
			obj    manifest.Object
		}{{".index", s.Index}, {".timeindex", s.TimeIndex}} {
			want := remotekit.ReadOptional(t, localtier.SegmentPath(l0.Dir(), s.BaseOffset, pair.suffix))
			if got := upObject(t, bkt, pair.obj); string(got) != string(want) {
				t.Fatalf("segment %d %s: built %d bytes, engine wrote %d", s.BaseOffset, pair.suffix, len(got), len(want))
			}
		}
		if s.RecordCount != 30*7 && s.BaseOffset < segs[len(segs)-1].BaseOffset {
			t.Fatalf("segment %d record count %d", s.BaseOffset, s.RecordCount)
		}
	}

	// A second pass with nothing new does nothing: no duplicate.
	objects := len(upKeys(t, bkt))
	rep, err = u.RunOnce(ctx)
	if err != nil || rep.UploadedSegments != 0 || len(upKeys(t, bkt)) != objects {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
	// A new process (no cache) does nothing either.
	u2 := upUploader(t, bkt, NewLocalSource(d, nil), Options{})
	if rep, err = u2.RunOnce(ctx); err != nil || rep.UploadedSegments != 0 || len(upKeys(t, bkt)) != objects {
		t.Fatalf("restart pass: %+v, %v", rep, err)
	}
	// More rolled segments: only they are uploaded.
	upSegments(t, l0, 2, 3, 5, 10)
	if rep, err = u2.RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("third pass: %+v, %v", rep, err)
	}
	upCheckRemote(t, bkt, l0, "orders", 0, l0.Segments()[len(l0.Segments())-1].BaseOffset)
}

// upCheckConsistent checks what a crashed or failed pass left behind: the
// manifest (if any) validates, its segments follow one another from the
// first without gap or overlap, and every object it references exists with
// its size and checksum.
func upCheckConsistent(t testing.TB, bkt objstore.Bucket, topic string, p int32) {
	t.Helper()
	m := upLoad(t, bkt, topic, p)
	if err := m.Validate(); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	segs := upAllSegments(t, bkt, m)
	for i, s := range segs {
		if i > 0 && s.BaseOffset != segs[i-1].LastOffset+1 && !s.Compacted && !segs[i-1].Compacted {
			t.Fatalf("segment %d starts at %d, previous ended at %d", i, s.BaseOffset, segs[i-1].LastOffset)
		}
		upCheckObjects(t, bkt, s)
	}
}

// upCheckNoOrphans runs GC as if the grace period had passed and checks the
// bucket then holds exactly what the manifests reference.
func upCheckNoOrphans(t testing.TB, bkt objstore.Bucket, parts ...manifest.Key) {
	t.Helper()
	if _, err := GC(context.Background(), bkt, GCOptions{Now: func() time.Time { return time.Now().Add(2 * DefaultGCGrace) }}); err != nil {
		t.Fatalf("gc: %v", err)
	}
	live := upReferenced(t, bkt, parts...)
	keys := upKeys(t, bkt)
	for _, k := range keys {
		if !live[k] {
			t.Errorf("orphan left after gc: %s", k)
		}
	}
	if len(keys) != len(live) {
		t.Fatalf("%d objects, %d referenced", len(keys), len(live))
	}
}

// TestUploadFaults fails every object-store call of a pass in turn (the
// pebble errorfs pattern), once before the call and once after it went
// through (the caller sees an error for a write that happened): every
// failure is the injected one, what the pass leaves is consistent, a new
// uploader then completes the upload with every offset readable and no
// duplicate, and garbage collection leaves only referenced objects.
func TestUploadFaults(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "f", 1)
	l := upPartition(t, d, "f", 0)
	upSegments(t, l, 8, 3, 4, 50)
	src := NewLocalSource(d, nil)
	want := l.Segments()[8].BaseOffset
	part := manifest.Key{Topic: "f", Partition: 0}
	for _, after := range []bool{false, true} {
		runs := 0
		for n := int64(0); ; n++ {
			mem := objstore.NewMemory()
			fb := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
				if c.Seq == n {
					return &objstore.Fault{After: after}
				}
				return nil
			}))
			u := upUploader(t, fb, src, Options{MaxCommitSegments: 2, Concurrency: 1,
				Retry: Retry{Attempts: 1, Base: time.Microsecond, Max: time.Microsecond}})
			_, err := u.RunOnce(ctx)
			if !isInjected(err) {
				t.Fatalf("after=%v call %d: error %v is not the injected fault", after, n, err)
			}
			upCheckConsistent(t, mem, "f", 0)
			u2 := upUploader(t, mem, src, Options{})
			if _, err := u2.RunOnce(ctx); err != nil {
				t.Fatalf("after=%v call %d: recovery pass: %v", after, n, err)
			}
			upCheckRemote(t, mem, l, "f", 0, want)
			upCheckNoOrphans(t, mem, part)
			runs++
			if fb.Injected() == 0 {
				break
			}
		}
		if runs < 20 {
			t.Fatalf("after=%v: only %d calls", after, runs)
		}
	}
}

// TestUploadFaultsRetried: with retries, a pass survives any single fault.
func TestUploadFaultsRetried(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "f", 1)
	l := upPartition(t, d, "f", 0)
	upSegments(t, l, 4, 3, 4, 50)
	want := l.Segments()[4].BaseOffset
	for n := int64(0); ; n++ {
		mem := objstore.NewMemory()
		fb := objstore.WithFaults(mem, objstore.FailNth(n))
		u := upUploader(t, fb, NewLocalSource(d, nil), Options{MaxCommitSegments: 3})
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
		upCheckRemote(t, mem, l, "f", 0, want)
		if fb.Injected() == 0 {
			break
		}
	}
}

// filterSource offers only the first n segments of each partition.
type filterSource struct {
	Source
	n int
}

func (f filterSource) Partitions(ctx context.Context) ([]Partition, error) {
	ps, err := f.Source.Partitions(ctx)
	for i := range ps {
		ps[i].Segments = ps[i].Segments[:min(f.n, len(ps[i].Segments))]
	}
	return ps, err
}

// TestUploadersRace: another uploader commits between this one's upload and
// its commit. The conditional write fails, the manifest is re-read, the
// segments the other committed are dropped (their objects deleted) and the
// rest committed after them: no segment lost, none twice.
func TestUploadersRace(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "r", 1)
	l := upPartition(t, d, "r", 0)
	upSegments(t, l, 6, 2, 3, 20)
	src := NewLocalSource(d, nil)
	mem := objstore.NewMemory()
	other := upUploader(t, mem, filterSource{src, 3}, Options{})
	var once sync.Once
	fb := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
		if c.Op == objstore.OpPut && strings.HasSuffix(c.Key, "manifest.json") {
			once.Do(func() {
				if _, err := other.RunOnce(ctx); err != nil {
					t.Errorf("other uploader: %v", err)
				}
			})
		}
		return nil
	}))
	u := upUploader(t, fb, src, Options{MaxCommitSegments: 2})
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(u.metrics.conflicts); got != 1 {
		t.Fatalf("commit conflicts %v, want 1", got)
	}
	if rep.UploadedSegments != 3 {
		t.Fatalf("this uploader committed %d segments, want 3 (the other committed 3)", rep.UploadedSegments)
	}
	upCheckRemote(t, mem, l, "r", 0, l.Segments()[6].BaseOffset)
	// The losing attempt's objects were deleted at once: nothing to collect.
	live := upReferenced(t, mem, manifest.Key{Topic: "r", Partition: 0})
	if keys := upKeys(t, mem); len(keys) != len(live) {
		t.Fatalf("%d objects, %d referenced", len(keys), len(live))
	}

	// Truly concurrent uploaders, one segment per commit.
	for round := 0; round < 3; round++ {
		upSegments(t, l, 8, 1, 2, 10)
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			u := upUploader(t, mem, src, Options{MaxCommitSegments: 1, Concurrency: 2})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := u.RunOnce(ctx); err != nil {
					t.Errorf("concurrent uploader: %v", err)
				}
			}()
		}
		wg.Wait()
		segs := l.Segments()
		upCheckRemote(t, mem, l, "r", 0, segs[len(segs)-1].BaseOffset)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "r", Partition: 0})
}

// TestUploadCompactionReplace: segments of a compacted topic are uploaded,
// then the log cleaner rewrites them; the next pass uploads the cleaned
// segments and swaps them in for the committed range in one commit, deletes
// the objects they replaced, and a further pass changes nothing.
func TestUploadCompactionReplace(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "c", 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0", "segment.bytes", "1048576")
	l := upPartition(t, d, "c", 0)
	keyMod := func(i int) string { return fmt.Sprintf("k%d", i%7) }
	for s := 0; s < 4; s++ {
		upAppend(t, l, 5, 4, keyMod, 40)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewLocalSource(d, nil), Options{})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	before := upReferenced(t, mem, manifest.Key{Topic: "c", Partition: 0})

	crep, err := compactor.RunOnce(ctx, d, compactor.PassOptions{Force: true, Config: compactor.Config{Now: func() time.Time { return upNow }}})
	if err != nil {
		t.Fatal(err)
	}
	if crep.LogsCleaned == 0 || crep.RecordsAfter >= crep.RecordsBefore {
		t.Fatalf("the cleaner did nothing: %+v", crep)
	}
	// A new segment follows, so the cleaned range is below the committed end.
	upAppend(t, l, 2, 4, keyMod, 40)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ReplacedSegments == 0 || rep.UploadedSegments != 1 {
		t.Fatalf("second pass: %+v", rep)
	}
	if got := testutil.ToFloat64(u.metrics.commits); got != 2 {
		t.Fatalf("%v commits, want 2 (replace and append in one)", got)
	}
	segs := l.Segments()
	upCheckConsistent(t, mem, "c", 0)
	remote := upCheckRemote(t, mem, l, "c", 0, segs[len(segs)-1].BaseOffset)
	if !remote[0].Compacted {
		t.Fatal("the cleaned segment is not marked compacted")
	}
	// The replaced objects are gone (deleted after the commit).
	for k := range before {
		if strings.HasSuffix(k, "manifest.json") {
			continue
		}
		if _, err := mem.Attributes(ctx, k); !objstore.IsNotFound(err) {
			t.Fatalf("replaced object %s still there: %v", k, err)
		}
	}
	if rep, err := u.RunOnce(ctx); err != nil || rep.ReplacedSegments != 0 || rep.UploadedSegments != 0 {
		t.Fatalf("third pass: %+v, %v", rep, err)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestUploadCompactionSpansCommittedEnd: the cleaner merges uploaded
// segments with one not yet uploaded, dropping the record the committed end
// falls on; the cleaned segment replaces the committed range and extends it
// in one commit (no cut, which would need a batch starting there).
func TestUploadCompactionSpansCommittedEnd(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "c", 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0", "segment.bytes", "1048576")
	l := upPartition(t, d, "c", 0)
	keyMod := func(i int) string { return fmt.Sprintf("k%d", i%7) }
	for s := 0; s < 3; s++ {
		upAppend(t, l, 5, 4, keyMod, 40)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewLocalSource(d, nil), Options{})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 3 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	// The active segment rolls without being uploaded, then everything below
	// the new active segment is cleaned into one group.
	upAppend(t, l, 5, 4, keyMod, 40)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	if _, err := compactor.RunOnce(ctx, d, compactor.PassOptions{Force: true, Config: compactor.Config{Now: func() time.Time { return upNow }}}); err != nil {
		t.Fatal(err)
	}
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatalf("upload after cleaning across the committed end: %v", err)
	}
	if rep.ReplacedSegments == 0 {
		t.Fatalf("second pass replaced nothing: %+v", rep)
	}
	segs := l.Segments()
	upCheckConsistent(t, mem, "c", 0)
	upCheckRemote(t, mem, l, "c", 0, segs[len(segs)-1].BaseOffset)
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 0 {
		t.Fatalf("third pass: %+v, %v", rep, err)
	}
}

// slowLogBucket delays every .log Put and records how many run at once.
type slowLogBucket struct {
	objstore.Bucket
	mu        sync.Mutex
	cur, peak int
}

func (b *slowLogBucket) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	if !strings.HasSuffix(key, ".log") {
		return b.Bucket.Put(ctx, key, r, size, cond)
	}
	b.mu.Lock()
	b.cur++
	b.peak = max(b.peak, b.cur)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.cur--
		b.mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond)
	return b.Bucket.Put(ctx, key, r, size, cond)
}

// countingSource records how many segments are open at once.
type countingSource struct {
	Source
	mu        sync.Mutex
	cur, peak int
}

func (s *countingSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	r, err := s.Source.Open(ctx, p, seg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cur++
	s.peak = max(s.peak, s.cur)
	s.mu.Unlock()
	return &countedReader{SegmentReader: r, s: s}, nil
}

type countedReader struct {
	SegmentReader
	s    *countingSource
	once sync.Once
}

func (r *countedReader) Close() error {
	r.once.Do(func() {
		r.s.mu.Lock()
		r.s.cur--
		r.s.mu.Unlock()
	})
	return r.SegmentReader.Close()
}

// TestUploadChecksAhead: at most Concurrency segments are stored at once,
// while as many more are read and checked ahead of a free slot (never
// more), and every segment is committed.
func TestUploadChecksAhead(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "a", 2)
	for p := int32(0); p < 2; p++ {
		upSegments(t, upPartition(t, d, "a", p), 6, 3, 4, 50)
	}
	const conc = 2
	bkt := &slowLogBucket{Bucket: objstore.NewMemory()}
	src := &countingSource{Source: NewLocalSource(d, nil)}
	u := upUploader(t, bkt, src, Options{Concurrency: conc})
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.UploadedSegments != 12 {
		t.Fatalf("uploaded %d segments, %v; want 12", rep.UploadedSegments, err)
	}
	if bkt.peak != conc {
		t.Errorf("%d .log uploads at once, want %d", bkt.peak, conc)
	}
	if src.peak <= conc || src.peak > 2*conc {
		t.Errorf("%d segments open at once, want more than %d (checked ahead) and at most %d", src.peak, conc, 2*conc)
	}
	if src.cur != 0 {
		t.Errorf("%d segments left open, want 0", src.cur)
	}
	for p := int32(0); p < 2; p++ {
		l := upPartition(t, d, "a", p)
		upCheckRemote(t, bkt.Bucket, l, "a", p, l.Segments()[6].BaseOffset)
	}
}

// flakySource fails its first fails listings, then lists as Source does.
type flakySource struct {
	Source
	mu    sync.Mutex
	fails int
}

func (f *flakySource) Partitions(ctx context.Context) ([]Partition, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("log dir unreadable (injected)")
	}
	return f.Source.Partitions(ctx)
}

// TestRunReportsEveryPass: Run hands each pass's report and error to
// OnPass, in order, and keeps going after a failed pass.
func TestRunReportsEveryPass(t *testing.T) {
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	upSegments(t, upPartition(t, d, "orders", 0), 3, 2, 5, 10)
	type pass struct {
		rep Report
		err error
	}
	passes := make(chan pass, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u := upUploader(t, objstore.NewMemory(), &flakySource{Source: NewLocalSource(d, nil), fails: 1}, Options{
		Interval: time.Millisecond,
		OnPass:   func(rep Report, err error) { passes <- pass{rep, err} },
	})
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	var got []pass
	for len(got) < 3 {
		select {
		case p := <-passes:
			got = append(got, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d passes reported in 10s, want 3", len(got))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if got[0].err == nil || !strings.Contains(got[0].err.Error(), "injected") {
		t.Errorf("pass 1: err %v, want the listing failure", got[0].err)
	}
	if got[1].err != nil || got[1].rep.UploadedSegments != 3 || got[1].rep.LagSegments != 0 {
		t.Errorf("pass 2: %+v, %v; want 3 segments uploaded, no lag, no error", got[1].rep, got[1].err)
	}
	if got[2].err != nil || got[2].rep.UploadedSegments != 0 {
		t.Errorf("pass 3: %+v, %v; want nothing left to upload", got[2].rep, got[2].err)
	}
}
