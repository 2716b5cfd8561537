package remotetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Tests of the indexes object (manifest version 2): the uploader writes a
// segment's indexes back to back in one <base>-<attempt>.indexes object,
// and the reader, verifier and garbage collector work on its sections.

const secTopic = "sec"

// secLocal fills partition 0 of a new remote-enabled topic of d with nSegs
// rolled segments of batches batches each (random sizes and codecs,
// strictly increasing record timestamps, an offset and time index entry every 256
// bytes) and one more batch, later than all, in the active segment. With
// txn, every fifth batch is transactional and committed or aborted at once,
// so each segment's transactions end in it.
func secLocal(t testing.TB, d *localtier.LogDir, seed uint64, nSegs, batches int, txn bool) *localtier.Log {
	t.Helper()
	upTopic(t, d, secTopic, 1, "index.interval.bytes", "256")
	l := upPartition(t, d, secTopic, 0)
	rng := rand.New(rand.NewPCG(seed, 7))
	var enc record.Encoder
	codecs := []codec.Codec{codec.None, codec.Snappy, codec.Zstd, codec.LZ4, codec.Gzip}
	// Later than the control batches the log stamps with its clock
	// (upNow), so that segments' max timestamps are their records'.
	ts := upNow.Add(time.Second).UnixMilli()
	seq := int32(0)
	const pid = 77
	appendBatch := func(i int, transactional bool) {
		n := 1 + rng.IntN(8)
		recs := make([]record.Record, n)
		for k := range recs {
			ts += 1 + int64(rng.IntN(500))
			v := make([]byte, 10+rng.IntN(400))
			for x := range v {
				v[x] = byte('a' + rng.IntN(26))
			}
			recs[k] = record.Record{Offset: int64(k), Timestamp: ts, Key: fmt.Appendf(nil, "k%d", rng.IntN(20)), Value: v}
		}
		remotekit.AppendTestBatch(t, l, &enc, codecs[i%len(codecs)], recs, transactional, pid, &seq)
	}
	for s := range nSegs {
		for i := range batches {
			transactional := txn && i%5 == 2
			appendBatch(s+i, transactional)
			if transactional {
				if _, err := l.AppendEndTxnMarker(pid, 0, i%10 != 2, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	appendBatch(0, false)
	return l
}

// secFixture is a partition uploaded by the uploader from a local log.
type secFixture struct {
	d    *localtier.LogDir
	l    *localtier.Log
	bkt  *objstore.Memory
	segs []manifest.Segment // committed, in order
	end  int64              // the remote log end: the active segment's base
}

func newSecFixture(t testing.TB, txn bool) *secFixture {
	t.Helper()
	d := upOpenDir(t, t.TempDir())
	l := secLocal(t, d, 11, 4, 30, txn)
	f := &secFixture{d: d, l: l, bkt: objstore.NewMemory()}
	f.end = l.Segments()[len(l.Segments())-1].BaseOffset
	u := upUploader(t, f.bkt, NewLocalSource(d, nil), Options{})
	rep, err := u.RunOnce(context.Background())
	if err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("upload: %+v, %v; want 4 segments uploaded", rep, err)
	}
	f.segs = upAllSegments(t, f.bkt, upLoad(t, f.bkt, secTopic, 0))
	if len(f.segs) != 4 || f.segs[len(f.segs)-1].NextOffset() != f.end {
		t.Fatalf("%d segments committed, remote end %d, want 4 and %d", len(f.segs), f.segs[len(f.segs)-1].NextOffset(), f.end)
	}
	for _, s := range f.segs {
		// Every index is non-empty, so every section but the first
		// starts past 0: a reader ignoring offsets would read the wrong
		// bytes.
		if s.Index.Size == 0 || s.TimeIndex.Size == 0 {
			t.Fatalf("segment %d has an empty index: the test would not exercise the sections", s.BaseOffset)
		}
	}
	return f
}

// clone returns f over a copy of its bucket, for a test to damage.
func (f *secFixture) clone(t testing.TB) *secFixture {
	t.Helper()
	c := *f
	c.bkt = objstore.NewMemory()
	for _, k := range upKeys(t, f.bkt) {
		remotekit.Put(t, c.bkt, k, remotekit.Get(t, f.bkt, k))
	}
	return &c
}

// txnSegment returns a segment with a transaction index.
func (f *secFixture) txnSegment(t testing.TB) manifest.Segment {
	t.Helper()
	for _, s := range f.segs {
		if s.TxnIndex != nil && s.TxnIndex.Size > 0 {
			return s
		}
	}
	t.Fatal("no segment has a transaction index")
	return manifest.Segment{}
}

func (f *secFixture) open(t testing.TB, b objstore.BucketReader) *remotelog.RemoteLog {
	t.Helper()
	rl, err := remotelog.OpenRemoteLog(context.Background(), b, "", secTopic, 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

// replace overwrites key with edit(its bytes).
func (f *secFixture) replace(t testing.TB, key string, edit func([]byte) []byte) {
	t.Helper()
	remotekit.Put(t, f.bkt, key, edit(slices.Clone(remotekit.Get(t, f.bkt, key))))
}

// TestSectionsLayout: the uploader writes one indexes object per segment,
// holding the engine's .index, .timeindex and .txnindex back to back.
func TestSectionsLayout(t *testing.T) {
	f := newSecFixture(t, true)
	f.txnSegment(t)
	if err := f.d.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.segs {
		keys, err := manifest.DataKeys("", secTopic, 0, s.BaseOffset, s.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		key, size, ok := s.IndexesObject()
		if !ok || key != keys.Indexes {
			t.Fatalf("segment %d: IndexesObject() = %q, %v; want %q", s.BaseOffset, key, ok, keys.Indexes)
		}
		data := remotekit.Get(t, f.bkt, key)
		if int64(len(data)) != size {
			t.Fatalf("segment %d: indexes object of %d bytes, sections add up to %d", s.BaseOffset, len(data), size)
		}
		var want []byte
		for _, suffix := range []string{".index", ".timeindex", ".txnindex"} {
			want = append(want, remotekit.ReadOptional(t, localtier.SegmentPath(f.l.Dir(), s.BaseOffset, suffix))...)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("segment %d: indexes object is not the local .index, .timeindex and .txnindex back to back", s.BaseOffset)
		}
		if s.Index.Offset != 0 || s.TimeIndex.Offset != s.Index.Size ||
			s.TxnIndex != nil && s.TxnIndex.Offset != s.Index.Size+s.TimeIndex.Size {
			t.Fatalf("segment %d: sections at %d, %d, %+v", s.BaseOffset, s.Index.Offset, s.TimeIndex.Offset, s.TxnIndex)
		}
	}
	root := remotekit.Get(t, f.bkt, upLoad(t, f.bkt, secTopic, 0).Key())
	if !bytes.HasPrefix(root, []byte(`{"version":2,`)) {
		t.Fatalf("root manifest with sections is not version 2: %.40s", root)
	}
}

// TestSectionsReadBack reads every offset, timestamp and aborted
// transaction of an uploaded partition back through a remotelog.RemoteLog and
// compares with the local log.
func TestSectionsReadBack(t *testing.T) {
	ctx := context.Background()
	f := newSecFixture(t, true)
	f.txnSegment(t)
	rl := f.open(t, f.bkt)
	if rl.LogStartOffset() != 0 || rl.LogEndOffset() != f.end {
		t.Fatalf("remote log [%d, %d), want [0, %d)", rl.LogStartOffset(), rl.LogEndOffset(), f.end)
	}
	for off := int64(0); off < f.end; off++ {
		for _, maxBytes := range []int{1, 3000, 1 << 20} {
			res, err := rl.Read(ctx, off, maxBytes)
			if err != nil {
				t.Fatalf("read %d max %d: %v", off, maxBytes, err)
			}
			lres, err := f.l.Read(off, maxBytes, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := remotekit.WholePrefix(lres.Data); len(want) == 0 || !bytes.Equal(res.Data, want) {
				t.Fatalf("read %d max %d: %d bytes, the local log gives %d", off, maxBytes, len(res.Data), len(want))
			}
		}
	}

	// Timestamps: every answer lies in the uploaded segments up to the
	// last one's max timestamp.
	lo, hi := f.segs[0].MinTimestamp, f.segs[len(f.segs)-1].MaxTimestamp
	answers := map[int64]bool{}
	for ts := lo - 1000; ts <= hi; ts += max((hi-lo)/500, 1) {
		off, got, found, err := rl.OffsetForTimestamp(ctx, ts)
		if err != nil {
			t.Fatalf("ts %d: %v", ts, err)
		}
		lOff, lTS, lFound, err := f.l.OffsetForTimestamp(ts)
		if err != nil || off != lOff || got != lTS || found != lFound {
			t.Fatalf("ts %d: %d@%d %v, the local log gives %d@%d %v (%v)", ts, off, got, found, lOff, lTS, lFound, err)
		}
		if found {
			answers[off] = true
		}
	}
	if len(answers) < 100 {
		t.Fatalf("only %d distinct offsets found by timestamp, want at least 100", len(answers))
	}
	if _, _, found, err := rl.OffsetForTimestamp(ctx, hi+1); err != nil || found {
		t.Fatalf("timestamp past the remote log: found %v, %v", found, err)
	}

	total := 0
	for from := int64(0); from < f.end; from += 5 {
		for _, upTo := range []int64{from + 1, from + 30, f.end} {
			got, err := rl.AbortedTxns(ctx, from, upTo)
			if err != nil {
				t.Fatal(err)
			}
			if want := f.l.AbortedTxns(from, upTo); !slices.Equal(got, want) {
				t.Fatalf("aborted transactions in [%d, %d): %+v, want %+v", from, upTo, got, want)
			}
			total += len(got)
		}
	}
	if total == 0 {
		t.Fatal("no aborted transaction found: the test would not exercise the transaction index")
	}
}

// secRange is one GetRange call.
type secRange struct {
	key         string
	off, length int64
}

// secBucket records reads and writes, and can rewrite what its Get returns.
type secBucket struct {
	objstore.Bucket
	mu     sync.Mutex
	ranges []secRange
	gets   []string
	puts   []string
	getAs  func(key string, data []byte) []byte // nil: as stored
}

func (b *secBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.mu.Lock()
	b.gets = append(b.gets, key)
	rewrite := b.getAs
	b.mu.Unlock()
	rc, err := b.Bucket.Get(ctx, key)
	if err != nil || rewrite == nil {
		return rc, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(rewrite(key, data))), nil
}

func (b *secBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.mu.Lock()
	b.ranges = append(b.ranges, secRange{key, off, length})
	b.mu.Unlock()
	return b.Bucket.GetRange(ctx, key, off, length)
}

func (b *secBucket) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	b.mu.Lock()
	b.puts = append(b.puts, key)
	b.mu.Unlock()
	return b.Bucket.Put(ctx, key, r, size, cond)
}

// indexReads returns and forgets the reads of key: range GETs, and whole
// GETs (as ranges of length -1).
func (b *secBucket) indexReads(key string) []secRange {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []secRange
	for _, r := range b.ranges {
		if r.key == key {
			out = append(out, r)
		}
	}
	for _, k := range b.gets {
		if k == key {
			out = append(out, secRange{k, 0, -1})
		}
	}
	b.ranges, b.gets = nil, nil
	return out
}

// TestSectionsRangeRequests: each index is one range GET of its section,
// made once, in the order the reader needs them.
func TestSectionsRangeRequests(t *testing.T) {
	ctx := context.Background()
	f := newSecFixture(t, true)
	seg := f.txnSegment(t)
	key := seg.Index.Key
	offsetSec := secRange{key, 0, seg.Index.Size}
	timeSec := secRange{key, seg.Index.Size, seg.TimeIndex.Size}
	txnSec := secRange{key, seg.Index.Size + seg.TimeIndex.Size, seg.TxnIndex.Size}
	mid := seg.BaseOffset + (seg.LastOffset-seg.BaseOffset)/2

	cb := &secBucket{Bucket: f.bkt}
	rl := f.open(t, cb)
	cb.indexReads(key)
	expect := func(what string, want ...secRange) {
		t.Helper()
		if got := cb.indexReads(key); !slices.Equal(got, want) {
			t.Fatalf("%s: reads of %s %+v, want %+v", what, key, got, want)
		}
	}
	if _, err := rl.Read(ctx, mid, 1); err != nil {
		t.Fatal(err)
	}
	expect("read", offsetSec)
	// The segment's max timestamp is in this segment only (timestamps
	// increase): its time index is read, the offset index is cached.
	if off, _, found, err := rl.OffsetForTimestamp(ctx, seg.MaxTimestamp); err != nil || !found || off < seg.BaseOffset || off > seg.LastOffset {
		t.Fatalf("offset for timestamp %d: %d %v %v; want one found in [%d, %d]", seg.MaxTimestamp, off, found, err, seg.BaseOffset, seg.LastOffset)
	}
	expect("offset for timestamp", timeSec)
	if _, err := rl.AbortedTxns(ctx, seg.BaseOffset, seg.LastOffset); err != nil {
		t.Fatal(err)
	}
	expect("aborted transactions", txnSec)
	// All cached now.
	if _, err := rl.Read(ctx, seg.LastOffset, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := rl.OffsetForTimestamp(ctx, seg.MaxTimestamp-1); err != nil {
		t.Fatal(err)
	}
	if _, err := rl.AbortedTxns(ctx, seg.BaseOffset, seg.BaseOffset+1); err != nil {
		t.Fatal(err)
	}
	expect("reads again")

	// A fresh reader looking up a timestamp first reads the time index
	// section, then the offset index section.
	rl2 := f.open(t, cb)
	cb.indexReads(key)
	if _, _, _, err := rl2.OffsetForTimestamp(ctx, seg.MaxTimestamp); err != nil {
		t.Fatal(err)
	}
	expect("fresh offset for timestamp", timeSec, offsetSec)
}

// TestSectionsEmptyOffsetIndex: a segment too small for an offset index
// entry has an empty offset index section, and its time index section
// starts at 0 too: the two are told apart, and the empty one costs no
// request.
func TestSectionsEmptyOffsetIndex(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	l := secLocal(t, d, 14, 3, 1, false)
	bkt := objstore.NewMemory()
	if _, err := upUploader(t, bkt, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := upAllSegments(t, bkt, upLoad(t, bkt, secTopic, 0))
	if len(segs) != 3 {
		t.Fatalf("%d segments committed, want 3", len(segs))
	}
	cb := &secBucket{Bucket: bkt}
	for _, timeFirst := range []bool{false, true} {
		rl, err := remotelog.OpenRemoteLog(ctx, cb, "", secTopic, 0, remotelog.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			if s.Index.Size != 0 || s.TimeIndex.Offset != 0 || s.TimeIndex.Size == 0 {
				t.Fatalf("segment %d: sections %+v, %+v; want an empty offset index and a time index at 0", s.BaseOffset, s.Index, s.TimeIndex)
			}
			byOffset := func() {
				res, err := rl.Read(ctx, s.LastOffset, 1)
				if err != nil {
					t.Fatal(err)
				}
				lres, err := l.Read(s.LastOffset, 1, true)
				if err != nil || len(res.Data) == 0 || !bytes.Equal(res.Data, remotekit.WholePrefix(lres.Data)) {
					t.Fatalf("read %d: %d bytes, want the local log's non-empty answer (%v)", s.LastOffset, len(res.Data), err)
				}
			}
			byTimestamp := func() {
				off, ts, found, err := rl.OffsetForTimestamp(ctx, s.MaxTimestamp)
				lo, lt, lf, lerr := l.OffsetForTimestamp(s.MaxTimestamp)
				if err != nil || lerr != nil || off != lo || ts != lt || found != lf || !found {
					t.Fatalf("timestamp %d: %d@%d %v (%v), the local log gives %d@%d %v (%v)", s.MaxTimestamp, off, ts, found, err, lo, lt, lf, lerr)
				}
			}
			cb.indexReads(s.Index.Key)
			if timeFirst {
				byTimestamp()
				byOffset()
			} else {
				byOffset()
				byTimestamp()
			}
			byOffset()
			byTimestamp()
			if got, want := cb.indexReads(s.Index.Key), []secRange{{s.Index.Key, 0, s.TimeIndex.Size}}; !slices.Equal(got, want) {
				t.Fatalf("segment %d: reads %+v, want %+v", s.BaseOffset, got, want)
			}
		}
	}
}

// TestSectionsCorruption: damage to an indexes object is a
// *remotelog.CorruptObjectError naming it, for the reads of the sections damaged
// only.
func TestSectionsCorruption(t *testing.T) {
	ctx := context.Background()
	f0 := newSecFixture(t, false)
	for _, tc := range []struct {
		name string
		edit func(s manifest.Segment, b []byte) []byte
		// whether a read by offset (the offset index section) and by
		// timestamp (the time index section) fail
		offsetFails, timeFails bool
	}{
		{"flip_in_time_section", func(s manifest.Segment, b []byte) []byte {
			b[s.TimeIndex.Offset+s.TimeIndex.Size/2] ^= 0xff
			return b
		}, false, true},
		{"flip_in_offset_section", func(s manifest.Segment, b []byte) []byte { b[s.Index.Size/2] ^= 0xff; return b }, true, true},
		{"cut_in_time_section", func(s manifest.Segment, b []byte) []byte { return b[:s.TimeIndex.Offset+s.TimeIndex.Size/2] }, false, true},
		{"cut_at_time_section", func(s manifest.Segment, b []byte) []byte { return b[:s.TimeIndex.Offset] }, false, true},
		{"cut_in_offset_section", func(s manifest.Segment, b []byte) []byte { return b[:s.Index.Size-1] }, true, true},
		{"cut_to_empty", func(s manifest.Segment, b []byte) []byte { return b[:0] }, true, true},
		{"appended", func(s manifest.Segment, b []byte) []byte { return append(b, 1, 2, 3) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f0.clone(t)
			seg := f.segs[1]
			mid := seg.BaseOffset + (seg.LastOffset-seg.BaseOffset)/2
			byOffset := func(rl *remotelog.RemoteLog) error {
				res, err := rl.Read(ctx, mid, 1)
				if err != nil {
					return err
				}
				lres, err := f.l.Read(mid, 1, true)
				if err != nil || len(res.Data) == 0 || !bytes.Equal(res.Data, remotekit.WholePrefix(lres.Data)) {
					t.Fatalf("read %d: %d bytes, want the local log's non-empty answer (%v)", mid, len(res.Data), err)
				}
				return nil
			}
			byTimestamp := func(rl *remotelog.RemoteLog) error {
				off, _, found, err := rl.OffsetForTimestamp(ctx, seg.MaxTimestamp)
				if err == nil && (!found || off < seg.BaseOffset || off > seg.LastOffset) {
					t.Fatalf("offset for timestamp %d: %d, %v; want one in [%d, %d]", seg.MaxTimestamp, off, found, seg.BaseOffset, seg.LastOffset)
				}
				return err
			}
			f.replace(t, seg.Index.Key, func(b []byte) []byte { return tc.edit(seg, b) })
			for _, c := range []struct {
				what  string
				read  func(*remotelog.RemoteLog) error
				fails bool
			}{{"by offset", byOffset, tc.offsetFails}, {"by timestamp", byTimestamp, tc.timeFails}} {
				err := c.read(f.open(t, f.bkt)) // a fresh reader: no index cached
				var ce *remotelog.CorruptObjectError
				switch {
				case !c.fails && err != nil:
					t.Fatalf("read %s: %v", c.what, err)
				case c.fails && (!errors.As(err, &ce) || ce.Key != seg.Index.Key):
					t.Fatalf("read %s: %v, want a *remotelog.CorruptObjectError for %s", c.what, err, seg.Index.Key)
				}
			}
		})
	}
}

// TestSectionsVerify: the verifier streams an indexes object once, checks
// each section's checksum and the object's size.
func TestSectionsVerify(t *testing.T) {
	ctx := context.Background()
	f0 := newSecFixture(t, true)
	seg := f0.txnSegment(t)
	idx := slices.IndexFunc(f0.segs, func(s manifest.Segment) bool { return s.BaseOffset == seg.BaseOffset })
	section := func(o *manifest.Object) string {
		return fmt.Sprintf("section [%d, %d)", o.Offset, o.Offset+o.Size)
	}
	for _, tc := range []struct {
		name   string
		edit   func(s manifest.Segment, b []byte) []byte // the indexes object, as stored
		getAs  func(s manifest.Segment, b []byte) []byte // the indexes object, as read
		kind   ProblemKind                               // "": none
		detail func(s manifest.Segment, size int64) string
	}{
		{name: "clean"},
		{name: "flip_offset_section", edit: func(s manifest.Segment, b []byte) []byte { b[s.Index.Size-1] ^= 1; return b },
			kind: ProblemChecksum, detail: func(s manifest.Segment, _ int64) string { return section(&s.Index) }},
		{name: "flip_time_section", edit: func(s manifest.Segment, b []byte) []byte { b[s.TimeIndex.Offset] ^= 1; return b },
			kind: ProblemChecksum, detail: func(s manifest.Segment, _ int64) string { return section(&s.TimeIndex) }},
		{name: "flip_txn_section", edit: func(s manifest.Segment, b []byte) []byte { b[len(b)-1] ^= 1; return b },
			kind: ProblemChecksum, detail: func(s manifest.Segment, _ int64) string { return section(s.TxnIndex) }},
		{name: "truncated", edit: func(s manifest.Segment, b []byte) []byte { return b[:len(b)-1] },
			kind: ProblemSize, detail: func(_ manifest.Segment, size int64) string {
				return fmt.Sprintf("%d bytes, the manifest recorded %d", size-1, size)
			}},
		{name: "appended", edit: func(s manifest.Segment, b []byte) []byte { return append(b, 0) },
			kind: ProblemSize, detail: func(_ manifest.Segment, size int64) string {
				return fmt.Sprintf("%d bytes, the manifest recorded %d", size+1, size)
			}},
		// The object changes between the listing and the read.
		{name: "read_short", getAs: func(s manifest.Segment, b []byte) []byte { return b[:s.TimeIndex.Offset+1] },
			kind: ProblemSize, detail: func(s manifest.Segment, _ int64) string { return fmt.Sprintf("read %d bytes", s.TimeIndex.Offset+1) }},
		{name: "read_long", getAs: func(s manifest.Segment, b []byte) []byte { return append(b, 9, 9) },
			kind: ProblemSize, detail: func(s manifest.Segment, size int64) string { return fmt.Sprintf("read %d bytes", size+2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f0.clone(t)
			s := f.segs[idx]
			key, size, _ := s.IndexesObject()
			if tc.edit != nil {
				f.replace(t, key, func(b []byte) []byte { return tc.edit(s, b) })
			}
			b := &secBucket{Bucket: f.bkt}
			if tc.getAs != nil {
				b.getAs = func(k string, data []byte) []byte {
					if k == key {
						return tc.getAs(s, data)
					}
					return data
				}
			}
			rep, err := VerifyBucket(ctx, b, DefaultVerifyOptions())
			if err != nil {
				t.Fatal(err)
			}
			// Each indexes object is read whole, once: no per-section
			// request.
			for _, r := range b.ranges {
				if strings.HasSuffix(r.key, ".indexes") {
					t.Fatalf("range GET of %s, want whole GETs of indexes objects only", r.key)
				}
			}
			// A size differing in the listing skips the read.
			skipped := tc.edit != nil && tc.kind == ProblemSize
			for _, s := range f.segs {
				k, _, _ := s.IndexesObject()
				want := 1
				if skipped && k == key {
					want = 0
				}
				if n := len(slices.DeleteFunc(slices.Clone(b.gets), func(g string) bool { return g != k })); n != want {
					t.Fatalf("%s read %d times, want %d", k, n, want)
				}
			}
			if tc.kind == "" {
				var bytes int64
				for _, s := range f.segs {
					_, n, _ := s.IndexesObject()
					bytes += s.Log.Size + n
				}
				if !rep.OK() || len(rep.Problems) != 0 || rep.Objects != 2*len(f.segs) || rep.Bytes != bytes {
					t.Fatalf("clean bucket: OK %v, problems %v, %d objects, %d bytes; want %d objects (log and indexes of each segment), %d bytes",
						rep.OK(), rep.Problems, rep.Objects, rep.Bytes, 2*len(f.segs), bytes)
				}
				return
			}
			if rep.OK() || len(rep.Problems) != 1 {
				t.Fatalf("OK %v, problems %v; want one %s", rep.OK(), rep.Problems, tc.kind)
			}
			p := rep.Problems[0]
			if p.Kind != tc.kind || p.Key != key {
				t.Fatalf("problem %v, want %s on %s (%d bytes)", p, tc.kind, key, size)
			}
			if tc.detail != nil && !strings.Contains(p.Detail, tc.detail(s, size)) {
				t.Fatalf("problem detail %q does not name %q", p.Detail, tc.detail(s, size))
			}
		})
	}
}

// TestSectionsUploadPuts: a segment costs two data PUTs, its log and its
// indexes object, whatever indexes it has.
func TestSectionsUploadPuts(t *testing.T) {
	d := upOpenDir(t, t.TempDir())
	l := secLocal(t, d, 12, 4, 20, true)
	b := &secBucket{Bucket: objstore.NewMemory()}
	rep, err := upUploader(t, b, NewLocalSource(d, nil), Options{}).RunOnce(context.Background())
	if err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("upload: %+v, %v", rep, err)
	}
	segs := upCheckRemote(t, b.Bucket, l, secTopic, 0, l.Segments()[4].BaseOffset)
	perSeg := map[int64][]string{}
	for _, key := range b.puts {
		k, err := manifest.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if k.Type == manifest.KeyData {
			perSeg[k.BaseOffset] = append(perSeg[k.BaseOffset], key)
		}
	}
	withTxn := 0
	for _, s := range segs {
		want := []string{s.Log.Key, s.Index.Key}
		got := perSeg[s.BaseOffset]
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("segment %d: PUTs %v, want %v", s.BaseOffset, got, want)
		}
		if s.TxnIndex != nil {
			withTxn++
		}
	}
	if len(perSeg) != len(segs) || withTxn == 0 {
		t.Fatalf("data PUTs for %d segments, %d committed, %d with a transaction index; want PUTs for each committed segment and one with a transaction index at least", len(perSeg), len(segs), withTxn)
	}
	for _, key := range upKeys(t, b) {
		for _, ext := range []string{".index", ".timeindex", ".txnindex"} {
			if strings.HasSuffix(key, ext) {
				t.Fatalf("object %s: indexes are no longer separate objects", key)
			}
		}
	}
}

// TestSectionsGCOrphan: an attempt whose commit never happened leaves a
// .log and an .indexes object; garbage collection removes both, and no
// referenced indexes object.
func TestSectionsGCOrphan(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	l := secLocal(t, d, 13, 4, 10, false)
	mem := objstore.NewMemory()
	src := NewLocalSource(d, nil)
	if _, err := upUploader(t, mem, filterSource{src, 2}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	committed := upReferenced(t, mem, manifest.Key{Topic: secTopic, Partition: 0})

	// The next pass stores its segments but every root write fails: the
	// process gives up (as if it had crashed) without committing them.
	root, err := manifest.ManifestKey("", secTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	fb := objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool {
		return c.Op == objstore.OpPut && c.Key == root
	}, nil))
	u := upUploader(t, fb, src, Options{Retry: Retry{Attempts: 1, Base: time.Microsecond, Max: time.Microsecond}})
	// (isInjected accepts nil: the pass must fail.)
	if _, err := u.RunOnce(ctx); err == nil || !isInjected(err) {
		t.Fatalf("crashed pass: %v, want the injected root write failure", err)
	}
	var orphans []string
	for _, k := range upKeys(t, mem) {
		if !committed[k] {
			orphans = append(orphans, k)
		}
	}
	nIndexes := 0
	for _, k := range orphans {
		if strings.HasSuffix(k, ".indexes") {
			nIndexes++
		}
	}
	if nIndexes == 0 || len(orphans) != 2*nIndexes {
		t.Fatalf("the crashed pass left %v: want a .log and an .indexes object per segment", orphans)
	}

	later := func() time.Time { return time.Now().Add(2 * DefaultGCGrace) }
	rep, err := GC(ctx, mem, GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, o := range rep.Deleted {
		deleted = append(deleted, o.Key)
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, orphans) {
		t.Fatalf("gc deleted %v, want the orphans %v", deleted, orphans)
	}
	left := upKeys(t, mem)
	if len(left) != len(committed) {
		t.Fatalf("after gc: %v, want the %d referenced objects", left, len(committed))
	}
	for _, k := range left {
		if !committed[k] {
			t.Fatalf("after gc: %s is not referenced", k)
		}
	}
	// The committed segments still read, and a new pass completes.
	if _, err := upUploader(t, mem, src, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	upCheckRemote(t, mem, l, secTopic, 0, l.Segments()[4].BaseOffset)
}

// TestSectionsRollingUpgrade: an uploader with ManifestVersion 1 stores one
// object per index and writes version-1 manifests (what a release before
// the indexes object reads); a later default uploader appends segments
// with an indexes object to the same partition, its root becomes version
// 2, and every reader takes both layouts side by side.
func TestSectionsRollingUpgrade(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	l := secLocal(t, d, 15, 3, 20, true)
	b := &secBucket{Bucket: objstore.NewMemory()}
	root := func() []byte {
		key, err := manifest.ManifestKey("", secTopic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return remotekit.Get(t, b.Bucket, key)
	}

	// Version 1: one PUT per index, no .indexes object, a version-1 root.
	u1 := upUploader(t, b, NewLocalSource(d, nil), Options{ManifestVersion: 1})
	if rep, err := u1.RunOnce(ctx); err != nil || rep.UploadedSegments != 3 {
		t.Fatalf("version-1 upload: %+v, %v; want 3 segments uploaded", rep, err)
	}
	if r := root(); !bytes.HasPrefix(r, []byte(`{"version":1,`)) {
		t.Fatalf("root written by a version-1 uploader starts %.20q, want {\"version\":1,", r)
	}
	old := upCheckRemote(t, b.Bucket, l, secTopic, 0, l.Segments()[3].BaseOffset)
	puts := map[string]bool{}
	for _, k := range b.puts {
		puts[k] = true
	}
	txns := 0
	for _, s := range old {
		if _, _, ok := s.IndexesObject(); ok {
			t.Fatalf("segment %d: a version-1 uploader wrote an indexes object", s.BaseOffset)
		}
		for _, o := range s.Objects() {
			if o.Offset != 0 || !puts[o.Key] {
				t.Fatalf("segment %d: object %s at %d was not stored whole", s.BaseOffset, o.Key, o.Offset)
			}
		}
		if s.TxnIndex != nil {
			txns++
		}
	}
	if txns == 0 {
		t.Fatal("no segment with a transaction index: the test would not cover its object")
	}

	// The upgraded uploader appends with indexes objects: the root needs
	// version 2, and the old segments keep their objects.
	upSegments(t, l, 2, 3, 4, 50)
	u2 := upUploader(t, b, NewLocalSource(d, nil), Options{})
	if rep, err := u2.RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("version-2 upload: %+v, %v; want 2 segments uploaded", rep, err)
	}
	if r := root(); !bytes.HasPrefix(r, []byte(`{"version":2,`)) {
		t.Fatalf("root with indexes objects starts %.20q, want {\"version\":2,", r)
	}
	segs := upCheckRemote(t, b.Bucket, l, secTopic, 0, l.Segments()[5].BaseOffset)
	for i, s := range segs {
		_, _, sections := s.IndexesObject()
		if sections != (i >= 3) || i < 3 && !reflect.DeepEqual(s, old[i]) {
			t.Fatalf("segment %d (#%d): sections %v after the upgrade; want sections for the 2 new segments only and the 3 old ones unchanged", s.BaseOffset, i, sections)
		}
	}
	rl, err := remotelog.OpenRemoteLog(ctx, b.Bucket, "", secTopic, 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		// By time, through each layout's time index.
		got, gotTS, found, err := rl.OffsetForTimestamp(ctx, s.MaxTimestamp)
		if err != nil || !found {
			t.Fatalf("segment %d: offset for its max timestamp: found %v, %v; want found", s.BaseOffset, found, err)
		}
		want, wantTS, _, err := l.OffsetForTimestamp(s.MaxTimestamp)
		if err != nil || got != want || gotTS != wantTS {
			t.Fatalf("segment %d: remote offset for timestamp %d is %d@%d, local %d@%d (%v)", s.BaseOffset, s.MaxTimestamp, got, gotTS, want, wantTS, err)
		}
	}
	rep, err := VerifyBucket(ctx, b.Bucket, DefaultVerifyOptions())
	if err != nil || !rep.OK() {
		t.Fatalf("verify after the upgrade: %+v, %v", rep, err)
	}

	if _, err := NewUploader(b, NewLocalSource(d, nil), Options{ManifestVersion: manifest.Version + 1}); err == nil {
		t.Fatal("an uploader accepted a manifest version this release cannot write")
	}
}
