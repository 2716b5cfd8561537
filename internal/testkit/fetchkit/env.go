// Package fetchkit is the fetch service's test kit: a local log dir with
// topics and generated records (Env), a test PKI and log capture for the
// listener security tests, and the credentials those tests share. Tests only.
package fetchkit

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// Rec is a record as produced and as expected back.
type Rec = testrecs.Rec

// SameRecs compares records field by field, null-ness and headers included.
func SameRecs(t testing.TB, got, want []Rec) {
	t.Helper()
	testrecs.Same(t, got, want, true)
}

// Env is a local-tier data dir in t.TempDir() served by a LocalCatalog.
type Env struct {
	T   testing.TB
	Dir *localtier.LogDir
	Cat *fetchcache.LocalCatalog
	enc record.Encoder
	seq map[int64]int32 // next base sequence per producer id
}

// NewEnv makes an Env whose topics have no topic ID (as releases before
// topic IDs created them): uploaded, they are the bucket's name-only
// lineage, and the fetch service does not advertise Fetch v13 (by topic ID)
// for them, so the tests' requests built by topic name stay by name.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	return newEnv(t, true)
}

// NewEnvWithTopicIDs makes an Env whose topics get topic IDs, as serve's
// data dir gives them now: uploaded, each is its ID's lineage.
func NewEnvWithTopicIDs(t testing.TB) *Env {
	t.Helper()
	return newEnv(t, false)
}

func newEnv(t testing.TB, noIDs bool) *Env {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{WithoutTopicIDs: noIDs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &Env{T: t, Dir: d, Cat: fetchcache.NewLocalCatalog(d), seq: map[int64]int32{}}
}

// Topic creates a topic with small segments (so reads cross segment
// boundaries) unless cfg says otherwise.
func (e *Env) Topic(name string, partitions int, cfg map[string]string) {
	e.T.Helper()
	all := map[string]string{"internal.segment.bytes": "1024", "index.interval.bytes": "256"}
	for k, v := range cfg {
		all[k] = v
	}
	if _, err := e.Dir.CreateTopic(name, partitions, all); err != nil {
		e.T.Fatal(err)
	}
}

func (e *Env) Log(topic string, p int32) *localtier.Log {
	e.T.Helper()
	l, err := e.Dir.Partition(topic, p)
	if err != nil {
		e.T.Fatal(err)
	}
	return l
}

// GenRecs makes n varied records: text and binary keys and values, null
// keys, empty values, headers (one with a null value), timestamps ts0,
// ts0+10, ...
func GenRecs(n int, ts0 int64, tag string) []Rec {
	out := make([]Rec, n)
	for i := range out {
		r := Rec{Timestamp: ts0 + int64(i)*10}
		switch i % 7 {
		case 3:
			r.Key = nil
		case 5:
			r.Key = []byte{0xff, 0xfe, byte(i)}
		default:
			r.Key = []byte(fmt.Sprintf("%s-key-%d", tag, i))
		}
		switch i % 11 {
		case 4:
			r.Value = []byte{}
		case 6:
			r.Value = []byte{0x80, 0x00, byte(i), 0xc3}
		default:
			r.Value = bytes.Repeat([]byte(fmt.Sprintf("%s value %d ", tag, i)), 1+i%5)
		}
		if i%4 == 1 {
			r.Headers = []record.Header{{Key: []byte("h1"), Value: []byte(fmt.Sprint(i))}, {Key: []byte("nullh")}}
		}
		out[i] = r
	}
	return out
}

// ProduceOpts are the producer fields of produced batches.
type ProduceOpts struct {
	Codec codec.Codec
	Per   int   // records per batch (default 5)
	PID   int64 // producer id; 0 means a plain producer
	Txn   bool
}

// Produce appends recs to l in batches and returns them with the offsets
// the log assigned.
func (e *Env) Produce(l *localtier.Log, o ProduceOpts, recs []Rec) []Rec {
	e.T.Helper()
	if o.Per <= 0 {
		o.Per = 5
	}
	out := append([]Rec(nil), recs...)
	for start := 0; start < len(out); start += o.Per {
		chunk := out[start:min(start+o.Per, len(out))]
		rs := make([]record.Record, len(chunk))
		for i, r := range chunk {
			rs[i] = record.Record{Offset: int64(i), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
		}
		spec := record.NewBatchSpec(0, o.Codec)
		if o.PID > 0 {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = o.PID, 0, e.seq[o.PID]
			spec.Transactional = o.Txn
			e.seq[o.PID] += int32(len(rs))
		}
		b, err := e.enc.AppendBatch(nil, spec, rs)
		if err != nil {
			e.T.Fatal(err)
		}
		info, err := l.Append(b)
		if err != nil {
			e.T.Fatal(err)
		}
		for i := range chunk {
			chunk[i].Offset = info.FirstOffset + int64(i)
		}
	}
	return out
}

func CounterValue(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Ts0 is the first record timestamp the fetch service's tests use.
const Ts0 = int64(1_700_000_000_000)
