package remotetier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Reader defaults.
const (
	// DefaultSubManifestCache is the number of decoded sealed sub-manifests a
	// RemoteLog keeps (each about 200 KB of JSON with the default policy).
	DefaultSubManifestCache = 8
	// DefaultIndexCacheBytes bounds the parsed index objects a RemoteLog
	// keeps. A 1 GiB segment's .index is about 2 MiB at Kafka's default
	// index.interval.bytes.
	DefaultIndexCacheBytes = 32 << 20
	// DefaultMaxIndexBytes is the largest index object a RemoteLog loads.
	// Kafka's segment.index.bytes defaults to 10 MiB and indexes are trimmed
	// on roll, so a larger object is not one tiered uploaded.
	DefaultMaxIndexBytes = 64 << 20
	// DefaultScanWindow is how far past the index position the first range
	// GET reaches, beyond the bytes asked for: the batch holding an offset
	// starts within index.interval.bytes (4 KiB) of its index entry plus one
	// batch, so one GET usually serves a read.
	DefaultScanWindow = 64 << 10
)

// UnknownTopicOrPartitionError reports a partition with no root manifest in
// the bucket: nothing of it was ever committed, or the prefix is wrong.
// (Kafka's UNKNOWN_TOPIC_OR_PARTITION.)
type UnknownTopicOrPartitionError struct {
	Topic     string
	Partition int32
	Key       string // the manifest key that does not exist
}

func (e *UnknownTopicOrPartitionError) Error() string {
	return fmt.Sprintf("unknown topic or partition %s-%d: no manifest at %s", e.Topic, e.Partition, e.Key)
}

// CorruptObjectError reports an object a manifest references whose content
// does not match the manifest: wrong size or checksum, an index that cannot
// be right, or a log that does not hold the offsets the manifest says it
// does. Corrupt record batches are reported as *record.CorruptError with
// File set to the object key and Pos to the byte position in the object.
type CorruptObjectError struct {
	Key    string
	Reason string
	Err    error // underlying cause, if any
}

func (e *CorruptObjectError) Error() string {
	msg := fmt.Sprintf("corrupt object %s: %s", e.Key, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CorruptObjectError) Unwrap() error { return e.Err }

// ReaderOptions tune a RemoteLog. Zero fields take the defaults above.
type ReaderOptions struct {
	SubManifestCache int
	IndexCacheBytes  int64
	MaxIndexBytes    int64
	ScanWindow       int
}

func (o ReaderOptions) withDefaults() ReaderOptions {
	if o.SubManifestCache <= 0 {
		o.SubManifestCache = DefaultSubManifestCache
	}
	if o.IndexCacheBytes <= 0 {
		o.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if o.MaxIndexBytes <= 0 {
		o.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if o.ScanWindow <= 0 {
		o.ScanWindow = DefaultScanWindow
	}
	return o
}

// ReadResult is what RemoteLog.Read returns.
type ReadResult struct {
	// Data holds whole record batches, CRC-checked, from the one holding
	// the requested offset (or, in a gap left by compaction, the next batch
	// present), all from one segment. Empty at the log end.
	Data []byte
	// LogStartOffset and LogEndOffset are those of the manifest the read
	// went through.
	LogStartOffset int64
	LogEndOffset   int64
}

// RemoteLog reads one partition of the remote tier through its manifest,
// never listing the bucket: the root manifest names every segment, the
// segment's index objects give a byte position, and a range GET of the
// .log object from there serves the read. Memory stays bounded by the bytes
// asked for plus one batch and a scan window; whole segments are never
// fetched. A RemoteLog is safe for concurrent use.
type RemoteLog struct {
	bucket    objstore.BucketReader
	topic     string
	partition int32
	key       string
	opts      ReaderOptions
	subs      *manifest.SubCache
	idx       *indexCache

	mu sync.Mutex
	m  *manifest.Manifest
}

// OpenRemoteLog loads the root manifest of topic-partition under prefix
// (relative to b; "" when b is already scoped to the bucket URL's prefix).
// A partition without a manifest is an *UnknownTopicOrPartitionError;
// a corrupt one a *manifest.CorruptManifestError.
func OpenRemoteLog(ctx context.Context, b objstore.BucketReader, prefix, topic string, partition int32, opts ReaderOptions) (*RemoteLog, error) {
	key, err := manifest.ManifestKey(prefix, topic, partition)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &RemoteLog{
		bucket:    b,
		topic:     topic,
		partition: partition,
		key:       key,
		opts:      opts,
		subs:      manifest.NewSubCache(BucketResolver(b), opts.SubManifestCache),
		idx:       newIndexCache(opts.IndexCacheBytes),
	}
	m, err := l.loadRoot(ctx)
	if err != nil {
		return nil, err
	}
	l.m = m
	return l, nil
}

// BucketResolver loads sealed sub-manifests from b for the manifest package's
// lookups, reading no more than the recorded size plus one byte.
func BucketResolver(b objstore.BucketReader) manifest.Resolver {
	return manifest.ResolverFunc(func(ctx context.Context, key string, size int64) ([]byte, error) {
		rc, err := b.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		limit := min(max(size, 0), manifest.MaxEncodedBytes) + 1
		data, err := io.ReadAll(io.LimitReader(rc, limit))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		return data, nil
	})
}

// LoadRoot reads and decodes the root manifest at key from b. A missing
// object is objstore.ErrNotFound.
func LoadRoot(ctx context.Context, b objstore.BucketReader, key string) (*manifest.Manifest, error) {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := manifest.ReadLimited(key, rc)
	if err != nil {
		return nil, err
	}
	return manifest.DecodeRoot(key, data)
}

func (l *RemoteLog) loadRoot(ctx context.Context) (*manifest.Manifest, error) {
	m, err := LoadRoot(ctx, l.bucket, l.key)
	if objstore.IsNotFound(err) {
		return nil, &UnknownTopicOrPartitionError{Topic: l.topic, Partition: l.partition, Key: l.key}
	}
	if err != nil {
		return nil, fmt.Errorf("load manifest of %s-%d: %w", l.topic, l.partition, err)
	}
	return m, nil
}

// Refresh re-reads the root manifest and reports whether it changed (its
// generation differs). Readers call it at the log end to see new segments,
// and after an object turned out to be gone (retention or compaction
// replaced it after this manifest was read).
func (l *RemoteLog) Refresh(ctx context.Context) (changed bool, err error) {
	m, err := l.loadRoot(ctx)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed = m.Generation != l.m.Generation
	l.m = m
	return changed, nil
}

// Manifest returns the root manifest the log currently reads through.
// It must not be modified.
func (l *RemoteLog) Manifest() *manifest.Manifest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m
}

// Resolver returns the (caching) resolver the log loads sub-manifests with.
func (l *RemoteLog) Resolver() manifest.Resolver { return l.subs }

// Topic is the log's topic.
func (l *RemoteLog) Topic() string { return l.topic }

// Partition is the log's partition number.
func (l *RemoteLog) Partition() int32 { return l.partition }

// LogStartOffset is the first offset the remote tier serves.
func (l *RemoteLog) LogStartOffset() int64 { return l.Manifest().LogStartOffset }

// LogEndOffset is the offset after the last committed segment.
func (l *RemoteLog) LogEndOffset() int64 { return l.Manifest().NextOffset() }

// retryGone runs op once and, if an object it read is gone, refreshes the
// manifest and runs it again: a manifest read earlier may reference objects
// a later commit (retention, compaction) has since deleted.
func (l *RemoteLog) retryGone(ctx context.Context, op func(m *manifest.Manifest) error) error {
	err := op(l.Manifest())
	if err == nil || !objstore.IsNotFound(err) {
		return err
	}
	changed, rerr := l.Refresh(ctx)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if !changed {
		return err
	}
	return op(l.Manifest())
}

// Read returns whole record batches from the one holding offset (at least
// that whole batch, then more while the total stays within maxBytes), like
// a broker's fetch, from a single segment. An offset in a gap left by
// compaction is served from the next batch present. At the log end the
// result is empty; outside [LogStartOffset, LogEndOffset] the error matches
// manifest.ErrOffsetOutOfRange. Every returned batch's CRC is checked.
func (l *RemoteLog) Read(ctx context.Context, offset int64, maxBytes int) (ReadResult, error) {
	var res ReadResult
	err := l.retryGone(ctx, func(m *manifest.Manifest) error {
		res = ReadResult{LogStartOffset: m.LogStartOffset, LogEndOffset: m.NextOffset()}
		if offset == res.LogEndOffset && offset >= res.LogStartOffset {
			return nil
		}
		seg, err := m.FindOffset(ctx, l.subs, offset)
		if err != nil {
			return err
		}
		data, err := l.readSegment(ctx, seg, offset, maxBytes)
		res.Data = data
		return err
	})
	if err != nil {
		return ReadResult{}, fmt.Errorf("read %s-%d at offset %d: %w", l.topic, l.partition, offset, err)
	}
	return res, nil
}

// readSegment returns whole batches of seg from the first one whose last
// offset is at least target.
func (l *RemoteLog) readSegment(ctx context.Context, seg manifest.Segment, target int64, maxBytes int) ([]byte, error) {
	maxBytes = max(maxBytes, 1)
	pos, err := l.indexPosition(ctx, seg, target)
	if err != nil {
		return nil, err
	}
	cur := newLogCursor(l.bucket, seg.Log, int64(maxBytes)+int64(l.opts.ScanWindow))
	for {
		if pos >= seg.Log.Size {
			return nil, &CorruptObjectError{Key: seg.Log.Key, Reason: fmt.Sprintf(
				"no batch holds offset %d or a later one, but the manifest says the segment ends at offset %d", target, seg.LastOffset)}
		}
		hdr, size, err := cur.header(ctx, pos)
		if err != nil {
			return nil, err
		}
		if hdr.LastOffset() >= target {
			if hdr.BaseOffset() > seg.LastOffset {
				return nil, &CorruptObjectError{Key: seg.Log.Key, Reason: fmt.Sprintf(
					"batch at position %d starts at offset %d, past the segment's last offset %d", pos, hdr.BaseOffset(), seg.LastOffset)}
			}
			want := min(max(size, int64(maxBytes)), seg.Log.Size-pos)
			buf, err := cur.bytes(ctx, pos, want)
			if err != nil {
				return nil, err
			}
			return wholeBatches(buf, maxBytes, seg.Log.Key, pos)
		}
		pos += size
	}
}

// wholeBatches returns the prefix of buf (read from position pos of the
// object key) made of whole batches with valid CRCs: the first batch always,
// then more while the total is within maxBytes. A bad first batch is an
// error; a bad later one ends the result before it (the next read, which
// starts there, reports it).
func wholeBatches(buf []byte, maxBytes int, key string, pos int64) ([]byte, error) {
	it := record.NewIter(buf)
	it.Verify = true
	n := 0
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		if n > 0 && n+len(b) > maxBytes {
			break
		}
		n += len(b)
	}
	if n == 0 {
		if err := it.Err(); err != nil {
			return nil, record.WithFile(err, key, pos)
		}
		return nil, &CorruptObjectError{Key: key, Reason: fmt.Sprintf("incomplete batch at position %d", pos)}
	}
	return buf[:n:n], nil
}

// OffsetForTimestamp returns the first offset at or above the log start
// whose record timestamp is at least ts, with that timestamp (the rule of
// Kafka's ListOffsets). found is false when every record is older.
func (l *RemoteLog) OffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, found bool, err error) {
	err = l.retryGone(ctx, func(m *manifest.Manifest) error {
		offset, timestamp, found = 0, 0, false
		seg, err := m.FindTimestamp(ctx, l.subs, ts)
		if errors.Is(err, manifest.ErrTimestampNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for {
			offset, timestamp, found, err = l.segmentOffsetForTimestamp(ctx, seg, ts, m.LogStartOffset)
			if err != nil || found {
				return err
			}
			// Every record of seg at or above the log start is older: the
			// next segment with a late enough timestamp holds the answer.
			for {
				next := seg.NextOffset()
				if next >= m.NextOffset() {
					return nil
				}
				if seg, err = m.FindOffset(ctx, l.subs, next); err != nil {
					return err
				}
				if seg.MaxTimestamp >= ts {
					break
				}
			}
		}
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("find offset for timestamp %d in %s-%d: %w", ts, l.topic, l.partition, err)
	}
	return offset, timestamp, found, nil
}

func (l *RemoteLog) segmentOffsetForTimestamp(ctx context.Context, seg manifest.Segment, ts, logStart int64) (offset, timestamp int64, found bool, err error) {
	ti, err := l.timeIndex(ctx, seg)
	if err != nil {
		return 0, 0, false, err
	}
	from := max(ti.Lookup(ts).Offset, logStart)
	pos, err := l.indexPosition(ctx, seg, from)
	if err != nil {
		return 0, 0, false, err
	}
	cur := newLogCursor(l.bucket, seg.Log, int64(l.opts.ScanWindow))
	var dec record.Decoder
	for pos < seg.Log.Size {
		hdr, size, err := cur.header(ctx, pos)
		if err != nil {
			return 0, 0, false, err
		}
		if hdr.MaxTimestamp() >= ts && hdr.LastOffset() >= from {
			buf, err := cur.bytes(ctx, pos, size)
			if err != nil {
				return 0, 0, false, err
			}
			b := record.Batch(buf)
			if err := b.VerifyCRC(); err != nil {
				return 0, 0, false, record.WithFile(err, seg.Log.Key, pos)
			}
			recs, err := dec.Records(b)
			if err != nil {
				return 0, 0, false, record.WithFile(err, seg.Log.Key, pos)
			}
			for _, r := range recs {
				if r.Timestamp >= ts && r.Offset >= from {
					return r.Offset, r.Timestamp, true, nil
				}
			}
		}
		pos += size
	}
	return 0, 0, false, nil
}

// AbortedTxns lists the aborted transactions overlapping [from, upTo) for a
// READ_COMMITTED fetch, from the .txnindex objects of the segment holding
// from and the segments after it, until one entry's last stable offset
// reaches upTo or the log ends (as Kafka collects them).
func (l *RemoteLog) AbortedTxns(ctx context.Context, from, upTo int64) ([]index.AbortedTxn, error) {
	var out []index.AbortedTxn
	err := l.retryGone(ctx, func(m *manifest.Manifest) error {
		out = nil
		// An aborted transaction is recorded in the segment of its abort
		// marker, which may come after upTo: go on until an entry's last
		// stable offset shows nothing later can overlap, or the log ends.
		// Segments without a .txnindex cost no request.
		for at := max(from, m.LogStartOffset); at < m.NextOffset(); {
			seg, err := m.FindOffset(ctx, l.subs, at)
			if err != nil {
				return err
			}
			if seg.TxnIndex != nil {
				txns, err := l.txnIndex(ctx, seg)
				if err != nil {
					return err
				}
				got, complete := txns.CollectAbortedTxns(from, upTo)
				out = append(out, got...)
				if complete {
					return nil
				}
			}
			at = seg.NextOffset()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("aborted transactions of %s-%d in [%d, %d): %w", l.topic, l.partition, from, upTo, err)
	}
	return out, nil
}

// indexPosition is the byte position in seg's log of the index entry at or
// below target.
func (l *RemoteLog) indexPosition(ctx context.Context, seg manifest.Segment, target int64) (int64, error) {
	oi, err := l.offsetIndex(ctx, seg)
	if err != nil {
		return 0, err
	}
	pos := int64(oi.Lookup(target).Position)
	if pos >= seg.Log.Size {
		return 0, &CorruptObjectError{Key: seg.Index.Key, Reason: fmt.Sprintf(
			"entry for offset %d points at position %d, past the end of the %d-byte log", target, pos, seg.Log.Size)}
	}
	return pos, nil
}

func (l *RemoteLog) offsetIndex(ctx context.Context, seg manifest.Segment) (*index.OffsetIndex, error) {
	v, err := l.loadIndex(ctx, seg.Index, func(data []byte) (any, error) {
		x := index.ParseOffsetIndex(seg.Index.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.OffsetIndex), nil
}

func (l *RemoteLog) timeIndex(ctx context.Context, seg manifest.Segment) (*index.TimeIndex, error) {
	v, err := l.loadIndex(ctx, seg.TimeIndex, func(data []byte) (any, error) {
		x := index.ParseTimeIndex(seg.TimeIndex.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.TimeIndex), nil
}

func (l *RemoteLog) txnIndex(ctx context.Context, seg manifest.Segment) (*index.TxnIndex, error) {
	v, err := l.loadIndex(ctx, *seg.TxnIndex, func(data []byte) (any, error) {
		x := index.ParseTxnIndex(seg.TxnIndex.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.TxnIndex), nil
}

// loadIndex returns the parsed index object obj, from the cache or fetched
// whole and checked against the manifest's size and checksum. Keys name one
// upload attempt's content, which never changes, so entries never go stale.
func (l *RemoteLog) loadIndex(ctx context.Context, obj manifest.Object, parse func([]byte) (any, error)) (any, error) {
	if v, ok := l.idx.get(obj.Key); ok {
		return v, nil
	}
	if obj.Size > l.opts.MaxIndexBytes {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: fmt.Sprintf(
			"index of %d bytes exceeds the %d-byte limit", obj.Size, l.opts.MaxIndexBytes)}
	}
	var data []byte
	if obj.Size > 0 {
		var err error
		if data, err = readObject(ctx, l.bucket, obj); err != nil {
			return nil, err
		}
	}
	v, err := parse(data)
	if err != nil {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: "bad index", Err: err}
	}
	l.idx.put(obj.Key, v, int64(len(data))+64)
	return v, nil
}

// readObject fetches a small object whole and checks its size and checksum
// against the manifest.
func readObject(ctx context.Context, b objstore.BucketReader, obj manifest.Object) ([]byte, error) {
	rc, err := b.Get(ctx, obj.Key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", obj.Key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, obj.Size+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", obj.Key, err)
	}
	if int64(len(data)) != obj.Size {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: fmt.Sprintf("size %d, the manifest recorded %d", len(data), obj.Size)}
	}
	sum, err := manifest.ChecksumOf(obj.Checksum.Algorithm(), data)
	if err != nil {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: "checksum", Err: err}
	}
	if sum != obj.Checksum {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: fmt.Sprintf("checksum %s, the manifest recorded %s", sum, obj.Checksum)}
	}
	return data, nil
}

// logCursor reads a segment's .log object by range GETs, keeping one window
// of it in memory.
type logCursor struct {
	b      objstore.BucketReader
	obj    manifest.Object
	window int64
	off    int64  // object position of buf[0]
	buf    []byte // bytes [off, off+len(buf)) of the object
}

func newLogCursor(b objstore.BucketReader, obj manifest.Object, window int64) *logCursor {
	return &logCursor{b: b, obj: obj, window: max(window, record.HeaderSize)}
}

// bytes returns the n bytes of the object at pos, fetching them (and up to
// a window beyond) when they are not in the window held.
func (c *logCursor) bytes(ctx context.Context, pos, n int64) ([]byte, error) {
	if pos >= c.off && pos+n <= c.off+int64(len(c.buf)) {
		return c.buf[pos-c.off : pos-c.off+n], nil
	}
	if pos < 0 || n < 0 || pos+n > c.obj.Size {
		return nil, fmt.Errorf("read %s: range [%d, %d) outside the %d-byte object", c.obj.Key, pos, pos+n, c.obj.Size)
	}
	length := min(max(n, c.window), c.obj.Size-pos)
	rc, err := c.b.GetRange(ctx, c.obj.Key, pos, length)
	if err != nil {
		return nil, fmt.Errorf("get %s [%d, %d): %w", c.obj.Key, pos, pos+length, err)
	}
	defer rc.Close()
	buf := make([]byte, length)
	er := &eofReader{r: rc}
	if got, err := io.ReadFull(er, buf); err != nil {
		// Only a clean end of the body means the object is shorter than
		// the manifest says; a body cut off in transit (the HTTP client's
		// io.ErrUnexpectedEOF, a reset) is an I/O error, not corruption.
		if er.eof {
			return nil, &CorruptObjectError{Key: c.obj.Key, Reason: fmt.Sprintf(
				"object ends at %d bytes, the manifest recorded %d", pos+int64(got), c.obj.Size)}
		}
		return nil, fmt.Errorf("get %s [%d, %d): %w", c.obj.Key, pos, pos+length, err)
	}
	c.off, c.buf = pos, buf
	return buf[:n], nil
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

// indexCache is a byte-bounded LRU of parsed index objects by key.
type indexCache struct {
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

func newIndexCache(maxBytes int64) *indexCache {
	return &indexCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *indexCache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*indexEntry).v, true
}

func (c *indexCache) put(key string, v any, size int64) {
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
