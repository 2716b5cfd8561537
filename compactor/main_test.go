package compactor

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fake clock's start: 2023-11-14T22:13:20Z.
const t0 = 1_700_000_000_000

type fakeClock struct{ ms int64 }

func (c *fakeClock) Now() time.Time { return time.UnixMilli(c.ms) }

// env is a data dir on a MemFS with one compacted topic "t" (1 partition).
type env struct {
	t     testing.TB
	fs    *vfs.MemFS
	clock *fakeClock
	dir   *localtier.LogDir
	log   *localtier.Log
	enc   record.Encoder
	cfg   Config
}

// baseTopic is the config of test topics: compacted, every dirty byte
// makes a log cleanable, a day of tombstone retention.
var baseTopic = map[string]string{
	"cleanup.policy":            "compact",
	"min.cleanable.dirty.ratio": "0",
	"delete.retention.ms":       "86400000",
	"index.interval.bytes":      "200",
}

func newEnv(t testing.TB, overrides map[string]string) *env {
	t.Helper()
	e := &env{t: t, fs: vfs.NewMem(), clock: &fakeClock{ms: t0}}
	e.openDir()
	cfg := map[string]string{}
	for k, v := range baseTopic {
		cfg[k] = v
	}
	for k, v := range overrides {
		cfg[k] = v
	}
	if _, err := e.dir.CreateTopic("t", 1, cfg); err != nil {
		t.Fatal(err)
	}
	e.log = e.partition("t", 0)
	e.cfg = Config{DedupeBufferSize: 1 << 20, Now: e.clock.Now}
	return e
}

func (e *env) openDir() {
	d, _, err := localtier.OpenLogDir(e.fs, "/data", localtier.LogDirOptions{Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	e.dir = d
	e.t.Cleanup(func() { _ = e.dir.Close() })
}

func (e *env) partition(topic string, p int32) *localtier.Log {
	l, err := e.dir.Partition(topic, p)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// reopen closes and reopens the data dir (a restart).
func (e *env) reopen() {
	if err := e.dir.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.openDir()
	e.log = e.partition("t", 0)
}

// kv builds a record; value "" with tomb=true is a tombstone.
func kv(key, value string) record.Record {
	return record.Record{Key: []byte(key), Value: []byte(value)}
}

func tomb(key string) record.Record { return record.Record{Key: []byte(key)} }

// produceTo appends recs to l as one batch with the given codec and
// producer fields (pid < 0: plain producer).
func (e *env) produceTo(l *localtier.Log, c codec.Codec, pid int64, txn bool, recs ...record.Record) localtier.AppendInfo {
	e.t.Helper()
	for i := range recs {
		recs[i].Offset = int64(i)
		if recs[i].Timestamp == 0 {
			recs[i].Timestamp = e.clock.ms
		}
	}
	spec := record.NewBatchSpec(0, c)
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, 0
		spec.Transactional = txn
	}
	b, err := e.enc.AppendBatch(nil, spec, recs)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := l.Append(b)
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

func (e *env) produce(recs ...record.Record) localtier.AppendInfo {
	e.t.Helper()
	return e.produceTo(e.log, codec.None, -1, false, recs...)
}

func (e *env) roll() {
	e.t.Helper()
	if err := e.log.Roll(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pass(force bool) PassReport {
	e.t.Helper()
	rep, err := RunOnce(context.Background(), e.dir, PassOptions{Force: force, Config: e.cfg})
	if err != nil {
		e.t.Fatalf("pass: %v\n%s", err, rep)
	}
	return rep
}

// got is one record as read back.
type got struct {
	Offset int64
	Key    string
	Value  string
	Tomb   bool
}

func (g got) String() string {
	if g.Tomb {
		return fmt.Sprintf("%d:%s=<tombstone>", g.Offset, g.Key)
	}
	return fmt.Sprintf("%d:%s=%s", g.Offset, g.Key, g.Value)
}

// readLog reads every batch of l from its start (checking CRCs, strictly
// increasing offsets, and that franz-go decodes every segment file), and
// returns the data records and the batches.
func readLog(t testing.TB, fsys vfs.FS, l *localtier.Log) ([]got, []record.Batch) {
	t.Helper()
	var out []got
	var batches []record.Batch
	var d record.Decoder
	off, last := l.LogStartOffset(), int64(-1)
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Data) == 0 {
			break
		}
		it := record.NewIter(res.Data)
		it.Verify = true
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.LastOffset() < off {
				continue
			}
			batches = append(batches, append(record.Batch(nil), b...))
			recs, err := d.Records(b)
			if err != nil {
				t.Fatalf("decode batch at %d: %v", b.BaseOffset(), err)
			}
			for _, r := range recs {
				if r.Offset <= last {
					t.Fatalf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				if b.IsControl() {
					continue
				}
				out = append(out, got{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Tomb: r.Value == nil})
			}
			off = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	checkKmsg(t, fsys, l)
	return out, batches
}

// checkKmsg decodes every batch of every segment file with franz-go:
// framing, CRC-32C, decompression and each record.
func checkKmsg(t testing.TB, fsys vfs.FS, l *localtier.Log) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, s := range l.Segments() {
		data := readFile(t, fsys, s.Path)
		for pos := 0; pos < len(data); {
			if len(data) >= pos+17 && data[pos+16] < 2 {
				// A legacy (magic 0/1) message: not a record batch.
				pos += 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
				continue
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(data[pos:]); err != nil {
				t.Fatalf("%s at %d: kmsg: %v", s.Path, pos, err)
			}
			end := pos + 12 + int(rb.Length)
			if got := crc32.Checksum(data[pos+21:end], castagnoli); got != uint32(rb.CRC) {
				t.Fatalf("%s at %d: CRC %08x, kmsg read %08x", s.Path, pos, got, uint32(rb.CRC))
			}
			raw := rb.Records
			if c := rb.Attributes & 7; c != 0 && len(raw) > 0 {
				var err error
				if raw, err = kgo.DefaultDecompressor().Decompress(raw, kgo.CompressionCodecType(c)); err != nil {
					t.Fatalf("%s at %d: franz-go decompress: %v", s.Path, pos, err)
				}
			}
			for i := int32(0); i < rb.NumRecords; i++ {
				var r kmsg.Record
				if err := r.ReadFrom(raw); err != nil {
					t.Fatalf("%s at %d: kmsg record %d: %v", s.Path, pos, i, err)
				}
				_, n := binary.Varint(raw)
				raw = raw[n+int(r.Length):]
			}
			if len(raw) != 0 {
				t.Fatalf("%s at %d: %d bytes after %d records", s.Path, pos, len(raw), rb.NumRecords)
			}
			pos = end
		}
	}
}

func readFile(t testing.TB, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, fi.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && fi.Size() > 0 {
		t.Fatal(err)
	}
	return buf
}

func (e *env) read() []got {
	e.t.Helper()
	recs, _ := readLog(e.t, e.fs, e.log)
	return recs
}

func show(recs []got) string {
	s := make([]string, len(recs))
	for i, r := range recs {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

func offsetsOf(recs []got) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

// metricValue reads a counter or gauge.
func metricValue(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatal("not a counter or gauge")
	return 0
}
