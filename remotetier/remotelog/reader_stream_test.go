package remotelog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// kindCounter counts the reads of each kind of object (.log, .index,
// .timeindex, .txnindex, manifests) made of the bucket it wraps.
type kindCounter struct {
	objstore.BucketReader
	mu    sync.Mutex
	reads map[string]int
}

func newKindCounter(b objstore.BucketReader) *kindCounter {
	return &kindCounter{BucketReader: b, reads: map[string]int{}}
}

func (b *kindCounter) count(key string) {
	b.mu.Lock()
	b.reads[path.Ext(key)]++
	b.mu.Unlock()
}

func (b *kindCounter) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.reads
	b.reads = map[string]int{}
	return r
}

func (b *kindCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.count(key)
	return b.BucketReader.Get(ctx, key)
}

func (b *kindCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	b.count(key)
	return b.BucketReader.GetRange(ctx, key, off, n)
}

// readSequentially reads l from offset to its end as a consumer does (each
// read at the offset after the last batch of the one before), checking
// every answer against the model, and returns the number of reads.
func readSequentially(t *testing.T, r *remotekit.Remote, l *RemoteLog, from int64, maxBytes int) int {
	t.Helper()
	ctx := context.Background()
	reads := 0
	for off := from; off < l.LogEndOffset(); reads++ {
		v, err := l.ReadView(ctx, off, maxBytes)
		if err != nil {
			t.Fatalf("read %d max %d: %v", off, maxBytes, err)
		}
		if got, want := joinParts(v.Parts, v.Len), r.ExpectRead(off, maxBytes); !bytes.Equal(got, want) || len(got) == 0 {
			t.Fatalf("read %d max %d: %d bytes, want %d", off, maxBytes, len(got), len(want))
		}
		off = v.NextOffset
	}
	return reads
}

// withCompactionGaps is files with gaps left by compaction: the third
// segment gone (a gap between segments), the second and fifth compacted.
func withCompactionGaps(t *testing.T, files []remotekit.SegFiles) []remotekit.SegFiles {
	out := make([]remotekit.SegFiles, 0, len(files))
	for i, f := range files {
		switch i {
		case 2:
			continue // a gap between segments
		case 1, 4:
			f = remotekit.Compact(t, f, func(i int) bool { return i%3 != 0 })
		}
		out = append(out, f)
	}
	return out
}

// seqRemote is a partition's remote tier as a sequential reader meets it.
type seqRemote struct {
	name   string
	policy manifest.Policy
	files  []remotekit.SegFiles
}

// seqRemotes are the same segments under an inline manifest, under sealed
// sub-manifests, and with gaps left by compaction.
func seqRemotes(t *testing.T) []seqRemote {
	local := remotekit.WriteLocal(t, t.TempDir(), 31, 6, 30, true)
	files := local.Files(t)
	return []seqRemote{
		{"inline", manifest.DefaultPolicy(), files},
		{"sealed_sub_manifests", remotekit.SmallPolicy, files},
		{"compaction_gaps", manifest.DefaultPolicy(), withCompactionGaps(t, files)},
	}
}

// TestSequentialReadNeedsNoIndex: a consumer reading a partition from
// the start of a segment to its end reads no offset, time or transaction
// index: it enters every segment at its first byte (the manifest has its
// base offset), and continues within one where its last read ended. One
// starting inside a segment reads that segment's offset index only. The
// answers are the model's, over inline and sealed manifests and segments
// with compaction gaps, at several read sizes.
func TestSequentialReadNeedsNoIndex(t *testing.T) {
	for _, tt := range seqRemotes(t) {
		t.Run(tt.name, func(t *testing.T) {
			r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, tt.policy)
			r.Commit(tt.files...)
			for _, maxBytes := range []int{1, 3000, 1 << 20} {
				kc := newKindCounter(r.Bucket)
				l := openTestLog(t, kc, "")
				kc.take()
				reads := readSequentially(t, r, l, l.LogStartOffset(), maxBytes)
				got := kc.take()
				if got[".index"]+got[".timeindex"]+got[".txnindex"] != 0 {
					t.Fatalf("max %d: %d reads from the start read indexes: %v", maxBytes, reads, got)
				}
				if got[".log"] != reads {
					t.Fatalf("max %d: %d reads made %d .log GETs", maxBytes, reads, got[".log"])
				}
				// From inside the first segment: its offset index, once.
				l = openTestLog(t, kc, "")
				kc.take()
				mid := (r.Segs[0].BaseOffset + r.Segs[0].LastOffset) / 2
				readSequentially(t, r, l, mid, maxBytes)
				if got := kc.take(); got[".index"] != 1 || got[".timeindex"]+got[".txnindex"] != 0 {
					t.Fatalf("max %d: reads from offset %d read indexes %v, want the first segment's .index once", maxBytes, mid, got)
				}
			}
		})
	}
}

// TestCutReadNeedsNoIndex: a server that sends only the first batches of
// a read (a Fetch response's byte limit cut it) and says so (Served) has
// its reader's next read, at the offset after the batches sent, continue
// the stream without the segment's offset index; without Served that read
// looks the position up in the index. Answers are the model's, over inline
// and sealed manifests and segments with compaction gaps.
func TestCutReadNeedsNoIndex(t *testing.T) {
	ctx := context.Background()
	for _, tt := range seqRemotes(t) {
		for _, served := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/served=%v", tt.name, served), func(t *testing.T) {
				r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, tt.policy)
				r.Commit(tt.files...)
				kc := newKindCounter(r.Bucket)
				l := openTestLog(t, kc, "")
				kc.take()
				const maxBytes = 3000
				cuts := 0
				for off := l.LogStartOffset(); off < l.LogEndOffset(); {
					v, err := l.ReadView(ctx, off, maxBytes)
					if err != nil {
						t.Fatalf("read %d: %v", off, err)
					}
					data := joinParts(v.Parts, v.Len)
					if want := r.ExpectRead(off, maxBytes); !bytes.Equal(data, want) || len(data) == 0 {
						t.Fatalf("read %d: %d bytes, want %d", off, len(data), len(want))
					}
					// Send the first half of the batches (at least one).
					var ends []int
					var nexts []int64
					it := record.NewIter(data)
					for b, ok := it.Next(); ok; b, ok = it.Next() {
						ends, nexts = append(ends, it.Pos()), append(nexts, b.NextOffset())
					}
					if len(ends) < 2 {
						off = v.NextOffset
						continue
					}
					k := (len(ends) - 1) / 2
					if served {
						l.Served(v, ends[k], nexts[k])
					}
					cuts++
					off = nexts[k]
				}
				got := kc.take()
				if cuts < 3 {
					t.Fatalf("only %d reads were cut", cuts)
				}
				if served && got[".index"]+got[".timeindex"]+got[".txnindex"] != 0 {
					t.Fatalf("%d cut reads served: indexes read %v", cuts, got)
				}
				if !served && got[".index"] == 0 {
					t.Fatalf("%d cut reads not served read no offset index (%v): the test cannot tell", cuts, got)
				}
			})
		}
	}
}

// TestServed: Served records a cut of a read after a whole batch, with
// the offset after it, so that a read there needs no offset index and
// answers the model's batches; two cuts of one read are both recorded.
// Anything else changes nothing: all of the read, none of it, a kept that
// is not a batch's end, a next that is not the offset after the batch kept
// last, or one at or past the read's end; a read at that offset looks its
// position up in the offset index as before (or, at the read's end,
// continues its stream).
func TestServed(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 31, 6, 30, true)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	ctx := context.Background()
	// A read of three batches, which ends inside a segment: ends[i] is
	// where batch i ends in it, nexts[i] the offset after it.
	var start int64
	var ends []int
	var nexts []int64
	for _, seg := range r.Segs {
		start, ends, nexts = seg.BaseOffset, nil, nil
		it := record.NewIter(r.ExpectRead(start, 1<<30))
		for b, ok := it.Next(); ok && len(ends) < 4; b, ok = it.Next() {
			ends, nexts = append(ends, it.Pos()), append(nexts, b.NextOffset())
		}
		if len(ends) == 4 {
			break
		}
	}
	if len(ends) < 4 {
		t.Fatalf("no segment has 4 batches; the test needs one")
	}
	maxBytes := ends[2]
	type cut struct {
		kept int
		next int64
	}
	type read struct {
		at        int64
		wantIndex int
	}
	for _, tt := range []struct {
		name  string
		cuts  []cut
		reads []read
	}{
		{"after_first", []cut{{ends[0], nexts[0]}}, []read{{nexts[0], 0}}},
		{"twice", []cut{{ends[1], nexts[1]}, {ends[0], nexts[0]}}, []read{{nexts[1], 0}, {nexts[0], 0}}},
		{"all", []cut{{ends[2], nexts[0]}}, []read{{nexts[0], 1}}},
		{"none", []cut{{0, nexts[0]}}, []read{{nexts[0], 1}}},
		{"not_a_batch_end", []cut{{ends[0] + 1, nexts[0]}}, []read{{nexts[0], 1}}},
		{"wrong_next", []cut{{ends[0], nexts[0] + 1}}, []read{{nexts[0] + 1, 1}}},
		{"at_its_end", []cut{{ends[0], nexts[2]}}, []read{{nexts[2], 0}}},
		{"past_its_end", []cut{{ends[0], nexts[2] + 1}}, []read{{nexts[2] + 1, 1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kc := newKindCounter(r.Bucket)
			l := openTestLog(t, kc, "")
			v, err := l.ReadView(ctx, start, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if v.Len != ends[2] || v.NextOffset != nexts[2] {
				t.Fatalf("read %d bytes to offset %d, want three batches, %d bytes to %d", v.Len, v.NextOffset, ends[2], nexts[2])
			}
			for _, c := range tt.cuts {
				l.Served(v, c.kept, c.next)
			}
			for _, rd := range tt.reads {
				kc.take()
				got, err := l.ReadView(ctx, rd.at, maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				if data, want := joinParts(got.Parts, got.Len), r.ExpectRead(rd.at, maxBytes); !bytes.Equal(data, want) {
					t.Fatalf("read at %d after Served: %d bytes, want %d", rd.at, len(data), len(want))
				}
				if n := kc.take()[".index"]; n != rd.wantIndex {
					t.Fatalf("read at %d after Served read the offset index %d times, want %d", rd.at, n, rd.wantIndex)
				}
			}
		})
	}
}

// windowBucket is a ReadAheader that records the windows it is given and
// says it covered all of each (cover) or none.
type windowBucket struct {
	objstore.BucketReader
	cover   bool
	limit   int64 // with cover: covers at most this many bytes of a window
	mu      sync.Mutex
	streams []uint64
	windows [][]objstore.Range
}

func (b *windowBucket) ReadAhead(stream uint64, w []objstore.Range) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streams = append(b.streams, stream)
	b.windows = append(b.windows, w)
	var n int64
	for _, r := range w {
		n += r.Len
	}
	switch {
	case !b.cover:
		return 0
	case b.limit > 0:
		return min(n, b.limit)
	}
	return n
}

// take returns the stream and window of the last call since the last
// take (0 and nil when none).
func (b *windowBucket) take() (uint64, []objstore.Range) {
	ids, ws := b.takeAll()
	if len(ws) == 0 {
		return 0, nil
	}
	return ids[len(ids)-1], ws[len(ws)-1]
}

// TestReadAheadAcrossSegments: after every read a ReadAheader is asked to
// keep the next bytes of the partition cached from where the read ended,
// across segment boundaries (the rest of the segment, then the next ones
// from their first byte, in order), under one stream id per reader; the
// depth doubles with each sequential read up to ReadAheadBytes; another
// reader, starting inside a segment, reads ahead from its second read on,
// as its own stream; the log's end ends the window.
func TestReadAheadAcrossSegments(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 32, 8, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	wb := &windowBucket{BucketReader: r.Bucket}
	const maxBytes, cap = 1000, 256 << 10
	l, err := OpenRemoteLog(ctx, wb, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{ReadAheadBytes: cap})
	if err != nil {
		t.Fatal(err)
	}
	segOf := map[string]int{}
	for i, s := range r.Segs {
		segOf[s.Log.Key] = i
	}
	floor := int64(maxBytes + DefaultScanWindow)
	// The first read, from the log start, asks for its window before it
	// reads: from the segment's first byte, the whole segment at least.
	wantDepth := max(2*floor, r.Segs[0].Log.Size)
	var stream uint64
	off := int64(0)
	for i := 0; off < l.LogEndOffset(); i++ {
		v, err := l.ReadView(ctx, off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		id, w := wb.take()
		if i == 0 {
			stream = id
		} else if id != stream && w != nil {
			t.Fatalf("read %d: stream %d, want %d (the same reader)", i, id, stream)
		}
		// The window starts where the read ended and runs on through
		// whole next segments.
		seg, err := r.M.FindOffset(ctx, l.subs, off)
		if err != nil {
			t.Fatal(err)
		}
		end := int64(0)
		for _, b := range r.Batches {
			if b.Seg == segOf[seg.Log.Key] && b.B.NextOffset() == v.NextOffset && i > 0 {
				end = b.Pos + int64(b.B.Size())
			}
		}
		var want []objstore.Range
		var total int64
		for k, at := segOf[seg.Log.Key], end; k < len(r.Segs) && total < wantDepth; k, at = k+1, 0 {
			sg := r.Segs[k]
			if at < sg.Log.Size {
				n := min(wantDepth-total, sg.Log.Size-at)
				want = append(want, objstore.Range{Key: sg.Log.Key, Off: at, Len: n, Size: sg.Log.Size})
				total += n
			}
		}
		if !slices.Equal(w, want) {
			t.Fatalf("read %d (ends at %d of segment %d): window %+v, want %+v", i, end, segOf[seg.Log.Key], w, want)
		}
		if i == 2 && len(w) < 2 {
			t.Fatalf("read %d: the window of %d bytes stays in one segment", i, total)
		}
		wantDepth = min(2*wantDepth, cap)
		off = v.NextOffset
	}
	// Another reader, inside a segment: no read-ahead for its first read
	// (it may be a random read), then its own stream.
	v, err := l.ReadView(ctx, r.Segs[3].BaseOffset+1, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if id, w := wb.take(); id != 0 {
		t.Fatalf("a first read inside a segment read ahead %+v", w)
	}
	if _, err := l.ReadView(ctx, v.NextOffset, maxBytes); err != nil {
		t.Fatal(err)
	}
	if id, _ := wb.take(); id == stream || id == 0 {
		t.Fatalf("the second reader's stream is %d, the first's %d", id, stream)
	}
}

// TestReadAheadAsksAgainHalfWay: a stream whose window the bucket
// covered asks for it again only once its reader has read half a depth of
// it (small reads do not each walk the window); one the bucket could not
// cover asks on every read.
func TestReadAheadAsksAgainHalfWay(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 33, 8, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	const maxBytes, depth = 500, 64 << 10
	for _, cover := range []bool{true, false} {
		wb := &windowBucket{BucketReader: r.Bucket, cover: cover}
		l, err := OpenRemoteLog(ctx, wb, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{ReadAheadBytes: depth})
		if err != nil {
			t.Fatal(err)
		}
		// Read until the depth is at its cap, then count the requests
		// over reads of 4 depths of bytes.
		off := int64(0)
		var read int64
		asks, reads := 0, 0
		for i := 0; off < l.LogEndOffset() && read < 4*depth; i++ {
			v, err := l.ReadView(ctx, off, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			off = v.NextOffset
			if id, _ := wb.take(); i >= 8 {
				reads++
				read += int64(v.Len)
				if id != 0 {
					asks++
				}
			}
		}
		if read < 4*depth {
			t.Fatalf("read only %d bytes", read)
		}
		switch {
		case cover && (asks < 4 || asks > 10):
			t.Fatalf("covered: %d requests over %d reads of 4 depths, want about 8 (one per half depth)", asks, reads)
		case !cover && asks != reads:
			t.Fatalf("not covered: %d requests over %d reads, want one each", asks, reads)
		}
	}
}

// coveredLog is a remote log of a committed local log (seed as
// WriteLocal's) over a windowBucket that covers every window, with the
// default reader options.
func coveredLog(t *testing.T, seed uint64) (*remotekit.Remote, *windowBucket, *RemoteLog) {
	t.Helper()
	local := remotekit.WriteLocal(t, t.TempDir(), seed, 8, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	wb := &windowBucket{BucketReader: r.Bucket, cover: true}
	l, err := OpenRemoteLog(context.Background(), wb, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r, wb, l
}

// TestReadAheadToTheEnd: once a covered window reaches the log's end, the
// stream asks no more until its reader gets there.
func TestReadAheadToTheEnd(t *testing.T) {
	ctx := context.Background()
	_, wb, l := coveredLog(t, 34)
	asks, reads := 0, 0
	for off := int64(0); off < l.LogEndOffset(); reads++ {
		v, err := l.ReadView(ctx, off, 2000)
		if err != nil {
			t.Fatal(err)
		}
		off = v.NextOffset
		if id, _ := wb.take(); id != 0 {
			asks++
		}
	}
	// The depth ramps up from two reads: a few requests until the window
	// reaches the end of the log (a few hundred KB), then none.
	if asks > 8 || reads < 50 {
		t.Fatalf("%d requests over %d reads of a log within the depth", asks, reads)
	}
}

// TestReadAheadHeldBack: when the bucket covers only part of each window
// (its memory share among many streams), the stream asks for about twice
// what it covered, not its whole depth, and asks again once that is
// half read.
func TestReadAheadHeldBack(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 35, 8, 20, false)
	r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	const maxBytes, limit = 500, 20000
	floor := int64(maxBytes + DefaultScanWindow)
	wb := &windowBucket{BucketReader: r.Bucket, cover: true, limit: limit}
	l, err := OpenRemoteLog(ctx, wb, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{ReadAheadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	asks := 0
	for off, i := int64(0), 0; off < l.LogEndOffset() && i < 100; i++ {
		v, err := l.ReadView(ctx, off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		off = v.NextOffset
		_, w := wb.take()
		var n int64
		for _, rg := range w {
			n += rg.Len
		}
		if w != nil {
			asks++
		}
		if i > 0 && n > max(2*limit, floor) {
			t.Fatalf("read %d: a window of %d bytes after the bucket covered %d", i, n, limit)
		}
	}
	if asks < 2 {
		t.Fatalf("%d requests", asks)
	}
}

// TestReadAheadDepth: the depth of a stream's read-ahead starts at two
// reads, doubles with each sequential read up to ReadAheadBytes, and is
// held to what the reader consumes in ReadAheadLead at its measured rate
// (at least one read): a fast reader reads far ahead, a slow one not.
func TestReadAheadDepth(t *testing.T) {
	o := ReaderOptions{ReadAheadBytes: 64 << 20, ReadAheadLead: time.Second}.withDefaults()
	const maxBytes = 1 << 20
	floor := int64(maxBytes + DefaultScanWindow)
	for _, tt := range []struct {
		name  string
		every time.Duration // between reads of maxBytes
		want  []int64       // depth after each read
	}{
		{"fast_reader_ramps_to_the_cap", time.Millisecond, []int64{2 * floor, 4 * floor, 8 * floor, 16 * floor, 32 * floor, 64 << 20, 64 << 20}},
		{"10MBps_reader_holds_10MB", 100 * time.Millisecond, []int64{2 * floor, 4 * floor, 8 * floor, 10 << 20, 10 << 20}},
		{"slow_reader_one_read", 10 * time.Second, []int64{2 * floor, floor, floor}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			s := o.nextStream(streamState{}, false, true, maxBytes, now, maxBytes)
			for i, want := range tt.want {
				if i > 0 {
					now = now.Add(tt.every)
					s = o.nextStream(s, true, false, maxBytes, now, maxBytes)
				}
				// The rate-held depth is within rounding of the bytes per lead.
				if d := s.depth - want; d < -1 || d > 1 {
					t.Fatalf("read %d: depth %d, want %d", i, s.depth, want)
				}
			}
		})
	}
	// A reader that began inside a segment (a seek, a random read) reads
	// ahead from its second read on.
	now := time.Unix(1000, 0)
	s := o.nextStream(streamState{}, false, false, maxBytes, now, maxBytes)
	if s.depth != 0 {
		t.Fatalf("first read inside a segment: depth %d, want 0", s.depth)
	}
	if s = o.nextStream(s, true, false, maxBytes, now.Add(time.Millisecond), maxBytes); s.depth != 2*floor {
		t.Fatalf("its second read: depth %d, want %d", s.depth, 2*floor)
	}
	off := ReaderOptions{ReadAheadBytes: -1}.withDefaults()
	if s := off.nextStream(streamState{}, false, true, 10, time.Now(), 10); s.depth != 0 {
		t.Fatalf("read-ahead disabled: depth %d", s.depth)
	}
}

// takeAll returns the streams and windows of every call since the last
// take, in order.
func (b *windowBucket) takeAll() ([]uint64, [][]objstore.Range) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids, ws := b.streams, b.windows
	b.streams, b.windows = nil, nil
	return ids, ws
}

// TestReadAheadWaitsForTheRequest: the reads of one request (a Fetch of
// many partitions, objstore.DemandGroup) ask for their read-ahead only
// once every read of the request has asked for its own bytes: a new
// stream's first window is cut to its own segment (which its read joins)
// and the rest asked for later, a continuing stream's window is asked for
// later whole; both as they would have been at once, the first before the
// second. Outside a pending request, windows are asked for at once.
func TestReadAheadWaitsForTheRequest(t *testing.T) {
	ctx := context.Background()
	r, wb, l := coveredLog(t, 36)
	// Reads the size of a segment: the first window spans two segments.
	maxBytes := int(r.Segs[0].Log.Size)
	g := objstore.NewDemandGroup(2)
	c1, end1 := objstore.WithDemand(ctx, g)
	v, err := l.ReadView(c1, 0, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	ids, ws := wb.takeAll()
	if len(ws) != 1 || len(ws[0]) != 1 || ws[0][0].Key != r.Segs[0].Log.Key || ws[0][0].Off != 0 || ws[0][0].Len != r.Segs[0].Log.Size {
		t.Fatalf("first read of a pending request asked for %+v, want its own segment only", ws)
	}
	stream := ids[0]
	// A second read of the stream, still within the pending request:
	// nothing asked for now.
	v2, err := l.ReadView(c1, v.NextOffset, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	end1()
	if _, ws := wb.takeAll(); len(ws) != 0 {
		t.Fatalf("asked for %+v with a read of the request still to ask", ws)
	}
	// The request's other read asks for its bytes: the held-back windows
	// are asked for, the first one's whole, then the second read's.
	c2, end2 := objstore.WithDemand(ctx, g)
	objstore.DemandAsked(c2)
	end2()
	ids, ws = wb.takeAll()
	if len(ws) != 2 || ids[0] != stream || ids[1] != stream {
		t.Fatalf("after the request's reads asked: streams %v, windows %+v; want 2 of stream %d", ids, ws, stream)
	}
	if len(ws[0]) < 2 || ws[0][0] != (objstore.Range{Key: r.Segs[0].Log.Key, Len: r.Segs[0].Log.Size, Size: r.Segs[0].Log.Size}) || ws[0][1].Key != r.Segs[1].Log.Key {
		t.Fatalf("the first window, asked for later: %+v, want the whole of it from segment 0 on", ws[0])
	}
	if ws[1][0].Key == r.Segs[0].Log.Key {
		t.Fatalf("the second read's window %+v starts in segment 0", ws[1])
	}
	// Reads that go on in requests of two ask as lone reads do, when
	// their reader nears the end of what was asked for, not at every read.
	asks, reads := 0, 0
	for off := v2.NextOffset; off < l.LogEndOffset(); reads++ {
		g := objstore.NewDemandGroup(2)
		c, end := objstore.WithDemand(ctx, g)
		v, err := l.ReadView(c, off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		end()
		_, other := objstore.WithDemand(ctx, g)
		other()
		if ids, _ := wb.takeAll(); len(ids) > 0 {
			asks++
		}
		off = v.NextOffset
	}
	if reads < 4 || 2*asks > reads {
		t.Fatalf("%d requests over %d reads in requests of two, want fewer than one every other read", asks, reads)
	}
}
