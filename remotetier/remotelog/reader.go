// Package remotelog owns the manifest-driven reader of the remote tier:
// RemoteLog reads one partition by offset or timestamp through its root
// manifest (and sealed sub-manifests), the segment's index objects and range
// GETs of its .log, never listing the bucket, with bounded memory and
// caches of sub-manifests and parsed indexes. Sequential readers (streams,
// reader_stream.go) read no index: a segment is entered at its first byte
// and continued where the last read ended, and the bucket is asked to read
// ahead of each of them across segment boundaries. It uses the object
// store's optional capabilities (shared ranges, size hints, read-ahead)
// when the bucket has them. The fetch service reads through it; it knows nothing of
// the uploader.
package remotelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/flight"

	"golang.org/x/sync/singleflight"

	"github.com/tiered/tiered/internal/x/kafkaerr"
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
	// DefaultMaxIndexBytes is the largest index a RemoteLog loads (a whole
	// index object, or one section of an indexes object). Kafka's
	// segment.index.bytes defaults to 10 MiB and indexes are trimmed on
	// roll, so a larger index is not one tiered uploaded.
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
	Deleted   bool   // the topic object marks the topic deleted
	// OtherLineage: the log is pinned to Lineage (OpenRemoteLogLineage)
	// and the topic object serves another lineage, Serving.
	OtherLineage     bool
	Lineage, Serving string
}

func (e *UnknownTopicOrPartitionError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("unknown topic or partition %s-%d: the topic is deleted", e.Topic, e.Partition)
	}
	if e.OtherLineage {
		return fmt.Sprintf("unknown topic or partition %s-%d: the bucket serves the topic's lineage %s, not %s", e.Topic, e.Partition, lineageName(e.Serving), lineageName(e.Lineage))
	}
	return fmt.Sprintf("unknown topic or partition %s-%d: no manifest at %s", e.Topic, e.Partition, e.Key)
}

// lineageName names a lineage by its topic ID in messages.
func lineageName(topicID string) string {
	if topicID == "" {
		return "without a topic ID"
	}
	return "of topic ID " + topicID
}

// Is makes errors.Is(err, kafkaerr.ErrUnknownTopicOrPartition) true.
func (e *UnknownTopicOrPartitionError) Is(target error) bool {
	return target == kafkaerr.ErrUnknownTopicOrPartition
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

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptObjectError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

func (e *CorruptObjectError) Unwrap() error { return e.Err }

// ReaderOptions tune a RemoteLog. Zero fields take the defaults above.
type ReaderOptions struct {
	SubManifestCache int
	IndexCacheBytes  int64
	// IndexCache, when set, is the index cache the log shares with
	// others (IndexCacheBytes is then unused): one bound for the indexes
	// of every open partition.
	IndexCache *IndexCache
	// Topics, when set, shares the topic object reads of opens with the
	// other logs over the bucket (TopicCache).
	Topics        *TopicCache
	MaxIndexBytes int64
	ScanWindow    int
	// Streams bounds the sequential readers remembered (reader_stream.go).
	Streams int
	// ReadAheadBytes is the deepest read-ahead of one stream over a
	// ReadAheader bucket; negative disables it.
	ReadAheadBytes int64
	// ReadAheadLead bounds a stream's read-ahead to what its reader
	// consumes in this time at its measured rate.
	ReadAheadLead time.Duration
	// Now is the clock streams measure rates by (time.Now when nil).
	Now func() time.Time
	// WholeTailBytes is the longest final segment CheckEnd reads whole
	// through the bucket's chunks, in a partition of at most twice it: 0
	// is the bucket's chunk size when it reports one (ChunkSizer, as the
	// fetch service's chunk cache does), else DefaultWholeTailBytes.
	WholeTailBytes int64
}

// ChunkSizer is implemented by a caching bucket that reads in aligned
// chunks of ChunkBytes.
type ChunkSizer interface {
	ChunkBytes() int64
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
	if o.Streams <= 0 {
		o.Streams = DefaultStreams
	}
	if o.ReadAheadBytes == 0 {
		o.ReadAheadBytes = DefaultReadAheadBytes
	}
	if o.ReadAheadLead <= 0 {
		o.ReadAheadLead = DefaultReadAheadLead
	}
	if o.Now == nil {
		o.Now = time.Now
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

// ReadView is what RemoteLog.ReadView returns: the bytes Read would
// return, as parts that may be a cache's memory.
type ReadView struct {
	// Parts hold whole record batches, CRC-checked, as Read's Data, in
	// order; a batch may span two parts. When the bucket's range readers
	// are SharedRangeReaders the parts are its shared memory: callers must
	// never modify them. Empty at the log end.
	Parts [][]byte
	// Len is the total length of Parts.
	Len int
	// NextOffset is the offset after the last batch; the requested offset
	// when Parts is empty.
	NextOffset int64
	// LogStartOffset and LogEndOffset are those of the manifest the read
	// went through.
	LogStartOffset int64
	LogEndOffset   int64
	// shared is set when Parts are a cache's memory; end is the log
	// position after the last batch, in the .log object logKey (the
	// batches lie in the bytes of that object just before it).
	shared bool
	end    int64
	logKey string
}

// hintSize passes an object's recorded size (a .log, or an indexes object)
// to a SizeHinter bucket.
func hintSize(b objstore.BucketReader, obj manifest.Object) {
	if h, ok := b.(objstore.SizeHinter); ok {
		h.HintSize(obj.Key, obj.Size)
	}
}

// RemoteLog reads one partition of the remote tier through its manifest,
// never listing the bucket: the root manifest names every segment, the
// segment's index objects give a byte position, and a range GET of the
// .log object from there serves the read. Memory stays bounded by the bytes
// asked for plus one batch and a scan window; whole segments are never
// fetched. A RemoteLog is safe for concurrent use.
type RemoteLog struct {
	bucket    objstore.BucketReader
	prefix    string
	topic     string
	partition int32
	opts      ReaderOptions
	subs      *manifest.SubCache
	idx       *IndexCache
	streams   *streamTable

	mu sync.Mutex
	m  *manifest.Manifest
	// topicID is the served lineage's topic ID ("" for a topic without a
	// topic object): with m, from the last load.
	topicID string
	// endOK is the final segment CheckEnd found ending where the manifest
	// says (its .log key and last offset).
	endOK endCheck
	endSF singleflight.Group // concurrent CheckEnds
	// txnFree: no segment of m from offset from on has a .txnindex
	// (learnt by AbortedTxns walking there).
	txnFree txnFree

	// pinned: the log reads only lineage pin (OpenRemoteLogLineage).
	pinned bool
	pin    string
}

// txnFree is a stretch at the end of a manifest's log without
// transaction indexes.
type txnFree struct {
	m    *manifest.Manifest
	from int64
}

// endCheck names a final segment whose end CheckEnd verified.
type endCheck struct {
	key  string
	last int64
}

// OpenRemoteLog loads the root manifest of topic-partition under prefix
// (relative to b; "" when b is already scoped to the bucket URL's prefix).
// A partition without a manifest is an *UnknownTopicOrPartitionError;
// a corrupt one a *manifest.CorruptManifestError. The lineage read is the
// one the topic's topic object names (ResolveTopic): a deleted topic is
// unknown, a re-created one is read from its new lineage only.
func OpenRemoteLog(ctx context.Context, b objstore.BucketReader, prefix, topic string, partition int32, opts ReaderOptions) (*RemoteLog, error) {
	return openRemoteLog(ctx, b, prefix, topic, partition, opts, false, "")
}

// OpenRemoteLogLineage is OpenRemoteLog pinned to one lineage of the topic:
// the one of topicID ("" for a topic without topic IDs, whose bucket has
// no topic object). It is read only while the topic object serves it:
// when it serves another (the topic was created again by another data dir
// over the same bucket), the open, and every Refresh after it, is an
// *UnknownTopicOrPartitionError with OtherLineage set, and the log keeps
// the pinned lineage's manifest it had. A reader of one incarnation's
// records (serve, whose local topic has its ID) never reads another's at
// the same offsets, however the topic object changes between its calls.
func OpenRemoteLogLineage(ctx context.Context, b objstore.BucketReader, prefix, topic string, partition int32, topicID string, opts ReaderOptions) (*RemoteLog, error) {
	return openRemoteLog(ctx, b, prefix, topic, partition, opts, true, topicID)
}

func openRemoteLog(ctx context.Context, b objstore.BucketReader, prefix, topic string, partition int32, opts ReaderOptions, pinned bool, pin string) (*RemoteLog, error) {
	if _, err := manifest.ManifestKey(prefix, topic, partition); err != nil {
		return nil, err
	}
	prefix, _ = manifest.NormalizePrefix(prefix)
	opts = opts.withDefaults()
	if opts.IndexCache == nil {
		opts.IndexCache = NewIndexCache(opts.IndexCacheBytes)
	}
	if opts.WholeTailBytes <= 0 {
		opts.WholeTailBytes = DefaultWholeTailBytes
		if cs, ok := b.(ChunkSizer); ok && cs.ChunkBytes() > 0 {
			opts.WholeTailBytes = cs.ChunkBytes()
		}
	}
	l := &RemoteLog{
		bucket:    b,
		prefix:    prefix,
		topic:     topic,
		partition: partition,
		opts:      opts,
		subs:      manifest.NewSubCache(BucketResolver(b), opts.SubManifestCache),
		idx:       opts.IndexCache,
		streams:   newStreamTable(opts.Streams),
		pinned:    pinned,
		pin:       pin,
	}
	m, topicID, err := l.loadRoot(ctx, true)
	if err != nil {
		return nil, err
	}
	l.m, l.topicID = m, topicID
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

// loadRoot resolves the topic's served lineage, then reads its root
// manifest; it returns the lineage's topic ID too.
func (l *RemoteLog) loadRoot(ctx context.Context, open bool) (*manifest.Manifest, string, error) {
	resolve := ResolveTopic
	if open && l.opts.Topics != nil {
		resolve = l.opts.Topics.Resolve
	}
	keyID, topicID, err := resolve(ctx, l.bucket, l.prefix, l.topic)
	if err == nil && l.pinned && topicID != l.pin && open && l.opts.Topics != nil {
		keyID, topicID, err = l.opts.Topics.Reread(ctx, l.bucket, l.prefix, l.topic)
	}
	if errors.Is(err, ErrTopicDeleted) {
		return nil, "", &UnknownTopicOrPartitionError{Topic: l.topic, Partition: l.partition, Deleted: true}
	}
	if err != nil {
		return nil, "", err
	}
	if l.pinned && topicID != l.pin {
		return nil, "", &UnknownTopicOrPartitionError{Topic: l.topic, Partition: l.partition, OtherLineage: true, Lineage: l.pin, Serving: topicID}
	}
	key, err := manifest.ManifestKeyID(l.prefix, l.topic, keyID, l.partition)
	if err != nil {
		return nil, "", err
	}
	m, err := LoadRoot(ctx, l.bucket, key)
	if objstore.IsNotFound(err) {
		return nil, "", &UnknownTopicOrPartitionError{Topic: l.topic, Partition: l.partition, Key: key}
	}
	if err != nil {
		return nil, "", fmt.Errorf("load manifest of %s-%d: %w", l.topic, l.partition, err)
	}
	return m, topicID, nil
}

// ErrTopicDeleted is a topic whose topic object marks it deleted.
var ErrTopicDeleted = errors.New("topic is deleted")

// ResolveTopic reads the topic's topic object (manifest.TopicKey) and
// returns the lineage readers serve: keyID for ManifestKeyID ("" =
// name-only) and the topic ID ("" when there is no object: a topic
// without IDs). A deleted topic is ErrTopicDeleted.
func ResolveTopic(ctx context.Context, b objstore.BucketReader, prefix, topic string) (keyID, topicID string, err error) {
	s, err := ReadTopic(ctx, b, prefix, topic)
	if err != nil || s == nil {
		return "", "", err
	}
	keyID, topicID, ok := s.Serving()
	if !ok {
		return "", "", fmt.Errorf("%s: %w", topic, ErrTopicDeleted)
	}
	return keyID, topicID, nil
}

// ReadTopic reads and decodes the topic's topic object (manifest.TopicKey);
// nil when there is none (a topic without IDs, or one never tiered here).
func ReadTopic(ctx context.Context, b objstore.BucketReader, prefix, topic string) (*manifest.TopicState, error) {
	s, _, err := readTopic(ctx, prefix, topic, func(key string) (io.ReadCloser, objstore.Attrs, error) {
		rc, err := b.Get(ctx, key)
		return rc, objstore.Attrs{}, err
	})
	return s, err
}

// ReadTopicVersion is ReadTopic with the ETag of the version read
// (objstore.GetWithAttrs), for a conditional write of the next one.
func ReadTopicVersion(ctx context.Context, b objstore.BucketReader, prefix, topic string) (*manifest.TopicState, string, error) {
	return readTopic(ctx, prefix, topic, func(key string) (io.ReadCloser, objstore.Attrs, error) {
		return objstore.GetWithAttrs(ctx, b, key)
	})
}

func readTopic(ctx context.Context, prefix, topic string, get func(key string) (io.ReadCloser, objstore.Attrs, error)) (*manifest.TopicState, string, error) {
	key, err := manifest.TopicKey(prefix, topic)
	if err != nil {
		return nil, "", err
	}
	rc, attrs, err := get(key)
	if objstore.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read topic object %s: %w", key, err)
	}
	defer rc.Close()
	data, err := manifest.ReadLimited(key, rc)
	if err != nil {
		return nil, "", err
	}
	s, err := manifest.DecodeTopic(key, data)
	if err != nil {
		return nil, "", err
	}
	return s, attrs.ETag, nil
}

// TopicID is the served lineage's topic ID (Kafka's string form; "" for a
// topic without IDs), as of the last manifest read.
func (l *RemoteLog) TopicID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.topicID
}

// Refresh re-reads the root manifest and reports whether it changed (its
// generation differs). Readers call it at the log end to see new segments,
// and after an object turned out to be gone (retention or compaction
// replaced it after this manifest was read).
func (l *RemoteLog) Refresh(ctx context.Context) (changed bool, err error) {
	m, topicID, err := l.loadRoot(ctx, false)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed = m.Generation != l.m.Generation || m.Key() != l.m.Key()
	l.m, l.topicID = m, topicID
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

// CheckEnd checks that the final segment's bytes end at the last offset
// the manifest claims for it, before that claim is reported as the log end
// offset (a Kafka high watermark), with one range GET where it can. A
// final segment of at most 64 KiB, or one that fits a chunk of a small
// partition (read through the cache, for the replay that reaches it), is
// walked whole; a longer one is confirmed by its last 64 KiB when they end
// with the claimed batch (tailConfirms). Otherwise the check walks the
// batch headers from the segment's last index entry to the end of its .log
// (the index, then about index.interval.bytes plus a batch). A walk checks
// offsets as a read does (record.Chain) and requires the last batch to end
// at the manifest's last offset (at or below it for a compacted segment,
// whose last records the cleaner may have removed). A segment is checked once,
// when it first becomes the final one. A mismatch is a
// *CorruptObjectError naming the object; a bad batch a *record.CorruptError.
// It returns the manifest it checked, whose offsets the caller reports.
func (l *RemoteLog) CheckEnd(ctx context.Context) (*manifest.Manifest, error) {
	if l.EndChecked() {
		return l.checkEnd(ctx)
	}
	// Concurrent callers (the consumers of one partition starting
	// together) share one check: one read of the tail.
	return flight.Do(ctx, &l.endSF, "end", sharedTimeout, l.checkEnd)
}

func (l *RemoteLog) checkEnd(ctx context.Context) (*manifest.Manifest, error) {
	// A caching bucket counts its GETs apart. The check is shared by its
	// callers (CheckEnd): it never fails for want of cached bytes, as a
	// cached-only or prefetch read would.
	ctx = objstore.WithEndCheck(objstore.WithoutCacheMarks(ctx))
	var checked *manifest.Manifest
	err := l.retryGone(ctx, func(m *manifest.Manifest) error {
		checked = m
		if m.NextOffset() <= m.LogStartOffset {
			return nil // nothing to read
		}
		seg, err := m.FindOffset(ctx, l.subs, m.NextOffset()-1)
		if err != nil {
			return err
		}
		done := endCheck{seg.Log.Key, seg.LastOffset}
		l.mu.Lock()
		ok := l.endOK == done
		l.mu.Unlock()
		if ok {
			return nil
		}
		// The tail is read for this check only: exactly its bytes, not
		// the chunk around them (a caching bucket's, 4 MiB by default,
		// for every partition a client lists the offsets of, which a
		// replay from the log start reaches last, if still cached).
		// Unless the final segment fits a chunk (WholeTailBytes) and the
		// whole partition is small (two chunks at most): that
		// replay then reads the chunk soon after, from the cache, so the
		// check reads all of it and walks it from its first batch, with
		// no index (one GET, the replay's own).
		wholeMax := l.opts.WholeTailBytes
		cached := seg.Log.Size <= wholeMax && m.LogBytes() <= 2*wholeMax
		tailCtx := ctx
		if !cached {
			tailCtx = objstore.WithExactRange(ctx)
		}
		walkWhole := cached || seg.Log.Size <= tailScanBytes
		confirmed := false
		if !walkWhole {
			if confirmed, err = l.tailConfirms(tailCtx, seg); err != nil {
				return err
			}
		}
		if !confirmed {
			if err := l.walkEnd(ctx, tailCtx, seg, walkWhole); err != nil {
				return err
			}
		}
		l.mu.Lock()
		l.endOK = done
		l.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return checked, nil
}

// walkEnd walks the batch headers of seg's .log to its end — from its
// first batch when whole, else from its last index entry — reading them
// with tailCtx, and requires the last to end at the manifest's last
// offset (CheckEnd).
func (l *RemoteLog) walkEnd(ctx, tailCtx context.Context, seg manifest.Segment, whole bool) error {
	var pos, entry int64
	if !whole {
		var err error
		if pos, entry, err = l.indexEntry(ctx, seg, seg.LastOffset); err != nil {
			return err
		}
	}
	chain := record.NewChain(seg.BaseOffset, seg.LastOffset)
	if pos > 0 {
		chain.StartAt(entry)
	}
	cur := newLogCursor(l.bucket, seg.Log, seg.Log.Size-pos)
	for pos < seg.Log.Size {
		hdr, size, err := cur.header(tailCtx, pos)
		if err != nil {
			return err
		}
		if err := chain.Check(hdr); err != nil {
			return record.WithFile(err, seg.Log.Key, pos)
		}
		pos += size
	}
	if last := chain.Prev(); last != seg.LastOffset && !(seg.Compacted && chain.Checked() > 0) {
		return &CorruptObjectError{Key: seg.Log.Key, Reason: fmt.Sprintf(
			"the last batch ends at offset %d, the manifest says the segment ends at offset %d", last, seg.LastOffset)}
	}
	return nil
}

// sharedTimeout bounds a read that concurrent callers share (CheckEnd,
// TopicCache.Resolve): it runs detached from their cancellation.
const sharedTimeout = 30 * time.Second

// DefaultWholeTailBytes is ReaderOptions.WholeTailBytes over a bucket
// that reports no chunk size: the fetch service's default chunk size.
const DefaultWholeTailBytes = 4 << 20

// tailScanBytes is how much of the final segment's end CheckEnd reads
// first (tailConfirms); a segment no longer is walked whole instead.
const tailScanBytes = 64 << 10

// maxTailCandidates bounds the positions of the tail tailConfirms checks
// the CRC from: by chance, only the real last batch frames to the end.
const maxTailCandidates = 4

// tailConfirms reads the last tailScanBytes of seg's .log (one range GET,
// no index) and reports whether they end with a v2 batch that confirms the
// manifest: a position in them where a batch header frames exactly to the
// object's end, whose CRC (covering its last offset delta) holds, whose
// header checks, and whose last offset is the one the manifest claims.
// Anything else — no such batch (one longer than the tail, legacy
// messages), another last offset, two candidates, more than
// maxTailCandidates that frame — decides nothing: the caller walks from
// the last index entry, which alone may condemn the segment. So bytes a
// producer chose (a record holding a batch of its own) can at worst cost
// that walk, never fail a true claim, and cost at most
// maxTailCandidates CRCs of the tail.
//
// What it does not prove, unlike the walk: that the batch it found starts
// at a batch boundary. A record's value may end with the image of a batch,
// and when the real last batch starts before the tail (longer than it, or
// a legacy message set) the image is the only candidate. So a manifest
// that is wrong about the last offset (or the size) passes when a producer
// wrote an image made to match that wrong claim at that place. Accidental
// faults — a torn or short object, a flipped bit, an uploader's claim one
// off — do not pass (the image would have to be made for them); and a
// manifest is written only with the bucket's write credentials, which can
// as well upload an object that matches any claim, so the walk proves no
// more against a hostile writer.
func (l *RemoteLog) tailConfirms(ctx context.Context, seg manifest.Segment) (bool, error) {
	n := min(tailScanBytes, seg.Log.Size)
	cur := newLogCursor(l.bucket, seg.Log, n)
	tail, err := cur.bytes(ctx, seg.Log.Size-n, n)
	if err != nil {
		return false, err
	}
	var found record.Batch
	framed := 0
	for p := 0; p+record.HeaderSize <= len(tail); p++ {
		b := record.Batch(tail[p:])
		if int64(b.Length())+record.LogOverhead != int64(len(b)) || b.Magic() != record.CurrentMagic || record.CheckHeader(b) != nil {
			continue
		}
		if framed++; framed > maxTailCandidates {
			return false, nil // made to cost CRCs: let the index decide
		}
		if b.VerifyCRC() != nil {
			continue
		}
		if found != nil {
			return false, nil // two: let the index decide
		}
		found = b
	}
	if found == nil {
		return false, nil
	}
	chain := record.NewChain(seg.BaseOffset, seg.LastOffset)
	return chain.Check(found) == nil && found.LastOffset() == seg.LastOffset, nil
}

// EndChecked reports whether CheckEnd has verified the end of the final
// segment of the manifest held now, so that it would answer without a
// GET.
func (l *RemoteLog) EndChecked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || l.m.NextOffset() <= l.m.LogStartOffset {
		return true
	}
	if l.endOK.key == "" || l.endOK.last != l.m.NextOffset()-1 {
		return false
	}
	// The final segment is inline unless every segment is sealed.
	if n := len(l.m.Segments); n > 0 && l.m.Segments[n-1].Log.Key != l.endOK.key {
		return false // rewritten with the same last offset
	}
	return true
}

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
// compaction is served from the next batch present; one in a gap the
// manifest records as lost (manifest.Gap) is a *manifest.LostOffsetsError,
// which matches manifest.ErrOffsetOutOfRange. At the log end the
// result is empty; outside [LogStartOffset, LogEndOffset] the error matches
// manifest.ErrOffsetOutOfRange. Every returned batch is checked first: its
// CRC and header, and its offsets (record.Chain) within the segment's
// manifest range, after the batch before it, with the batch after it
// following it (record.Chain.Settle); a read whose first batch fails is a
// *record.CorruptError naming the object and position, one reaching a bad
// batch later ends before it.
// Data is the caller's own: bytes read from a shared cache are copied once.
func (l *RemoteLog) Read(ctx context.Context, offset int64, maxBytes int) (ReadResult, error) {
	v, err := l.ReadView(ctx, offset, maxBytes)
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{LogStartOffset: v.LogStartOffset, LogEndOffset: v.LogEndOffset}
	switch {
	case len(v.Parts) == 1 && !v.shared:
		res.Data = v.Parts[0]
	case len(v.Parts) > 0:
		res.Data = joinParts(v.Parts, v.Len)
	}
	return res, nil
}

// ReadView is Read without the copy: the batches are returned as the parts
// of the bucket's memory they lie in (see ReadView.Parts), so a server can
// write a cached range straight to its client.
func (l *RemoteLog) ReadView(ctx context.Context, offset int64, maxBytes int) (ReadView, error) {
	var res ReadView
	prev, cont := l.streams.get(offset)
	ra, readsAhead := l.readsAhead()
	rctx := ctx
	if readsAhead {
		rctx = objstore.WithCallerReadAhead(ctx)
	}
	err := l.retryGone(ctx, func(m *manifest.Manifest) error {
		res = ReadView{LogStartOffset: m.LogStartOffset, LogEndOffset: m.NextOffset(), NextOffset: offset}
		if offset == res.LogEndOffset && offset >= res.LogStartOffset {
			return nil
		}
		if g, lost := m.LostAt(offset); lost && offset >= m.LogStartOffset {
			// Deleted at the source before it was uploaded: answered as
			// Kafka answers offsets its log no longer has, never with the
			// batches after the hole.
			return &manifest.LostOffsetsError{Offset: offset, Gap: g}
		}
		seg, err := m.FindOffset(ctx, l.subs, offset)
		if err != nil {
			return err
		}
		fromStart := offset <= seg.BaseOffset
		var pre preRead
		// A cached-only read that misses keeps no stream (the cache loads
		// its chunks itself): no window is asked for it.
		if readsAhead && !cont && fromStart && !objstore.CachedOnly(ctx) {
			pre = l.readAheadFromStart(ctx, ra, m, seg, maxBytes)
		}
		if err := l.readSegment(rctx, seg, offset, maxBytes, &res, prev, cont); err != nil {
			return err
		}
		// The stream goes on from where the read ended, and asks for its
		// window when its reader nears the end of what it asked for last.
		s := l.opts.nextStream(prev, cont, fromStart, int64(res.Len), l.opts.Now(), maxBytes)
		ask := s.windowBytes(prev, cont, int64(maxBytes)+int64(l.opts.ScanWindow))
		want, left := wantsWindow(prev, advance(prev, cont, seg.Log.Key, res.end), ask)
		s.ahead, s.toEnd, s.limit = left, prev.toEnd && cont, prev.limit
		if pre.id != 0 {
			// Asked for before the read: the stream's first window.
			s.id, s.depth, want = pre.id, max(s.depth, pre.depth), false
			s.ahead, s.toEnd, s.limit = max(pre.covered-res.end, 0), pre.toEnd, 0
			if pre.covered < pre.total && !pre.toEnd {
				s.limit = pre.covered // the bucket held back
			}
		}
		if readsAhead && want {
			w, total := l.readAheadWindow(ctx, m, seg, res.end, ask)
			switch {
			case l.deferWindow(ctx, ra, s.id, w):
				s.ahead = total // see deferWindow
			case len(w) > 0:
				s.ahead = ra.ReadAhead(s.id, w)
			}
			s.toEnd = total < ask && s.ahead == total
			s.limit = 0
			if s.ahead < total && !s.toEnd {
				s.limit = s.ahead // the bucket held back (its share)
			}
		}
		if res.Len > 0 {
			res.logKey = seg.Log.Key
		}
		if res.end < seg.Log.Size {
			s.key, s.pos = seg.Log.Key, res.end
		}
		l.streams.put(res.NextOffset, s)
		return nil
	})
	if err != nil {
		return ReadView{}, fmt.Errorf("read %s-%d at offset %d: %w", l.topic, l.partition, offset, err)
	}
	return res, nil
}

// preRead is the window a new stream asked for before its first read.
type preRead struct {
	id                    uint64
	depth, covered, total int64
	toEnd                 bool
}

// deferWindow asks the bucket for stream's window w only once the other
// reads of ctx's request (objstore.DemandGroup) have asked for their own
// bytes, and reports whether it did so (false: the request has none
// pending, and the caller asks now). A Fetch of many partitions so sends
// its own loads to the store before the read-ahead of its first
// partitions. The caller counts a deferred window as covered: what the
// bucket cannot take once it is asked for, it keeps as a held window.
func (l *RemoteLog) deferWindow(ctx context.Context, ra objstore.ReadAheader, stream uint64, w []objstore.Range) bool {
	g := objstore.DemandOf(ctx)
	return g != nil && len(w) > 0 && g.OnSettled(func() {
		if ctx.Err() == nil { // its request is still being answered
			ra.ReadAhead(stream, w)
		}
	})
}

// readAheadFromStart asks the bucket, before a new stream's first read
// (one from seg's base offset: a replay from there), for the window from
// seg's first byte: the whole segment, at least the stream's first depth,
// at most ReadAheadBytes. The read then joins the loads of its own chunks,
// which come in the same GET as the rest of the segment, rather than
// loading them by itself and the rest by another GET after it.
func (l *RemoteLog) readAheadFromStart(ctx context.Context, ra objstore.ReadAheader, m *manifest.Manifest, seg manifest.Segment, maxBytes int) preRead {
	floor := int64(max(maxBytes, 1)) + int64(l.opts.ScanWindow)
	depth := min(max(2*floor, seg.Log.Size), l.opts.ReadAheadBytes)
	w, total := l.readAheadWindow(ctx, m, seg, 0, depth)
	if len(w) == 0 {
		return preRead{}
	}
	p := preRead{id: objstore.NewStreamID(), depth: depth, total: total}
	if len(w) > 1 && l.deferWindow(ctx, ra, p.id, w) {
		// This read's own segment now (the read joins its load), the
		// rest of the window once the request's other reads have asked
		// for theirs.
		ra.ReadAhead(p.id, w[:1])
		p.covered = total
	} else {
		p.covered = ra.ReadAhead(p.id, w)
	}
	p.toEnd = total < depth && p.covered == total
	return p
}

// joinParts copies parts (n bytes in all) into one new slice.
func joinParts(parts [][]byte, n int) []byte {
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// readSegment fills res with whole batches of seg from the first one whose
// last offset is at least target: the first batch always, then more while
// the total stays within maxBytes. The batches after the first are taken
// from the window already read where they lie in one part, so a read costs
// one range GET and no copy of a shared window; a batch spanning two parts
// is copied once. A read at the segment's base offset, or one continuing a
// stream (prev, cont) in this segment, starts where it knows the batch is
// without the offset index (startAt); others look the position up there.
func (l *RemoteLog) readSegment(ctx context.Context, seg manifest.Segment, target int64, maxBytes int, res *ReadView, prev streamState, cont bool) error {
	maxBytes = max(maxBytes, 1)
	window := int64(maxBytes) + int64(l.opts.ScanWindow)
	chain := record.NewChain(seg.BaseOffset, seg.LastOffset)
	pos, known := startAt(seg, target, prev, cont)
	switch {
	case known && pos > 0:
		// The batch after the stream's last one: it starts at target
		// or later (a gap left by compaction).
		chain = record.NewChain(target, seg.LastOffset)
	case !known:
		p, entry, err := l.indexEntry(ctx, seg, target)
		if err != nil {
			return err
		}
		pos = p
		if pos > 0 {
			chain.StartAt(entry)
		}
	}
	// Every batch passed on the way and served is checked against the
	// segment's offsets (record.Chain), from the start position's batch on.
	cur := newLogCursor(l.bucket, seg.Log, window)
	for {
		if pos >= seg.Log.Size {
			return &CorruptObjectError{Key: seg.Log.Key, Reason: fmt.Sprintf(
				"no batch holds offset %d or a later one, but the manifest says the segment ends at offset %d", target, seg.LastOffset)}
		}
		hdr, size, err := cur.header(ctx, pos)
		if err != nil {
			return err
		}
		if hdr.LastOffset() < target {
			// Passed over: its offsets are checked (a wrong length
			// lands the walk on bytes whose header fails the chain, or
			// the batch served fails its CRC); its records are not
			// served, so its CRC is not (Kafka does the same).
			if err := chain.Check(hdr); err != nil {
				return record.WithFile(err, seg.Log.Key, pos)
			}
			pos += size
			continue
		}
		end := pos + min(max(size, int64(maxBytes)), seg.Log.Size-pos)
		// The first batch, whole and checked; its errors are the read's.
		first, err := cur.bytes(ctx, pos, size)
		if err != nil {
			return err
		}
		if _, err := wholeBatches(first, maxBytes, seg.Log.Key, pos); err != nil {
			return err
		}
		last, lastPrev, lastSize := record.Batch(first), chain.Prev(), size
		if err := chain.Check(last); err != nil {
			return record.WithFile(err, seg.Log.Key, pos)
		}
		if err := cur.fill(ctx, pos, end-pos); err != nil {
			return err
		}
		res.Parts = append(res.Parts[:0], first)
		res.Len, res.NextOffset = int(size), last.NextOffset()
		res.shared = cur.shared
		p := pos + size
		for p < end && res.Len < maxBytes {
			b, n, next, bl, bp := cur.batchesAt(ctx, p, end, maxBytes-res.Len, &chain)
			if n == 0 {
				break // a bad or incomplete batch ends the result
			}
			res.Parts = appendPart(res.Parts, b)
			res.Len += int(n)
			res.NextOffset = next
			last, lastPrev, lastSize = bl, bp, int64(len(bl))
			p += n
		}
		res.end = p
		// The batch after the last one must follow it (record.Chain.Settle).
		var after []byte
		if p+8 <= seg.Log.Size {
			if after, err = cur.bytes(ctx, p, 8); err != nil {
				return err
			}
		}
		drop, err := chain.Settle(last, lastPrev, after)
		switch {
		case drop && res.Len == int(lastSize):
			return record.WithFile(err, seg.Log.Key, p)
		case drop:
			*res = cutParts(*res, res.Len-int(lastSize))
		}
		return nil
	}
}

// cutParts keeps the first n bytes (whole batches) of v.
func cutParts(v ReadView, n int) ReadView {
	parts := v.Parts
	v.Parts, v.Len, v.end = nil, n, v.end-int64(v.Len-n)
	for _, p := range parts {
		if n == 0 {
			break
		}
		k := min(n, len(p))
		v.Parts = append(v.Parts, p[:k])
		n -= k
	}
	v.NextOffset = record.Batch(lastBatch(v.Parts)).NextOffset()
	return v
}

// lastBatch is the last batch of parts (whole batches, each within a part).
func lastBatch(parts [][]byte) []byte {
	p := parts[len(parts)-1]
	it := record.NewIter(p)
	var last []byte
	for {
		b, ok := it.Next()
		if !ok {
			return last
		}
		last = b
	}
}

// appendPart appends b to parts, merging it into the last part when it
// continues that part's memory.
func appendPart(parts [][]byte, b []byte) [][]byte {
	if k := len(parts) - 1; k >= 0 {
		last := parts[k]
		if len(last) > 0 && len(b) > 0 && cap(last) >= len(last)+len(b) && &last[:len(last)+1][len(last)] == &b[0] {
			parts[k] = last[:len(last)+len(b)]
			return parts
		}
	}
	return append(parts, b)
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
	// The scan starts at the batch holding the time index's entry (its
	// last offset): earlier records of that batch may have the timestamp
	// too, so only the log start bounds the answer (as Kafka's
	// LogSegment.findOffsetByTimestamp).
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
		if hdr.MaxTimestamp() >= ts && hdr.LastOffset() >= logStart {
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
				if r.Timestamp >= ts && r.Offset >= logStart {
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
		// Segments without a .txnindex cost no request, and the stretch
		// of them that ends the log is remembered (per manifest), so a
		// replay's reads do not each walk the rest of the log.
		l.mu.Lock()
		known := l.txnFree
		l.mu.Unlock()
		free := int64(-1) // where the stretch without .txnindex walked last began
		for at := max(from, m.LogStartOffset); at < m.NextOffset(); {
			if known.m == m && at >= known.from {
				if free < 0 {
					free = at
				}
				break // no .txnindex from here on
			}
			seg, err := m.FindOffset(ctx, l.subs, at)
			if err != nil {
				return err
			}
			if seg.TxnIndex == nil && free < 0 {
				free = at
			}
			if seg.TxnIndex != nil {
				free = -1
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
		if free >= 0 {
			l.mu.Lock()
			if l.txnFree.m != m || free < l.txnFree.from {
				l.txnFree = txnFree{m: m, from: free}
			}
			l.mu.Unlock()
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
	pos, _, err := l.indexEntry(ctx, seg, target)
	return pos, err
}

// indexEntry is the index entry at or below target: the byte position in
// seg's log and the offset the batch there holds.
func (l *RemoteLog) indexEntry(ctx context.Context, seg manifest.Segment, target int64) (pos, offset int64, err error) {
	oi, err := l.offsetIndex(ctx, seg)
	if err != nil {
		return 0, 0, err
	}
	e := oi.Lookup(target)
	pos = int64(e.Position)
	if pos >= seg.Log.Size {
		return 0, 0, &CorruptObjectError{Key: seg.Index.Key, Reason: fmt.Sprintf(
			"entry for offset %d points at position %d, past the end of the %d-byte log", target, pos, seg.Log.Size)}
	}
	return pos, e.Offset, nil
}

func (l *RemoteLog) offsetIndex(ctx context.Context, seg manifest.Segment) (*index.OffsetIndex, error) {
	v, err := l.loadIndex(ctx, seg, seg.Index, kindOffsetIndex, func(data []byte) (any, error) {
		x := index.ParseOffsetIndex(seg.Index.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.OffsetIndex), nil
}

func (l *RemoteLog) timeIndex(ctx context.Context, seg manifest.Segment) (*index.TimeIndex, error) {
	v, err := l.loadIndex(ctx, seg, seg.TimeIndex, kindTimeIndex, func(data []byte) (any, error) {
		x := index.ParseTimeIndex(seg.TimeIndex.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.TimeIndex), nil
}

func (l *RemoteLog) txnIndex(ctx context.Context, seg manifest.Segment) (*index.TxnIndex, error) {
	v, err := l.loadIndex(ctx, seg, *seg.TxnIndex, kindTxnIndex, func(data []byte) (any, error) {
		x := index.ParseTxnIndex(seg.TxnIndex.Key, data, seg.BaseOffset)
		return x, x.SanityCheck()
	})
	if err != nil {
		return nil, err
	}
	return v.(*index.TxnIndex), nil
}

// Kinds of parsed index, which name their cache entries: the sections of
// one indexes object share its key (and an empty one its offset).
const (
	kindOffsetIndex = "offset"
	kindTimeIndex   = "time"
	kindTxnIndex    = "txn"
)

// indexCacheKey names the parsed index of kind held by obj.
func indexCacheKey(obj manifest.Object, kind string) string {
	return kind + "@" + strconv.FormatInt(obj.Offset, 10) + ":" + obj.Key
}

// loadIndex returns the parsed index of kind that obj holds, from the cache
// or fetched (whole, or its section of an indexes object) and checked
// against the manifest's size and checksum. Keys name one upload attempt's
// content, which never changes, so entries never go stale.
func (l *RemoteLog) loadIndex(ctx context.Context, seg manifest.Segment, obj manifest.Object, kind string, parse func([]byte) (any, error)) (any, error) {
	ck := indexCacheKey(obj, kind)
	if v, ok := l.idx.get(ck); ok {
		return v, nil
	}
	// The read has asked for its bytes when it asks for its batches, not
	// for an index it needs first (objstore.DemandGroup).
	ctx = objstore.WithoutDemand(ctx)
	if obj.Size > l.opts.MaxIndexBytes {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: fmt.Sprintf(
			"index of %d bytes exceeds the %d-byte limit", obj.Size, l.opts.MaxIndexBytes)}
	}
	var data []byte
	if obj.Size > 0 {
		if key, size, ok := seg.IndexesObject(); ok {
			hintSize(l.bucket, manifest.Object{Key: key, Size: size})
		}
		// A prefetch reads the index (cached-only) to know which data
		// to load.
		var err error
		if data, err = readObject(objstore.WithoutPrefetch(ctx), l.bucket, obj); err != nil {
			return nil, err
		}
	}
	v, err := parse(data)
	if err != nil {
		return nil, &CorruptObjectError{Key: obj.Key, Reason: "bad index", Err: err}
	}
	l.idx.put(ck, v, int64(len(data))+64)
	return v, nil
}

// readObject fetches a small object whole, or a section of an indexes
// object by range, and checks its size and checksum against the manifest.
func readObject(ctx context.Context, b objstore.BucketReader, obj manifest.Object) ([]byte, error) {
	var rc io.ReadCloser
	var err error
	if obj.Section() {
		rc, err = b.GetRange(ctx, obj.Key, obj.Offset, obj.Size)
		if errors.Is(err, objstore.ErrInvalidRange) {
			return nil, &CorruptObjectError{Key: obj.Key, Reason: fmt.Sprintf(
				"object ends before the section [%d, %d) the manifest recorded", obj.Offset, obj.Offset+obj.Size)}
		}
	} else {
		rc, err = b.Get(ctx, obj.Key)
	}
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
