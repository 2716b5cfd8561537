package remotelog

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// The .log cursor of a RemoteLog read and the cache of parsed index objects.

// logCursor reads a segment's .log object by range GETs, keeping one window
// of it in memory: one buffer, or the parts of an objstore.SharedRangeReader (a
// chunk cache's memory, never copied or modified here).
type logCursor struct {
	b      objstore.BucketReader
	obj    manifest.Object
	window int64
	off    int64    // object position of the window
	n      int64    // window length
	parts  [][]byte // the window's bytes, in order
	shared bool     // parts are a cache's memory
}

func newLogCursor(b objstore.BucketReader, obj manifest.Object, window int64) *logCursor {
	hintSize(b, obj)
	return &logCursor{b: b, obj: obj, window: max(window, record.HeaderSize)}
}

// fill makes the window hold the n bytes of the object at pos, fetching
// them (and up to a window beyond) when it does not.
func (c *logCursor) fill(ctx context.Context, pos, n int64) error {
	if pos >= c.off && pos+n <= c.off+c.n {
		return nil
	}
	if pos < 0 || n < 0 || pos+n > c.obj.Size {
		return fmt.Errorf("read %s: range [%d, %d) outside the %d-byte object", c.obj.Key, pos, pos+n, c.obj.Size)
	}
	length := min(max(n, c.window), c.obj.Size-pos)
	rc, err := c.b.GetRange(ctx, c.obj.Key, pos, length)
	if err != nil {
		return fmt.Errorf("get %s [%d, %d): %w", c.obj.Key, pos, pos+length, err)
	}
	defer rc.Close()
	if sr, ok := rc.(objstore.SharedRangeReader); ok {
		parts := sr.SharedBytes()
		got := int64(0)
		for _, p := range parts {
			got += int64(len(p))
		}
		if got < length {
			// The cache cut the range at the object's real end.
			return &CorruptObjectError{Key: c.obj.Key, Reason: fmt.Sprintf(
				"object ends at %d bytes, the manifest recorded %d", pos+got, c.obj.Size)}
		}
		c.off, c.n, c.parts, c.shared = pos, length, parts, true
		return nil
	}
	buf := make([]byte, length)
	er := &eofReader{r: rc}
	if got, err := io.ReadFull(er, buf); err != nil {
		// Only a clean end of the body means the object is shorter than
		// the manifest says; a body cut off in transit (the HTTP client's
		// io.ErrUnexpectedEOF, a reset) is an I/O error, not corruption.
		if er.eof {
			return &CorruptObjectError{Key: c.obj.Key, Reason: fmt.Sprintf(
				"object ends at %d bytes, the manifest recorded %d", pos+int64(got), c.obj.Size)}
		}
		return fmt.Errorf("get %s [%d, %d): %w", c.obj.Key, pos, pos+length, err)
	}
	c.off, c.n, c.parts, c.shared = pos, length, [][]byte{buf}, false
	return nil
}

// bytes returns the n bytes of the object at pos: a slice of the window
// when they lie in one part, else a copy.
func (c *logCursor) bytes(ctx context.Context, pos, n int64) ([]byte, error) {
	if err := c.fill(ctx, pos, n); err != nil {
		return nil, err
	}
	skip := pos - c.off
	var out []byte
	for _, p := range c.parts {
		if n == 0 {
			break
		}
		if skip >= int64(len(p)) {
			skip -= int64(len(p))
			continue
		}
		p = p[skip:]
		skip = 0
		take := min(int64(len(p)), n)
		if out == nil && take == n {
			return p[:n], nil // within one part
		}
		if out == nil {
			out = make([]byte, 0, n)
		}
		out = append(out, p[:take]...)
		n -= take
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// batchesAt returns whole, CRC-checked batches of the window from pos,
// before end and within budget bytes, whose offsets chain accepts (and
// advances over), with their length, the offset after them, and the last
// of them with the last offset before it (for Chain.Settle): those in pos's
// part as a slice of it, or, when the batch at pos spans two parts, a copy
// of that batch. n is 0 when no batch at pos qualifies (bad, incomplete, or
// over budget).
func (c *logCursor) batchesAt(ctx context.Context, pos, end int64, budget int, chain *record.Chain) (b []byte, n, next int64, last record.Batch, lastPrev int64) {
	if pos < c.off || end > c.off+c.n {
		return nil, 0, 0, nil, 0
	}
	skip := pos - c.off
	var p []byte
	for _, q := range c.parts {
		if skip < int64(len(q)) {
			p = q[skip:]
			break
		}
		skip -= int64(len(q))
	}
	p = p[:min(int64(len(p)), end-pos)]
	it := record.NewIter(p)
	it.Verify, it.Chain = true, chain
	for {
		saved := *chain
		bt, ok := it.Next()
		if !ok {
			break
		}
		if int(n)+len(bt) > budget {
			*chain = saved // not served: the next read checks it
			break
		}
		n += int64(len(bt))
		next, last, lastPrev = bt.NextOffset(), bt, saved.Prev()
	}
	if n > 0 || !it.Truncated() || int64(len(p)) == end-pos {
		return p[:n:n], n, next, last, lastPrev
	}
	// The batch at pos continues in the next part: copy it whole.
	lb, err := c.bytes(ctx, pos, min(record.LogOverhead, end-pos))
	if err != nil || len(lb) < record.LogOverhead {
		return nil, 0, 0, nil, 0
	}
	size := int64(record.Batch(lb).Length()) + record.LogOverhead
	if size <= record.LogOverhead || size > end-pos || size > int64(budget) {
		return nil, 0, 0, nil, 0
	}
	whole, err := c.bytes(ctx, pos, size)
	if err != nil {
		return nil, 0, 0, nil, 0
	}
	prev := chain.Prev()
	it = record.NewIter(whole)
	it.Verify, it.Chain = true, chain
	if bt, ok := it.Next(); ok && len(bt) == len(whole) {
		return whole, size, bt.NextOffset(), bt, prev
	}
	return nil, 0, 0, nil, 0
}

// eofReader records whether its reader reported a clean io.EOF.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// header returns a view of the header of the batch at pos (the whole
// header for v2, the framing for legacy messages) and the batch's size,
// checking the framing against the object's size.
func (c *logCursor) header(ctx context.Context, pos int64) (record.Batch, int64, error) {
	const magicEnd = 17 // offset, length, then epoch or CRC, then magic
	avail := c.obj.Size - pos
	corrupt := func(b record.Batch, reason string) error {
		off := int64(-1)
		if len(b) >= 8 {
			off = b.BaseOffset()
		}
		return &record.CorruptError{File: c.obj.Key, Pos: pos, Offset: off, Reason: reason}
	}
	if avail < magicEnd {
		return nil, 0, corrupt(nil, fmt.Sprintf("%d trailing bytes, too few for a batch header", avail))
	}
	buf, err := c.bytes(ctx, pos, min(avail, record.HeaderSize))
	if err != nil {
		return nil, 0, err
	}
	b := record.Batch(buf)
	magic := b.Magic()
	var minLength int32
	switch magic {
	case 0:
		minLength = 14 // crc, magic, attributes, key and value lengths
	case 1:
		minLength = 22 // and a timestamp
	case record.CurrentMagic:
		if len(buf) < record.HeaderSize {
			return nil, 0, corrupt(b, fmt.Sprintf("%d trailing bytes, too few for a v2 batch header", avail))
		}
		minLength = record.HeaderSize - record.LogOverhead
	default:
		return nil, 0, corrupt(b, fmt.Sprintf("unknown magic %d", magic))
	}
	if b.Length() < minLength {
		return nil, 0, corrupt(b, fmt.Sprintf("batch length %d below the minimum %d for magic %d", b.Length(), minLength, magic))
	}
	size := int64(b.Length()) + record.LogOverhead
	if size > avail {
		return nil, 0, corrupt(b, fmt.Sprintf("batch of %d bytes runs past the end of the %d-byte object", size, c.obj.Size))
	}
	if magic == record.CurrentMagic && b.LastOffsetDelta() < 0 {
		return nil, 0, corrupt(b, fmt.Sprintf("negative last offset delta %d", b.LastOffsetDelta()))
	}
	return b, size, nil
}

// IndexCache is a byte-bounded LRU of parsed index objects by key. The
// RemoteLogs of a process may share one (ReaderOptions.IndexCache), so that
// the indexes of all open partitions have one bound: keys name objects,
// which are unique to their partition and never change.
type IndexCache struct {
	max int64

	mu    sync.Mutex
	bytes int64
	order *list.List // of *indexEntry, most recent first
	items map[string]*list.Element
}

type indexEntry struct {
	key  string
	v    any
	size int64
}

func NewIndexCache(maxBytes int64) *IndexCache {
	return &IndexCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

// Bytes is the size the cached indexes are accounted at.
func (c *IndexCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (c *IndexCache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*indexEntry).v, true
}

func (c *IndexCache) put(key string, v any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok || size > c.max {
		return
	}
	c.items[key] = c.order.PushFront(&indexEntry{key: key, v: v, size: size})
	c.bytes += size
	for c.bytes > c.max {
		e := c.order.Remove(c.order.Back()).(*indexEntry)
		delete(c.items, e.key)
		c.bytes -= e.size
	}
}
