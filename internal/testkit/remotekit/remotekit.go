// Package remotekit builds remote tiers by hand for tests: segments written by
// localtier's engine (or cut from them), uploaded as objects and committed to
// a manifest the way the uploader would, with a model (Remote) that the
// manifest-driven reader's answers are checked against. Tests only.
package remotekit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// The tests build a remote tier by hand: segments written by localtier's
// engine (or cut from them, for compacted segments), uploaded as objects
// with a manifest committed through manifest.Append, as the uploader would.

const (
	TestTopic     = "orders.v1"
	TestPartition = int32(3)
)

// SegFiles are the files of one segment to upload.
type SegFiles struct {
	Base, Last int64
	Log        []byte
	Index      []byte
	TimeIndex  []byte
	TxnIndex   []byte // nil: the segment has none
	Compacted  bool
}

// BatchAt is one batch of the remote log and where it is.
type BatchAt struct {
	Seg int   // index into Remote.Segs
	Pos int64 // byte position in the segment's log
	B   record.Batch
}

// RecAt is one record's offset and timestamp.
type RecAt struct{ Offset, TS int64 }

// Remote is a hand-built remote tier of one partition and the model the
// reader's answers are checked against.
type Remote struct {
	T       testing.TB
	Bucket  objstore.Bucket
	Prefix  string
	TopicID string // the lineage ("" = name-only)
	Policy  manifest.Policy
	M       *manifest.Manifest
	Segs    []manifest.Segment
	Logs    [][]byte
	Batches []BatchAt
	Records []RecAt
}

func NewRemote(t testing.TB, b objstore.Bucket, prefix string, logStart int64, p manifest.Policy) *Remote {
	t.Helper()
	return NewRemoteID(t, b, prefix, "", logStart, p)
}

// NewRemoteID is NewRemote in the lineage of topicID.
func NewRemoteID(t testing.TB, b objstore.Bucket, prefix, topicID string, logStart int64, p manifest.Policy) *Remote {
	t.Helper()
	m, err := manifest.NewID(prefix, TestTopic, topicID, TestPartition, logStart)
	if err != nil {
		t.Fatal(err)
	}
	return &Remote{T: t, Bucket: b, Prefix: prefix, TopicID: topicID, Policy: p, M: m}
}

func Put(t testing.TB, b objstore.Bucket, key string, data []byte) {
	t.Helper()
	if _, err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func Get(t testing.TB, b objstore.BucketReader, key string) []byte {
	t.Helper()
	rc, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func Object(t testing.TB, key string, data []byte) manifest.Object {
	t.Helper()
	sum, err := manifest.ChecksumOf(manifest.CRC32C, data)
	if err != nil {
		t.Fatal(err)
	}
	return manifest.Object{Key: key, Size: int64(len(data)), Checksum: sum}
}

// Commit uploads the segments' objects, then commits them to the manifest.
func (r *Remote) Commit(files ...SegFiles) {
	t := r.T
	t.Helper()
	var segs []manifest.Segment
	for _, f := range files {
		attempt := manifest.NewAttemptID()
		keys, err := manifest.DataKeysID(r.Prefix, TestTopic, r.TopicID, r.M.Partition, f.Base, attempt)
		if err != nil {
			t.Fatal(err)
		}
		seg := manifest.Segment{BaseOffset: f.Base, LastOffset: f.Last, MinTimestamp: manifest.NoTimestamp, MaxTimestamp: manifest.NoTimestamp,
			LeaderEpochs: []manifest.EpochEntry{}, Compacted: f.Compacted,
			Log: Object(t, keys.Log, f.Log), Index: Object(t, keys.Index, f.Index), TimeIndex: Object(t, keys.TimeIndex, f.TimeIndex),
			UploadTimeMs: 1_700_000_000_000, Uploader: "test", AttemptID: attempt}
		Put(t, r.Bucket, keys.Log, f.Log)
		Put(t, r.Bucket, keys.Index, f.Index)
		Put(t, r.Bucket, keys.TimeIndex, f.TimeIndex)
		if f.TxnIndex != nil {
			o := Object(t, keys.TxnIndex, f.TxnIndex)
			seg.TxnIndex = &o
			Put(t, r.Bucket, keys.TxnIndex, f.TxnIndex)
		}
		it := record.NewIter(f.Log)
		it.Verify = true
		var count int64
		var dec record.Decoder
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			count += int64(b.RecordCount())
			if seg.MinTimestamp == manifest.NoTimestamp || b.MaxTimestamp() < seg.MinTimestamp {
				seg.MinTimestamp = b.MaxTimestamp()
			}
			seg.MaxTimestamp = max(seg.MaxTimestamp, b.MaxTimestamp())
			r.Batches = append(r.Batches, BatchAt{Seg: len(r.Segs) + len(segs), Pos: int64(it.Pos() - b.Size()), B: b})
			recs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				r.Records = append(r.Records, RecAt{rec.Offset, rec.Timestamp})
			}
		}
		if it.Err() != nil || it.Truncated() {
			t.Fatalf("segment %d: %v truncated %v", f.Base, it.Err(), it.Truncated())
		}
		seg.RecordCount = count
		segs = append(segs, seg)
		r.Logs = append(r.Logs, f.Log)
	}
	c, err := manifest.Append(r.M, r.Policy, segs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Subs {
		Put(t, r.Bucket, s.Ref.Key, s.Data)
	}
	root, err := manifest.EncodeRoot(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	Put(t, r.Bucket, c.Root.Key(), root)
	r.M = c.Root
	r.Segs = append(r.Segs, segs...)
}

// ExpectRead is the model's answer to Read(offset, maxBytes).
func (r *Remote) ExpectRead(offset int64, maxBytes int) []byte {
	for j, ba := range r.Batches {
		if ba.B.LastOffset() < offset {
			continue
		}
		n := 0
		for k := j; k < len(r.Batches) && r.Batches[k].Seg == ba.Seg; k++ {
			size := r.Batches[k].B.Size()
			if n > 0 && n+size > maxBytes {
				break
			}
			n += size
		}
		return r.Logs[ba.Seg][ba.Pos : ba.Pos+int64(n)]
	}
	return nil
}

// ExpectTimestamp is the model's answer to OffsetForTimestamp.
func (r *Remote) ExpectTimestamp(ts int64) (int64, int64, bool) {
	for _, rec := range r.Records {
		if rec.Offset >= r.M.LogStartOffset && rec.TS >= ts {
			return rec.Offset, rec.TS, true
		}
	}
	return 0, 0, false
}

// LocalLog writes a partition with localtier's engine: nSegs segments of
// batchesPerSeg batches of random size, codec and (not always increasing)
// timestamps, with an index entry every 256 bytes. txn adds transactional
// batches, some aborted.
type LocalLog struct {
	Log *localtier.Log
	Dir string
}

func WriteLocal(t testing.TB, dir string, seed uint64, nSegs, batchesPerSeg int, txn bool) *LocalLog {
	t.Helper()
	cfg := topicconfig.Defaults()
	cfg.IndexIntervalBytes = 256
	now := time.UnixMilli(1_700_000_000_000)
	pdir := filepath.Join(dir, fmt.Sprintf("%s-%d", TestTopic, TestPartition))
	l, _, err := localtier.OpenLog(vfs.Default, pdir, localtier.LogOptions{Config: cfg, RecoveryPoint: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rng := rand.New(rand.NewPCG(seed, 1))
	var enc record.Encoder
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}
	ts := int64(1_600_000_000_000)
	seq := int32(0)
	const pid = 4242
	for s := range nSegs {
		for i := range batchesPerSeg {
			n := 1 + rng.IntN(12)
			recs := make([]record.Record, n)
			for k := range recs {
				// Mostly increasing, sometimes back in time.
				ts += int64(rng.IntN(1000)) - 150
				v := make([]byte, 10+rng.IntN(600))
				for x := range v {
					v[x] = byte('a' + rng.IntN(26))
				}
				recs[k] = record.Record{Offset: int64(k), Timestamp: ts, Key: fmt.Appendf(nil, "k%d", rng.IntN(50)), Value: v}
			}
			transactional := txn && i%5 == 2
			AppendTestBatch(t, l, &enc, codecs[(s+i)%len(codecs)], recs, transactional, pid, &seq)
			if transactional {
				if _, err := l.AppendEndTxnMarker(pid, 0, i%10 == 2, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return &LocalLog{Log: l, Dir: pdir}
}

// AppendTestBatch encodes recs as one batch of codec c and appends it to
// l; a transactional batch is producer pid's (epoch 0), its base sequence
// *seq, which it advances.
func AppendTestBatch(t testing.TB, l *localtier.Log, enc *record.Encoder, c codec.Codec, recs []record.Record, transactional bool, pid int64, seq *int32) {
	t.Helper()
	spec := record.NewBatchSpec(0, c)
	if transactional {
		spec.Transactional = true
		spec.ProducerID = pid
		spec.BaseSequence = *seq
		*seq += int32(len(recs))
	}
	data, err := enc.AppendBatch(nil, spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(data); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func ReadOptional(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Files returns the rolled segments' files.
func (l *LocalLog) Files(t testing.TB) []SegFiles {
	t.Helper()
	var out []SegFiles
	for _, s := range l.Log.Segments() {
		if s.Active {
			continue
		}
		f := SegFiles{Base: s.BaseOffset, Last: s.NextOffset - 1}
		f.Log = ReadOptional(t, s.Path)
		f.Index = ReadOptional(t, localtier.SegmentPath(l.Dir, s.BaseOffset, ".index"))
		f.TimeIndex = ReadOptional(t, localtier.SegmentPath(l.Dir, s.BaseOffset, ".timeindex"))
		f.TxnIndex = ReadOptional(t, localtier.SegmentPath(l.Dir, s.BaseOffset, ".txnindex"))
		if int64(len(f.Log)) != s.Size {
			t.Fatalf("segment %d: read %d bytes, size %d", s.BaseOffset, len(f.Log), s.Size)
		}
		if f.Index == nil {
			f.Index = []byte{}
		}
		if f.TimeIndex == nil {
			f.TimeIndex = []byte{}
		}
		out = append(out, f)
	}
	return out
}

// Compact cuts f as a log cleaner would leave it: every batch i with
// drop(i) removed (the last batch is always kept, so the segment still ends
// at f.last), with fresh indexes.
func Compact(t testing.TB, f SegFiles, drop func(i int) bool) SegFiles {
	t.Helper()
	var kept []record.Batch
	it := record.NewIter(f.Log)
	var all []record.Batch
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		all = append(all, b)
	}
	for i, b := range all {
		if i == len(all)-1 || !drop(i) {
			kept = append(kept, b)
		}
	}
	out := SegFiles{Base: f.Base, Last: f.Last, Compacted: true}
	out.Log, out.Index, out.TimeIndex = BuildSegment(t, f.Base, kept, 256)
	return out
}

// BuildSegment lays out batches as a segment with Kafka's indexing rule:
// an entry (the batch's last offset → its position) once more than interval
// bytes were appended since the last one.
func BuildSegment(t testing.TB, base int64, batches []record.Batch, interval int) (log, idx, tidx []byte) {
	t.Helper()
	var offs []index.Entry
	var times []index.TimestampOffset
	since := 0
	maxTs, maxTsOff := int64(-1), base
	for _, b := range batches {
		if b.MaxTimestamp() > maxTs {
			maxTs, maxTsOff = b.MaxTimestamp(), b.LastOffset()
		}
		if since > interval {
			offs = append(offs, index.Entry{Offset: b.LastOffset(), Position: int32(len(log))})
			if len(times) == 0 || maxTs > times[len(times)-1].Timestamp {
				times = append(times, index.TimestampOffset{Timestamp: maxTs, Offset: maxTsOff})
			}
			since = 0
		}
		log = append(log, b...)
		since += b.Size()
	}
	var err error
	if idx, err = index.EncodeOffsetEntries(offs, base); err != nil {
		t.Fatal(err)
	}
	if tidx, err = index.EncodeTimeEntries(times, base); err != nil {
		t.Fatal(err)
	}
	return log, idx, tidx
}

// RecordingBucket records reads: Gets of .log objects and of
// sub-manifests, range GETs, lists.
type RecordingBucket struct {
	objstore.Bucket
	mu        sync.Mutex
	LogGets   int
	SubGets   int
	MaxRange  int64
	RangeGets int
	Lists     int
}

func (b *RecordingBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := manifest.ParseKey(key)
	sub := err == nil && k.Type == manifest.KeySub
	if sub || filepath.Ext(key) == ".log" {
		b.mu.Lock()
		if sub {
			b.SubGets++
		} else {
			b.LogGets++
		}
		b.mu.Unlock()
	}
	return b.Bucket.Get(ctx, key)
}

// SubGetsNow is SubGets, read under the bucket's lock.
func (b *RecordingBucket) SubGetsNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.SubGets
}

func (b *RecordingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.mu.Lock()
	b.RangeGets++
	b.MaxRange = max(b.MaxRange, length)
	b.mu.Unlock()
	return b.Bucket.GetRange(ctx, key, off, length)
}

func (b *RecordingBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	b.mu.Lock()
	b.Lists++
	b.mu.Unlock()
	return b.Bucket.List(ctx, prefix, fn)
}

// SmallPolicy seals sub-manifests after a few segments, so tests reach
// sealed sub-manifests with a handful of segments.
var SmallPolicy = manifest.Policy{InlineMax: 2, SubSegments: 2}

// WholePrefix is the whole batches at the start of data (a local read may
// end with a partial one).
func WholePrefix(data []byte) []byte {
	it := record.NewIter(data)
	for {
		if _, ok := it.Next(); !ok {
			return data[:it.Pos()]
		}
	}
}

// ReadFunc is a reader's Read: whole batches from offset, and the log start
// and end offsets of the manifest it read through.
type ReadFunc func(ctx context.Context, offset int64, maxBytes int) (data []byte, logStart, logEnd int64, err error)

// CheckEveryOffset reads every offset of the model r with read, at three
// sizes, and fails the test where the answer differs from the model's (and
// from the local log's, when local is not nil).
func CheckEveryOffset(t testing.TB, r *Remote, read ReadFunc, local *LocalLog) {
	t.Helper()
	ctx := context.Background()
	for off := r.M.LogStartOffset; off < r.M.NextOffset(); off++ {
		for _, maxBytes := range []int{1, 3000, 1 << 20} {
			data, logStart, logEnd, err := read(ctx, off, maxBytes)
			if err != nil {
				t.Fatalf("read %d max %d: %v", off, maxBytes, err)
			}
			if want := r.ExpectRead(off, maxBytes); !bytes.Equal(data, want) {
				t.Fatalf("read %d max %d: %d bytes, want %d", off, maxBytes, len(data), len(want))
			}
			if logStart != r.M.LogStartOffset || logEnd != r.M.NextOffset() {
				t.Fatalf("read %d: log start/end %d/%d, want %d/%d", off, logStart, logEnd, r.M.LogStartOffset, r.M.NextOffset())
			}
			if local == nil {
				continue
			}
			lres, err := local.Log.Read(off, maxBytes, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := WholePrefix(lres.Data); !bytes.Equal(data, want) {
				t.Fatalf("read %d max %d: %d bytes, the local log gives %d", off, maxBytes, len(data), len(want))
			}
		}
	}
}

// CheckTimestamps looks up timestamps across the model r's range with
// lookup (a reader's OffsetForTimestamp) and fails the test where the answer
// differs from the model's (and from the local log's, when local is not nil).
func CheckTimestamps(t testing.TB, r *Remote, lookup func(ctx context.Context, ts int64) (offset, timestamp int64, found bool, err error), local *LocalLog) {
	t.Helper()
	lo, hi := r.Records[0].TS, r.Records[0].TS
	for _, rec := range r.Records {
		lo, hi = min(lo, rec.TS), max(hi, rec.TS)
	}
	step := max((hi-lo)/400, 1)
	for ts := lo - 1; ts <= hi+1; ts += step {
		off, got, found, err := lookup(context.Background(), ts)
		if err != nil {
			t.Fatalf("ts %d: %v", ts, err)
		}
		wo, wt, wf := r.ExpectTimestamp(ts)
		if off != wo || got != wt || found != wf {
			t.Fatalf("ts %d: %d@%d %v, want %d@%d %v", ts, off, got, found, wo, wt, wf)
		}
		if local == nil {
			continue
		}
		lo, lt, lf, err := local.Log.OffsetForTimestamp(ts)
		if err != nil || off != lo || got != lt || found != lf {
			t.Fatalf("ts %d: %d@%d %v, the local log gives %d@%d %v (%v)", ts, off, got, found, lo, lt, lf, err)
		}
	}
}

// NewRemotePartition is NewRemote for partition part of TestTopic, for
// tests of several partitions in one bucket.
func NewRemotePartition(t testing.TB, b objstore.Bucket, prefix string, part int32, logStart int64, p manifest.Policy) *Remote {
	t.Helper()
	r := NewRemote(t, b, prefix, logStart, p)
	m, err := manifest.New(prefix, TestTopic, part, logStart)
	if err != nil {
		t.Fatal(err)
	}
	r.M = m
	return r
}

// PutTopicState writes s as its topic object (under no prefix) in b, as an
// uploader would.
func PutTopicState(t testing.TB, b objstore.Bucket, s *manifest.TopicState) {
	t.Helper()
	data, err := manifest.EncodeTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := manifest.TopicKey("", s.Topic)
	Put(t, b, key, data)
}
