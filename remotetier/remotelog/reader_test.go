package remotelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

func openTestLog(t testing.TB, b objstore.BucketReader, prefix string) *RemoteLog {
	t.Helper()
	l, err := OpenRemoteLog(context.Background(), b, prefix, remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestReadEveryOffset(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy manifest.Policy
		prefix string
	}{
		{"inline", manifest.DefaultPolicy(), ""},
		{"sealed_sub_manifests", remotekit.SmallPolicy, "tiered/prod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			local := remotekit.WriteLocal(t, t.TempDir(), 1, 7, 30, false)
			r := remotekit.NewRemote(t, objstore.NewMemory(), tt.prefix, 0, tt.policy)
			files := local.Files(t)
			if len(files) != 7 {
				t.Fatalf("%d segments", len(files))
			}
			for _, f := range files {
				if len(f.Index) == 0 || len(f.TimeIndex) == 0 {
					t.Fatalf("segment %d has empty indexes: the test would not exercise them", f.Base)
				}
			}
			r.Commit(files[:3]...)
			r.Commit(files[3:]...)
			if tt.policy == remotekit.SmallPolicy && len(r.M.Sealed) < 2 {
				t.Fatalf("%d sealed sub-manifests, want several", len(r.M.Sealed))
			}
			l := openTestLog(t, r.Bucket, tt.prefix)
			if l.LogStartOffset() != 0 || l.LogEndOffset() != local.Log.LogEndOffset() {
				t.Fatalf("log start/end %d/%d, local end %d", l.LogStartOffset(), l.LogEndOffset(), local.Log.LogEndOffset())
			}
			checkEveryOffset(t, r, l, local)
			res, err := l.Read(context.Background(), l.LogEndOffset(), 1<<20)
			if err != nil || len(res.Data) != 0 {
				t.Fatalf("read at the log end: %d bytes, %v", len(res.Data), err)
			}
		})
	}
}

// TestReadCompactedGaps: offsets removed by compaction, inside a segment
// and between segments, are served from the next batch present.
func TestReadCompactedGaps(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 2, 6, 30, false)
	files := local.Files(t)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, remotekit.SmallPolicy)
	for _, f := range withCompactionGaps(t, files) {
		r.Commit(f)
	}
	l := openTestLog(t, r.Bucket, "")
	checkEveryOffset(t, r, l, nil)
	remotekit.CheckTimestamps(t, r, l.OffsetForTimestamp, nil)
}

func TestOffsetForTimestamp(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 3, 6, 30, false)
	files := local.Files(t)
	t.Run("whole_log", func(t *testing.T) {
		r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, remotekit.SmallPolicy)
		r.Commit(files...)
		remotekit.CheckTimestamps(t, r, openTestLog(t, r.Bucket, "").OffsetForTimestamp, local)
	})
	t.Run("log_start_inside_a_segment", func(t *testing.T) {
		// Records below the log start offset are never an answer.
		start := files[2].Base + (files[2].Last-files[2].Base)/2
		r := remotekit.NewRemote(t, objstore.NewMemory(), "", start, remotekit.SmallPolicy)
		r.Commit(files[2:]...)
		l := openTestLog(t, r.Bucket, "")
		remotekit.CheckTimestamps(t, r, l.OffsetForTimestamp, nil)
		_, err := l.Read(context.Background(), start-1, 100)
		if !errors.Is(err, manifest.ErrOffsetOutOfRange) {
			t.Fatalf("read below the log start: %v", err)
		}
		checkEveryOffset(t, r, l, nil)
	})
}

func TestAbortedTxns(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 4, 5, 30, true)
	files := local.Files(t)
	withTxn := 0
	for _, f := range files {
		if f.TxnIndex != nil {
			withTxn++
		}
	}
	if withTxn == 0 {
		t.Fatal("no segment has a .txnindex: the test would not exercise it")
	}
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, remotekit.SmallPolicy)
	r.Commit(files...)
	l := openTestLog(t, r.Bucket, "")
	end := l.LogEndOffset()
	total := 0
	for from := int64(0); from < end; from += 7 {
		for _, upTo := range []int64{from + 1, from + 40, end} {
			got, err := l.AbortedTxns(context.Background(), from, upTo)
			if err != nil {
				t.Fatal(err)
			}
			want := local.Log.AbortedTxns(from, upTo)
			if !slices.Equal(got, want) {
				t.Fatalf("[%d, %d): %+v, want %+v", from, upTo, got, want)
			}
			total += len(got)
		}
	}
	if total == 0 {
		t.Fatal("no aborted transaction found anywhere")
	}
}

// TestReadBounded: reads never GET a whole .log, never LIST, and range GETs
// stay within the bytes asked for plus the scan window.
func TestReadBounded(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 5, 3, 40, false)
	mem := objstore.NewMemory()
	r := remotekit.NewRemote(t, mem, "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	rb := &remotekit.RecordingBucket{Bucket: mem}
	l := openTestLog(t, rb, "")
	const maxBytes = 2000
	largest := 0
	for _, b := range r.Batches {
		largest = max(largest, b.B.Size())
	}
	for off := int64(0); off < l.LogEndOffset(); off++ {
		if _, err := l.Read(context.Background(), off, maxBytes); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := l.OffsetForTimestamp(context.Background(), r.Records[off].TS); err != nil {
			t.Fatal(err)
		}
	}
	if rb.LogGets != 0 || rb.Lists != 0 {
		t.Fatalf("%d whole-object GETs of .log objects, %d LISTs", rb.LogGets, rb.Lists)
	}
	if limit := int64(maxBytes + DefaultScanWindow + largest); rb.MaxRange > limit {
		t.Fatalf("a range GET of %d bytes, limit %d", rb.MaxRange, limit)
	}
}

func TestReadErrors(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 6, 3, 20, false)
	files := local.Files(t)
	fresh := func(t *testing.T) (*remotekit.Remote, *RemoteLog) {
		r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
		r.Commit(files...)
		return r, openTestLog(t, r.Bucket, "")
	}

	t.Run("unknown_partition", func(t *testing.T) {
		r, _ := fresh(t)
		_, err := OpenRemoteLog(ctx, r.Bucket, "", remotekit.TestTopic, 9, ReaderOptions{})
		var ue *UnknownTopicOrPartitionError
		if !errors.As(err, &ue) || ue.Topic != remotekit.TestTopic || ue.Partition != 9 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("out_of_range", func(t *testing.T) {
		_, l := fresh(t)
		if _, err := l.Read(ctx, l.LogEndOffset()+1, 100); !errors.Is(err, manifest.ErrOffsetOutOfRange) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("corrupt_batch", func(t *testing.T) {
		r, l := fresh(t)
		ba := r.Batches[len(r.Batches)/2]
		seg := r.Segs[ba.Seg]
		data := slices.Clone(r.Logs[ba.Seg])
		data[ba.Pos+int64(ba.B.Size())-1] ^= 0xff
		remotekit.Put(t, r.Bucket, seg.Log.Key, data)
		_, err := l.Read(ctx, ba.B.BaseOffset(), 1)
		var ce *record.CorruptError
		if !errors.As(err, &ce) || ce.File != seg.Log.Key || ce.Pos != ba.Pos {
			t.Fatalf("got %v", err)
		}
		// The batch before is still served, without the bad one.
		prev := r.Batches[len(r.Batches)/2-1]
		if prev.Seg == ba.Seg {
			res, err := l.Read(ctx, prev.B.BaseOffset(), 1<<20)
			if err != nil || !bytes.Equal(res.Data, prev.B) {
				t.Fatalf("read before the bad batch: %d bytes, %v", len(res.Data), err)
			}
		}
	})
	t.Run("corrupt_index", func(t *testing.T) {
		r, l := fresh(t)
		seg := r.Segs[1]
		idx := slices.Clone(remotekit.Get(t, r.Bucket, seg.Index.Key))
		idx[3] ^= 1
		remotekit.Put(t, r.Bucket, seg.Index.Key, idx)
		// Inside the segment: a read at its base offset needs no index.
		_, err := l.Read(ctx, seg.LastOffset, 1)
		var co *CorruptObjectError
		if !errors.As(err, &co) || co.Key != seg.Index.Key {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("truncated_log", func(t *testing.T) {
		r, l := fresh(t)
		seg := r.Segs[0]
		remotekit.Put(t, r.Bucket, seg.Log.Key, r.Logs[0][:len(r.Logs[0])/2])
		var err error
		for off := seg.BaseOffset; off <= seg.LastOffset && err == nil; off++ {
			_, err = l.Read(ctx, off, 1)
		}
		var co *CorruptObjectError
		var ce *record.CorruptError
		if !errors.As(err, &co) && !errors.As(err, &ce) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing_object", func(t *testing.T) {
		r, l := fresh(t)
		seg := r.Segs[2]
		if err := r.Bucket.Delete(ctx, seg.Log.Key); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Read(ctx, seg.BaseOffset, 1); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("corrupt_manifest", func(t *testing.T) {
		r, _ := fresh(t)
		remotekit.Put(t, r.Bucket, r.M.Key(), []byte(`{"version":1,"kind":"partition"}`))
		_, err := OpenRemoteLog(ctx, r.Bucket, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{})
		var cm *manifest.CorruptManifestError
		if !errors.As(err, &cm) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestRefresh: new commits become visible after Refresh, and a read whose
// objects were replaced and deleted after its manifest was read re-reads the
// manifest and succeeds.
func TestRefresh(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 7, 4, 20, false)
	files := local.Files(t)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, remotekit.SmallPolicy)
	r.Commit(files[:2]...)
	l := openTestLog(t, r.Bucket, "")
	if l.LogEndOffset() != files[1].Last+1 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
	r.Commit(files[2:]...)
	if l.LogEndOffset() != files[1].Last+1 {
		t.Fatal("the log moved without Refresh")
	}
	if res, err := l.Read(ctx, files[2].Base, 100); err != nil || len(res.Data) != 0 {
		t.Fatalf("read at the old end: %d bytes, %v", len(res.Data), err)
	}
	if _, err := l.Read(ctx, files[2].Base+1, 100); !errors.Is(err, manifest.ErrOffsetOutOfRange) {
		t.Fatalf("read past the old end: %v", err)
	}
	changed, err := l.Refresh(ctx)
	if err != nil || !changed || l.LogEndOffset() != files[3].Last+1 {
		t.Fatalf("refresh: %v %v, log end %d", changed, err, l.LogEndOffset())
	}
	if changed, err := l.Refresh(ctx); err != nil || changed {
		t.Fatalf("second refresh: %v %v", changed, err)
	}

	// Compaction replaces segment 0 (sealed) and deletes its objects.
	cf := remotekit.Compact(t, files[0], func(i int) bool { return i%2 == 0 })
	old := r.Segs[0]
	attempt := manifest.NewAttemptID()
	keys, _ := manifest.DataKeys("", remotekit.TestTopic, remotekit.TestPartition, cf.Base, attempt)
	seg := old
	seg.Compacted, seg.AttemptID = true, attempt
	seg.Log, seg.Index, seg.TimeIndex = remotekit.Object(t, keys.Log, cf.Log), remotekit.Object(t, keys.Index, cf.Index), remotekit.Object(t, keys.TimeIndex, cf.TimeIndex)
	remotekit.Put(t, r.Bucket, keys.Log, cf.Log)
	remotekit.Put(t, r.Bucket, keys.Index, cf.Index)
	remotekit.Put(t, r.Bucket, keys.TimeIndex, cf.TimeIndex)
	c, err := manifest.Replace(ctx, BucketResolver(r.Bucket), r.M, remotekit.SmallPolicy, old.BaseOffset, old.LastOffset, []manifest.Segment{seg})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Subs {
		remotekit.Put(t, r.Bucket, s.Ref.Key, s.Data)
	}
	root, err := manifest.EncodeRoot(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	remotekit.Put(t, r.Bucket, c.Root.Key(), root)
	for _, k := range c.Unreferenced {
		if err := r.Bucket.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.Read(ctx, old.LastOffset, 1<<20)
	if err != nil {
		t.Fatalf("read after compaction: %v", err)
	}
	it := record.NewIter(res.Data)
	b, ok := it.Next()
	if !ok || b.LastOffset() != old.LastOffset {
		t.Fatalf("read after compaction: first batch %v %d", ok, b.LastOffset())
	}
	if l.Manifest().Generation != c.Root.Generation {
		t.Fatalf("generation %d, want %d", l.Manifest().Generation, c.Root.Generation)
	}
}

func TestIndexCacheBound(t *testing.T) {
	c := NewIndexCache(100)
	c.put("a", 1, 60)
	c.put("b", 2, 30)
	if _, ok := c.get("a"); !ok {
		t.Fatal("a evicted too early")
	}
	c.put("c", 3, 30) // 120 > 100: evicts b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Fatal("b not evicted")
	}
	if _, ok := c.get("a"); !ok {
		t.Fatal("a evicted")
	}
	c.put("huge", 4, 101)
	if _, ok := c.get("huge"); ok || c.bytes != 90 {
		t.Fatalf("an entry over the bound was kept; %d bytes", c.bytes)
	}
}

// FuzzReadSegment: a hostile .log object never panics the reader, and any
// data it returns is whole batches with valid CRCs.
func FuzzReadSegment(f *testing.F) {
	var enc record.Encoder
	good, _ := enc.AppendBatch(nil, record.NewBatchSpec(0, 0), []record.Record{{Offset: 0, Timestamp: 5, Value: []byte("v")}, {Offset: 1, Timestamp: 9, Value: []byte("w")}})
	good2, _ := enc.AppendBatch(nil, record.NewBatchSpec(2, 0), []record.Record{{Offset: 2, Timestamp: 7}})
	f.Add(append(slices.Clone(good), good2...), int64(1), int64(6))
	f.Add(good[:40], int64(0), int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 2}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, log []byte, offset, ts int64) {
		if len(log) == 0 {
			return
		}
		mem := objstore.NewMemory()
		ctx := context.Background()
		keys, _ := manifest.DataKeys("", remotekit.TestTopic, remotekit.TestPartition, 0, "fuzzfuzzfuzz")
		remotekit.Put(t, mem, keys.Log, log)
		remotekit.Put(t, mem, keys.Index, nil)
		remotekit.Put(t, mem, keys.TimeIndex, nil)
		seg := manifest.Segment{BaseOffset: 0, LastOffset: 1 << 20, Log: remotekit.Object(t, keys.Log, log),
			Index: remotekit.Object(t, keys.Index, nil), TimeIndex: remotekit.Object(t, keys.TimeIndex, nil)}
		l := &RemoteLog{bucket: mem, topic: remotekit.TestTopic, partition: remotekit.TestPartition, opts: ReaderOptions{}.withDefaults(), idx: NewIndexCache(1 << 20)}
		var v ReadView
		err := l.readSegment(ctx, seg, offset, 100, &v, streamState{}, false)
		data := joinParts(v.Parts, v.Len)
		// The same read over shared parts of 7 bytes must agree.
		ls := &RemoteLog{bucket: splitBucket{mem, 7}, topic: remotekit.TestTopic, partition: remotekit.TestPartition, opts: ReaderOptions{}.withDefaults(), idx: NewIndexCache(1 << 20)}
		var sv ReadView
		serr := ls.readSegment(ctx, seg, offset, 100, &sv, streamState{}, false)
		if (err == nil) != (serr == nil) || !bytes.Equal(data, joinParts(sv.Parts, sv.Len)) {
			t.Fatalf("shared parts: %d bytes, %v; one buffer: %d bytes, %v", sv.Len, serr, len(data), err)
		}
		if err == nil {
			it := record.NewIter(data)
			it.Verify = true
			for {
				if _, ok := it.Next(); !ok {
					break
				}
			}
			if it.Err() != nil || it.Pos() != len(data) || len(data) == 0 {
				t.Fatalf("returned %d bytes that are not whole valid batches: %v", len(data), it.Err())
			}
		}
		_, _, _, _ = l.segmentOffsetForTimestamp(ctx, seg, ts, 0)
	})
}

// TestReadConcurrent: readers share one RemoteLog (its caches and manifest)
// while another goroutine refreshes it.
func TestReadConcurrent(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 12, 4, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, remotekit.SmallPolicy)
	r.Commit(local.Files(t)...)
	l, err := OpenRemoteLog(context.Background(), r.Bucket, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{SubManifestCache: 1, IndexCacheBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	errs := make(chan error, 5)
	for g := range 4 {
		go func() {
			for off := int64(g); off < end; off += 4 {
				res, err := l.Read(context.Background(), off, 500)
				if err == nil && !bytes.Equal(res.Data, r.ExpectRead(off, 500)) {
					err = errors.New("wrong batches")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for range 50 {
			if _, err := l.Refresh(context.Background()); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// splitBucket serves GetRange as a SharedRangeReader whose parts are cut
// every n object bytes (like a chunk cache's aligned chunks).
type splitBucket struct {
	objstore.BucketReader
	n int64
}

type sharedParts struct{ parts [][]byte }

func (s *sharedParts) SharedBytes() [][]byte    { p := s.parts; s.parts = nil; return p }
func (s *sharedParts) Read([]byte) (int, error) { panic("read of a shared range reader") }
func (s *sharedParts) Close() error             { return nil }

func (b splitBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := b.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	var parts [][]byte
	for pos := off; len(data) > 0; {
		k := min(int64(len(data)), (pos/b.n+1)*b.n-pos)
		parts = append(parts, data[:k:k])
		data, pos = data[k:], pos+k
	}
	return &sharedParts{parts}, nil
}

// TestReadSharedParts: reads over a bucket handing out shared parts (a
// chunk cache) return the same bytes as over a plain bucket for every
// offset and several sizes and part sizes; ReadView serves batches that
// lie in one part without copying them, and Read never returns shared
// memory.
func TestReadSharedParts(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 21, 3, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	plain := openTestLog(t, r.Bucket, "")
	for _, part := range []int64{13, 1000, 1 << 20} {
		shared := openTestLog(t, splitBucket{r.Bucket, part}, "")
		for _, maxBytes := range []int{1, 700, 5000} {
			for off := int64(0); off < plain.LogEndOffset(); off++ {
				want, err := plain.Read(ctx, off, maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				v, err := shared.ReadView(ctx, off, maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				got := joinParts(v.Parts, v.Len)
				if !bytes.Equal(got, want.Data) || v.Len != len(got) || v.NextOffset != lastNext(t, want.Data) {
					t.Fatalf("part %d, max %d, offset %d: %d bytes (next %d), want %d", part, maxBytes, off, len(got), v.NextOffset, len(want.Data))
				}
				if part == 1<<20 && len(v.Parts) != 1 {
					t.Fatalf("offset %d: %d parts from one shared part", off, len(v.Parts))
				}
				res, err := shared.Read(ctx, off, maxBytes)
				if err != nil || !bytes.Equal(res.Data, want.Data) {
					t.Fatalf("Read: %d bytes, %v", len(res.Data), err)
				}
				if len(v.Parts) == 1 && len(res.Data) > 0 && &res.Data[0] == &v.Parts[0][0] {
					t.Fatal("Read returned the shared memory")
				}
			}
		}
	}
}

func lastNext(t *testing.T, data []byte) int64 {
	it := record.NewIter(data)
	next := int64(-1)
	for {
		b, ok := it.Next()
		if !ok {
			return next
		}
		next = b.NextOffset()
	}
}

// checkEveryOffset checks l's reads against the model r (and local, when
// given) at every offset.
func checkEveryOffset(t *testing.T, r *remotekit.Remote, l *RemoteLog, local *remotekit.LocalLog) {
	t.Helper()
	remotekit.CheckEveryOffset(t, r, func(ctx context.Context, off int64, maxBytes int) ([]byte, int64, int64, error) {
		res, err := l.Read(ctx, off, maxBytes)
		return res.Data, res.LogStartOffset, res.LogEndOffset, err
	}, local)
}

// TestOffsetForTimestampAtIndexEntry: a time-index entry names the last
// offset of the batch holding its timestamp; a query at that timestamp
// still answers the batch's first record with it, as the local log (and
// Kafka) do, not the entry's offset. One segment: [100] at offset 0, then
// one batch [200, 200, 200] at offsets 1-3, whose roll writes the time
// index entry (200, 3).
func TestOffsetForTimestampAtIndexEntry(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	pdir := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d", remotekit.TestTopic, remotekit.TestPartition))
	l, _, err := localtier.OpenLog(vfs.Default, pdir, localtier.LogOptions{Config: topicconfig.Defaults(), RecoveryPoint: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var enc record.Encoder
	seq := int32(0)
	batch := func(ts ...int64) (out []record.Record) {
		for i, x := range ts {
			out = append(out, record.Record{Offset: int64(i), Timestamp: x, Value: []byte("v")})
		}
		return out
	}
	remotekit.AppendTestBatch(t, l, &enc, codec.None, batch(100), false, 0, &seq)
	remotekit.AppendTestBatch(t, l, &enc, codec.None, batch(200, 200, 200), false, 0, &seq)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit((&remotekit.LocalLog{Log: l, Dir: pdir}).Files(t)...)
	rl := openTestLog(t, r.Bucket, "")
	for _, ts := range []int64{100, 150, 200, 201} {
		off, got, found, err := rl.OffsetForTimestamp(context.Background(), ts)
		wo, wt, wf := r.ExpectTimestamp(ts)
		if err != nil || off != wo || got != wt || found != wf {
			t.Fatalf("timestamp %d: %d@%d %v (%v), want %d@%d %v", ts, off, got, found, err, wo, wt, wf)
		}
	}
}
