package remotetier

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
	testTopic     = "orders.v1"
	testPartition = int32(3)
)

// segFiles are the files of one segment to upload.
type segFiles struct {
	base, last int64
	log        []byte
	index      []byte
	timeIndex  []byte
	txnIndex   []byte // nil: the segment has none
	compacted  bool
}

// batchAt is one batch of the remote log and where it is.
type batchAt struct {
	seg int   // index into remote.segs
	pos int64 // byte position in the segment's log
	b   record.Batch
}

// recAt is one record's offset and timestamp.
type recAt struct{ offset, ts int64 }

// remote is a hand-built remote tier of one partition and the model the
// reader's answers are checked against.
type remote struct {
	t       testing.TB
	bucket  objstore.Bucket
	prefix  string
	policy  manifest.Policy
	m       *manifest.Manifest
	segs    []manifest.Segment
	logs    [][]byte
	batches []batchAt
	records []recAt
}

func newRemote(t testing.TB, b objstore.Bucket, prefix string, logStart int64, p manifest.Policy) *remote {
	t.Helper()
	m, err := manifest.New(prefix, testTopic, testPartition, logStart)
	if err != nil {
		t.Fatal(err)
	}
	return &remote{t: t, bucket: b, prefix: prefix, policy: p, m: m}
}

func put(t testing.TB, b objstore.Bucket, key string, data []byte) {
	t.Helper()
	if _, err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t testing.TB, b objstore.BucketReader, key string) []byte {
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

func object(t testing.TB, key string, data []byte) manifest.Object {
	t.Helper()
	sum, err := manifest.ChecksumOf(manifest.CRC32C, data)
	if err != nil {
		t.Fatal(err)
	}
	return manifest.Object{Key: key, Size: int64(len(data)), Checksum: sum}
}

// commit uploads the segments' objects, then commits them to the manifest.
func (r *remote) commit(files ...segFiles) {
	t := r.t
	t.Helper()
	var segs []manifest.Segment
	for _, f := range files {
		attempt := manifest.NewAttemptID()
		keys, err := manifest.DataKeys(r.prefix, testTopic, testPartition, f.base, attempt)
		if err != nil {
			t.Fatal(err)
		}
		seg := manifest.Segment{BaseOffset: f.base, LastOffset: f.last, MinTimestamp: manifest.NoTimestamp, MaxTimestamp: manifest.NoTimestamp,
			LeaderEpochs: []manifest.EpochEntry{}, Compacted: f.compacted,
			Log: object(t, keys.Log, f.log), Index: object(t, keys.Index, f.index), TimeIndex: object(t, keys.TimeIndex, f.timeIndex),
			UploadTimeMs: 1_700_000_000_000, Uploader: "test", AttemptID: attempt}
		put(t, r.bucket, keys.Log, f.log)
		put(t, r.bucket, keys.Index, f.index)
		put(t, r.bucket, keys.TimeIndex, f.timeIndex)
		if f.txnIndex != nil {
			o := object(t, keys.TxnIndex, f.txnIndex)
			seg.TxnIndex = &o
			put(t, r.bucket, keys.TxnIndex, f.txnIndex)
		}
		it := record.NewIter(f.log)
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
			r.batches = append(r.batches, batchAt{seg: len(r.segs) + len(segs), pos: int64(it.Pos() - b.Size()), b: b})
			recs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				r.records = append(r.records, recAt{rec.Offset, rec.Timestamp})
			}
		}
		if it.Err() != nil || it.Truncated() {
			t.Fatalf("segment %d: %v truncated %v", f.base, it.Err(), it.Truncated())
		}
		seg.RecordCount = count
		segs = append(segs, seg)
		r.logs = append(r.logs, f.log)
	}
	c, err := manifest.Append(r.m, r.policy, segs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Subs {
		put(t, r.bucket, s.Ref.Key, s.Data)
	}
	root, err := manifest.EncodeRoot(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	put(t, r.bucket, c.Root.Key(), root)
	r.m = c.Root
	r.segs = append(r.segs, segs...)
}

// expectRead is the model's answer to Read(offset, maxBytes).
func (r *remote) expectRead(offset int64, maxBytes int) []byte {
	for j, ba := range r.batches {
		if ba.b.LastOffset() < offset {
			continue
		}
		n := 0
		for k := j; k < len(r.batches) && r.batches[k].seg == ba.seg; k++ {
			size := r.batches[k].b.Size()
			if n > 0 && n+size > maxBytes {
				break
			}
			n += size
		}
		return r.logs[ba.seg][ba.pos : ba.pos+int64(n)]
	}
	return nil
}

// expectTimestamp is the model's answer to OffsetForTimestamp.
func (r *remote) expectTimestamp(ts int64) (int64, int64, bool) {
	for _, rec := range r.records {
		if rec.offset >= r.m.LogStartOffset && rec.ts >= ts {
			return rec.offset, rec.ts, true
		}
	}
	return 0, 0, false
}

// localLog writes a partition with localtier's engine: nSegs segments of
// batchesPerSeg batches of random size, codec and (not always increasing)
// timestamps, with an index entry every 256 bytes. txn adds transactional
// batches, some aborted.
type localLog struct {
	log *localtier.Log
	dir string
}

func writeLocal(t testing.TB, dir string, seed uint64, nSegs, batchesPerSeg int, txn bool) *localLog {
	t.Helper()
	cfg := topicconfig.Defaults()
	cfg.IndexIntervalBytes = 256
	now := time.UnixMilli(1_700_000_000_000)
	pdir := filepath.Join(dir, fmt.Sprintf("%s-%d", testTopic, testPartition))
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
			appendTestBatch(t, l, &enc, codecs[(s+i)%len(codecs)], recs, transactional, pid, &seq)
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
	return &localLog{log: l, dir: pdir}
}

// appendTestBatch encodes recs as one batch of codec c and appends it to
// l; a transactional batch is producer pid's (epoch 0), its base sequence
// *seq, which it advances.
func appendTestBatch(t testing.TB, l *localtier.Log, enc *record.Encoder, c codec.Codec, recs []record.Record, transactional bool, pid int64, seq *int32) {
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

func readOptional(t testing.TB, path string) []byte {
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

// files returns the rolled segments' files.
func (l *localLog) files(t testing.TB) []segFiles {
	t.Helper()
	var out []segFiles
	for _, s := range l.log.Segments() {
		if s.Active {
			continue
		}
		f := segFiles{base: s.BaseOffset, last: s.NextOffset - 1}
		f.log = readOptional(t, s.Path)
		f.index = readOptional(t, localtier.SegmentPath(l.dir, s.BaseOffset, ".index"))
		f.timeIndex = readOptional(t, localtier.SegmentPath(l.dir, s.BaseOffset, ".timeindex"))
		f.txnIndex = readOptional(t, localtier.SegmentPath(l.dir, s.BaseOffset, ".txnindex"))
		if int64(len(f.log)) != s.Size {
			t.Fatalf("segment %d: read %d bytes, size %d", s.BaseOffset, len(f.log), s.Size)
		}
		if f.index == nil {
			f.index = []byte{}
		}
		if f.timeIndex == nil {
			f.timeIndex = []byte{}
		}
		out = append(out, f)
	}
	return out
}

// compact cuts f as a log cleaner would leave it: every batch i with
// drop(i) removed (the last batch is always kept, so the segment still ends
// at f.last), with fresh indexes.
func compact(t testing.TB, f segFiles, drop func(i int) bool) segFiles {
	t.Helper()
	var kept []record.Batch
	it := record.NewIter(f.log)
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
	out := segFiles{base: f.base, last: f.last, compacted: true}
	out.log, out.index, out.timeIndex = buildSegment(t, f.base, kept, 256)
	return out
}

// buildSegment lays out batches as a segment with Kafka's indexing rule:
// an entry (the batch's last offset → its position) once more than interval
// bytes were appended since the last one.
func buildSegment(t testing.TB, base int64, batches []record.Batch, interval int) (log, idx, tidx []byte) {
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

// recordingBucket records the reads of .log objects.
type recordingBucket struct {
	objstore.Bucket
	mu        sync.Mutex
	logGets   int
	maxRange  int64
	rangeGets int
	lists     int
}

func (b *recordingBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if filepath.Ext(key) == ".log" {
		b.mu.Lock()
		b.logGets++
		b.mu.Unlock()
	}
	return b.Bucket.Get(ctx, key)
}

func (b *recordingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.mu.Lock()
	b.rangeGets++
	b.maxRange = max(b.maxRange, length)
	b.mu.Unlock()
	return b.Bucket.GetRange(ctx, key, off, length)
}

func (b *recordingBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	b.mu.Lock()
	b.lists++
	b.mu.Unlock()
	return b.Bucket.List(ctx, prefix, fn)
}
