package remotelog

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Sequential readers (streams). A RemoteLog remembers where its recent
// reads ended, keyed by the offset after the last batch served: the .log
// object and the byte position there of the next batch. A read at that
// offset continues the stream and starts at that position without the
// segment's offset index; a read at a segment's base offset starts at its
// first byte, also without it. A sequential reader thus loads no index at
// all after its first read (at most one, where it started), and reads each
// segment's .log with the range GETs of its bytes only — one GET per
// segment when the segment fits a chunk load. A server that sends its
// reader only the first batches of a read (a Fetch response's max bytes)
// says so (Served), and the stream continues from there as well.
//
// Each stream has an id (objstore.NewStreamID) under which the RemoteLog
// asks a ReadAheader bucket to keep the next `depth` bytes of the
// partition cached, across segment boundaries: after a read whose reader
// has come within half a depth of the end of what the bucket last said it
// covered (or, when that reached the log's end, has got there), so small
// reads do not each walk the window. The depth
// follows the reader's consumption: it starts at two reads' worth (from
// a segment's start; a reader that began elsewhere, from its second read
// on, so random reads load nothing ahead), doubles
// with every sequential read up to ReadAheadBytes, and never exceeds what
// the reader consumes in ReadAheadLead at its measured rate (but at least
// one read's worth), so a slow reader does not fill the cache with bytes
// it reaches only after they are evicted. The bucket shares its in-flight
// budget among the active streams (chunkcache).

// Defaults of the stream options.
const (
	// DefaultStreams is how many stream positions a RemoteLog remembers
	// (each about 100 bytes): the readers of one partition at once.
	DefaultStreams = 64
	// DefaultReadAheadBytes is the deepest read-ahead of one stream.
	DefaultReadAheadBytes = 64 << 20
	// DefaultReadAheadLead is how far ahead in time of its reader a
	// stream's read-ahead reaches, at the reader's measured rate.
	DefaultReadAheadLead = time.Second
	// maxWindowSegments bounds the segments one read-ahead window spans,
	// so tiny segments do not make every read walk many of them.
	maxWindowSegments = 256
)

// streamState is what a RemoteLog keeps of one stream between reads.
type streamState struct {
	id    uint64
	key   string // the .log the read ended in; "" when it ended at its end
	pos   int64  // the position there of the batch holding the next offset
	n     int64  // bytes the read returned
	at    time.Time
	rate  float64 // bytes per second the reader consumes (smoothed); 0 unknown
	depth int64   // read-ahead depth in bytes
	// ahead is how many bytes past where the read ended the bucket said
	// are cached or loading: the stream asks for its window again only
	// once its reader has come within half a depth of their end, so a
	// reader of small reads does not walk its window on every read.
	ahead int64
	// toEnd says the covered bytes reach the log's end (as of that
	// request): the stream asks again only once its reader gets there.
	toEnd bool
	// limit is what the bucket covered of the last window when it held
	// back part of it (its share of memory or of the in-flight budget
	// among many streams; the part the in-flight budget held back it may
	// still load later); 0 when it took all. The next window asks for
	// twice that, not the whole depth, so a stream with a small share does
	// not walk a deep window it cannot use.
	limit int64
}

// windowBytes is the length of the window s asks for: its depth, or twice
// what the bucket covered of the last one when it held back (at least
// floor, one read's worth).
func (s streamState) windowBytes(prev streamState, cont bool, floor int64) int64 {
	if !cont || prev.limit <= 0 {
		return s.depth
	}
	return min(s.depth, max(2*prev.limit, floor))
}

// advance is how many bytes of the partition's logs a read that continued
// prev (cont) and ended at end of the .log key moved on by; -1 unknown.
func advance(prev streamState, cont bool, key string, end int64) int64 {
	switch {
	case !cont:
		return -1
	case prev.key == key:
		return end - prev.pos
	case prev.key == "":
		return end // the previous read ended its segment: this one began the next
	}
	return -1
}

// wantsWindow reports whether a stream whose last request left prev.ahead
// bytes covered (to the log's end: prev.toEnd), and which moved on by adv
// since, asks for its window again, and how many covered bytes are left.
func wantsWindow(prev streamState, adv, depth int64) (bool, int64) {
	if adv < 0 {
		return depth > 0, 0
	}
	left := prev.ahead - adv
	if prev.toEnd {
		return depth > 0 && left <= 0, max(left, 0)
	}
	return depth > 0 && 2*left < depth, max(left, 0)
}

// streamTable is a bounded LRU of streams by their next offset.
type streamTable struct {
	mu  sync.Mutex
	lru *simplelru.LRU[int64, streamState]
}

func newStreamTable(n int) *streamTable {
	l, err := simplelru.NewLRU[int64, streamState](n, nil)
	if err != nil {
		panic(err) // n is defaulted to a positive value
	}
	return &streamTable{lru: l}
}

// get returns the stream whose next offset is offset. It stays in the
// table: readers at the same offset read the same bytes and continue it
// alike.
func (t *streamTable) get(offset int64) (streamState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Get(offset)
}

func (t *streamTable) put(offset int64, s streamState) {
	t.mu.Lock()
	t.lru.Add(offset, s)
	t.mu.Unlock()
}

// Served tells the log that the reader of v was given only v's first kept
// bytes, the batches before offset next: a response's byte limit cut the
// read (a Kafka Fetch of many partitions). The stream the read made goes on
// from there too, at the position where those batches end in v's .log, so
// the reader's next read, at next, needs no offset index either. Anything
// but a cut of v after a whole batch, with next the offset after that
// batch, is ignored: all of v (its own stream goes on), none of it, or a
// kept or next that is not a batch's end.
func (l *RemoteLog) Served(v ReadView, kept int, next int64) {
	if kept >= v.Len || v.logKey == "" || !batchEndsAt(v.Parts, kept, next) {
		return
	}
	s, ok := l.streams.get(v.NextOffset)
	if !ok {
		return
	}
	dropped := int64(v.Len - kept)
	s.key, s.pos = v.logKey, v.end-dropped
	s.n = max(s.n-dropped, 0)
	s.ahead += dropped // covered: the bytes the read had, now still ahead
	l.streams.put(next, s)
}

// batchEndsAt reports whether a batch of parts (whole batches, which may
// span parts) ends at byte kept, and next is the offset after it. It reads
// the batch headers only.
func batchEndsAt(parts [][]byte, kept int, next int64) bool {
	var hdr [record.HeaderSize]byte
	for pos := 0; pos < kept; {
		n := record.CopyAt(parts, pos, hdr[:])
		if n < record.LogOverhead {
			return false
		}
		b := record.Batch(hdr[:n])
		end := pos + int(b.Length()) + record.LogOverhead
		if end == kept {
			return n == record.HeaderSize && b.NextOffset() == next
		}
		if end <= pos {
			return false
		}
		pos = end
	}
	return false
}

// startAt is where a read of target in seg begins without the offset
// index: the segment's first byte for its base offset (or an offset in a
// gap before its first batch), a stream's position when the read continues
// it in this segment. ok is false when the index must say.
func startAt(seg manifest.Segment, target int64, prev streamState, cont bool) (pos int64, ok bool) {
	switch {
	case target <= seg.BaseOffset:
		return 0, true
	case cont && prev.key == seg.Log.Key && prev.pos > 0 && prev.pos < seg.Log.Size:
		return prev.pos, true
	}
	return 0, false
}

// nextStream is the state of the stream after a read of n bytes at now
// that continued prev (cont) or began a new stream. A new stream reads
// ahead at once only from a segment's start (fromStart: a replay from
// there); one that began elsewhere (a seek, a random read) does from its
// second read on, as a sequential reader.
func (o ReaderOptions) nextStream(prev streamState, cont, fromStart bool, n int64, now time.Time, maxBytes int) streamState {
	floor := int64(max(maxBytes, 1)) + int64(o.ScanWindow)
	s := streamState{n: n, at: now}
	if !cont {
		s.id = objstore.NewStreamID()
		if fromStart {
			s.depth = min(2*floor, max(o.ReadAheadBytes, 0))
		}
		return s
	}
	s.id, s.rate = prev.id, prev.rate
	if dt := now.Sub(prev.at).Seconds(); dt > 0 && prev.n > 0 {
		sample := float64(prev.n) / dt
		if s.rate == 0 {
			s.rate = sample
		} else {
			s.rate = (s.rate + sample) / 2
		}
	}
	depth := min(2*max(prev.depth, floor), o.ReadAheadBytes)
	if s.rate > 0 {
		depth = min(depth, max(floor, int64(s.rate*o.ReadAheadLead.Seconds())))
	}
	s.depth = max(depth, 0)
	return s
}

// readAheadWindow is the window of the next depth bytes of the partition
// after byte end of seg's log: the rest of seg, then the segments after
// it, at most maxWindowSegments of them, and its length (below depth when
// it reaches the log's end).
func (l *RemoteLog) readAheadWindow(ctx context.Context, m *manifest.Manifest, seg manifest.Segment, end, depth int64) (window []objstore.Range, total int64) {
	for total < depth {
		if len(window) == maxWindowSegments {
			return window, depth // cut short, not at the log's end
		}
		if end < seg.Log.Size {
			n := min(depth-total, seg.Log.Size-end)
			hintSize(l.bucket, seg.Log)
			window = append(window, objstore.Range{Key: seg.Log.Key, Off: end, Len: n, Size: seg.Log.Size})
			total += n
		}
		if total >= depth || seg.NextOffset() >= m.NextOffset() {
			break
		}
		next, err := m.FindOffset(ctx, l.subs, seg.NextOffset())
		if err != nil || next.Log.Key == seg.Log.Key {
			return window, depth // the read itself reports problems with the next segment
		}
		seg, end = next, 0
	}
	return window, total
}

// readsAhead reports whether the log drives the bucket's read-ahead.
func (l *RemoteLog) readsAhead() (objstore.ReadAheader, bool) {
	ra, ok := l.bucket.(objstore.ReadAheader)
	return ra, ok && l.opts.ReadAheadBytes > 0
}
