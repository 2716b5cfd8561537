package remotetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Helpers of the uploader tests (prefixed "up" to stay clear of the reader
// tests' helpers in this package).

var upNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// upOpenDir opens a data dir that creates topics without topic IDs (the
// name-only lineage, as releases before topic IDs did): most tests are of
// the bucket's mechanics, written against name-only keys. upOpenDirIDs
// opens one that gives topics IDs, as serve does.
func upOpenDir(t testing.TB, dir string) *localtier.LogDir {
	t.Helper()
	return upOpenDirOpts(t, dir, true)
}

// upOpenDirIDs opens a data dir as serve does: topics created get IDs.
func upOpenDirIDs(t testing.TB, dir string) *localtier.LogDir {
	t.Helper()
	return upOpenDirOpts(t, dir, false)
}

func upOpenDirOpts(t testing.TB, dir string, noIDs bool) *localtier.LogDir {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{Now: func() time.Time { return upNow }, WithoutTopicIDs: noIDs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// upTopic creates a remote-enabled topic.
func upTopic(t testing.TB, d *localtier.LogDir, name string, parts int, extra ...string) {
	t.Helper()
	ov := map[string]string{"remote.storage.enable": "true"}
	for i := 0; i+1 < len(extra); i += 2 {
		ov[extra[i]] = extra[i+1]
	}
	if _, err := d.CreateTopic(name, parts, ov); err != nil {
		t.Fatal(err)
	}
}

// upAppend appends batches of n records (keys from key) and returns the
// offset after them.
func upAppend(t testing.TB, l *localtier.Log, batches, n int, key func(i int) string, valueSize int) int64 {
	t.Helper()
	var e record.Encoder
	for b := 0; b < batches; b++ {
		recs := make([]record.Record, n)
		for i := range recs {
			k := []byte(key(b*n + i))
			recs[i] = record.Record{Offset: int64(i), Timestamp: upNow.UnixMilli() + int64(b*n+i),
				Key: k, Value: bytes.Repeat([]byte{byte('a' + (b+i)%26)}, valueSize)}
		}
		data, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(data); err != nil {
			t.Fatal(err)
		}
	}
	return l.LogEndOffset()
}

func upKey(i int) string { return fmt.Sprintf("key-%d", i) }

// upSegments appends and rolls: segs segments of batches×n records each,
// and an active segment with one batch.
func upSegments(t testing.TB, l *localtier.Log, segs, batches, n, valueSize int) {
	t.Helper()
	for s := 0; s < segs; s++ {
		upAppend(t, l, batches, n, upKey, valueSize)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	upAppend(t, l, 1, n, upKey, valueSize)
}

func upPartition(t testing.TB, d *localtier.LogDir, topic string, p int32) *localtier.Log {
	t.Helper()
	l, err := d.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// upPartitionLog is one partition of d as retention.RunOnce hands it to a
// RemoteLookup.
func upPartitionLog(t testing.TB, d *localtier.LogDir, topic string, p int32) localtier.PartitionLog {
	t.Helper()
	id, err := d.TopicID(topic)
	if err != nil {
		t.Fatal(err)
	}
	return localtier.PartitionLog{Topic: topic, Partition: p, TopicID: id, Log: upPartition(t, d, topic, p)}
}

func upUploader(t testing.TB, bkt objstore.Bucket, src Source, opts Options) *Uploader {
	t.Helper()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return upNow }
	}
	if opts.Retry.Base == 0 {
		opts.Retry = Retry{Attempts: 3, Base: time.Microsecond, Max: time.Microsecond}
	}
	u, err := NewUploader(bkt, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func upLoad(t testing.TB, bkt objstore.Bucket, topic string, p int32) *manifest.Manifest {
	t.Helper()
	store, err := newManifestStore(bkt, "")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := store.loadID(context.Background(), topic, upKeyID(t, bkt, topic), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// upKeyID is the lineage readers serve for topic: its topic object's
// current one, or the name-only lineage without an object.
func upKeyID(t testing.TB, bkt objstore.Bucket, topic string) string {
	t.Helper()
	s, _, err := remotelog.ReadTopicVersion(context.Background(), bkt, "", topic)
	if err != nil {
		t.Fatal(err)
	}
	k, _, ok := s.Serving()
	if !ok {
		t.Fatalf("topic %s is deleted", topic)
	}
	return k
}

// upBases is the base offsets of every segment m commits, sealed ones included.
func upBases(t testing.TB, bkt objstore.Bucket, m *manifest.Manifest) []int64 {
	t.Helper()
	var bases []int64
	for _, s := range upAllSegments(t, bkt, m) {
		bases = append(bases, s.BaseOffset)
	}
	return bases
}

func upAllSegments(t testing.TB, bkt objstore.Bucket, m *manifest.Manifest) []manifest.Segment {
	t.Helper()
	store, err := newManifestStore(bkt, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest.Segment
	if err := m.Walk(context.Background(), store.subs, func(s manifest.Segment) error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// upObject returns the bytes of o (the whole object, or its section of an
// indexes object), failing when they differ from the manifest's size and
// checksum.
func upObject(t testing.TB, b objstore.BucketReader, o manifest.Object) []byte {
	t.Helper()
	data := remotekit.Get(t, b, o.Key)
	if o.Section() {
		if o.Offset+o.Size > int64(len(data)) {
			t.Fatalf("object %s: %d bytes, manifest has a section [%d, %d)", o.Key, len(data), o.Offset, o.Offset+o.Size)
		}
		data = data[o.Offset : o.Offset+o.Size]
	}
	sum, err := manifest.ChecksumOf(manifest.CRC32C, data)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != o.Size || sum != o.Checksum {
		t.Fatalf("object %s at %d: %d bytes %s, manifest says %d %s", o.Key, o.Offset, len(data), sum, o.Size, o.Checksum)
	}
	return data
}

// upCheckObjects checks every object of s against the manifest, and that an
// indexes object holds its sections and nothing more.
func upCheckObjects(t testing.TB, b objstore.BucketReader, s manifest.Segment) {
	t.Helper()
	for _, o := range s.Objects() {
		upObject(t, b, o)
	}
	if key, size, ok := s.IndexesObject(); ok {
		if n := int64(len(remotekit.Get(t, b, key))); n != size {
			t.Fatalf("indexes object %s: %d bytes, its sections add up to %d", key, n, size)
		}
	}
}

// upCheckRemote checks the remote tier of one partition against its local
// log: the manifest validates; its segments are the log's rolled segments
// from the first committed one up to wantNext, contiguous, each offset once;
// every object matches its size and checksum, and each .log is byte for byte
// the local segment's; and a remotelog.RemoteLog (the read path, written separately)
// serves every offset with the local log's batch. It returns the segments.
func upCheckRemote(t testing.TB, bkt objstore.Bucket, l *localtier.Log, topic string, p int32, wantNext int64) []manifest.Segment {
	t.Helper()
	ctx := context.Background()
	m := upLoad(t, bkt, topic, p)
	if err := m.Validate(); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if got := m.NextOffset(); got != wantNext {
		t.Fatalf("remote next offset %d, want %d", got, wantNext)
	}
	segs := upAllSegments(t, bkt, m)
	local := map[int64]localtier.SegmentInfo{}
	for _, s := range l.Segments() {
		local[s.BaseOffset] = s
	}
	for i, s := range segs {
		if i > 0 && s.BaseOffset <= segs[i-1].LastOffset || i > 0 && s.BaseOffset != segs[i-1].LastOffset+1 && !s.Compacted && !segs[i-1].Compacted {
			t.Fatalf("segment %d starts at %d, previous ended at %d: gap or overlap", i, s.BaseOffset, segs[i-1].LastOffset)
		}
		upCheckObjects(t, bkt, s)
		if ls, ok := local[s.BaseOffset]; ok && ls.NextOffset == s.NextOffset() {
			want, err := os.ReadFile(ls.Path)
			if err != nil {
				t.Fatal(err)
			}
			if got := remotekit.Get(t, bkt, s.Log.Key); !bytes.Equal(got, want[:ls.Size]) {
				t.Fatalf("segment %d: remote log differs from the local file", s.BaseOffset)
			}
		}
	}
	if len(segs) == 0 {
		return segs
	}
	rl, err := remotelog.OpenRemoteLog(ctx, bkt, "", topic, p, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for off := m.LogStartOffset; off < m.NextOffset(); off++ {
		res, err := rl.Read(ctx, off, 1)
		if err != nil {
			t.Fatalf("remote read at %d: %v", off, err)
		}
		lr, err := l.Read(off, 1, true)
		if err != nil {
			t.Fatalf("local read at %d: %v", off, err)
		}
		it := record.NewIter(lr.Data)
		want, ok := it.Next()
		if !ok {
			t.Fatalf("local read at %d: no batch", off)
		}
		if !bytes.Equal(res.Data, want) {
			t.Fatalf("offset %d: remote batch differs from the local one", off)
		}
	}
	return segs
}

// upKeys lists every key in the bucket.
func upKeys(t testing.TB, b objstore.BucketReader) []string {
	t.Helper()
	var keys []string
	if err := b.List(context.Background(), "", func(o objstore.ObjectInfo) error {
		if _, _, topicObject := manifest.ParseTopicKey(o.Key); !topicObject {
			keys = append(keys, o.Key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// upReferenced is every key the partitions' manifests reference, with the
// roots.
func upReferenced(t testing.TB, b objstore.Bucket, parts ...manifest.Key) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, k := range parts {
		store, err := newManifestStore(b, k.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := store.loadID(context.Background(), k.Topic, k.TopicID, k.Partition, 0)
		if err != nil {
			t.Fatal(err)
		}
		if m.Generation == 0 {
			continue
		}
		out[m.Key()] = true
		keys, err := m.ReferencedKeys(context.Background(), store.subs)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			out[k] = true
		}
	}
	return out
}

// isInjected reports whether every error joined in err is an injected fault.
func isInjected(err error) bool {
	if err == nil {
		return true
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !isInjected(e) {
				return false
			}
		}
		return true
	}
	if errors.Is(err, objstore.ErrInjected) {
		return true
	}
	if u := errors.Unwrap(err); u != nil {
		return isInjected(u)
	}
	return strings.Contains(err.Error(), objstore.ErrInjected.Error())
}
