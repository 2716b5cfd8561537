package fetchcache

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// testRec is a record as produced and as expected back.
type testRec = testrecs.Rec

// sameRecs compares records field by field, null-ness and headers included.
func sameRecs(t testing.TB, got, want []testRec) {
	t.Helper()
	testrecs.Same(t, got, want, true)
}

// testEnv is a local-tier data dir in t.TempDir() served by a LocalCatalog.
type testEnv struct {
	t   testing.TB
	dir *localtier.LogDir
	cat *LocalCatalog
	enc record.Encoder
	seq map[int64]int32 // next base sequence per producer id
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return &testEnv{t: t, dir: d, cat: NewLocalCatalog(d), seq: map[int64]int32{}}
}

// topic creates a topic with small segments (so reads cross segment
// boundaries) unless cfg says otherwise.
func (e *testEnv) topic(name string, partitions int, cfg map[string]string) {
	e.t.Helper()
	all := map[string]string{"internal.segment.bytes": "1024", "index.interval.bytes": "256"}
	for k, v := range cfg {
		all[k] = v
	}
	if _, err := e.dir.CreateTopic(name, partitions, all); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) log(topic string, p int32) *localtier.Log {
	e.t.Helper()
	l, err := e.dir.Partition(topic, p)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// genRecs makes n varied records: text and binary keys and values, null
// keys, empty values, headers (one with a null value), timestamps ts0,
// ts0+10, ...
func genRecs(n int, ts0 int64, tag string) []testRec {
	out := make([]testRec, n)
	for i := range out {
		r := testRec{Timestamp: ts0 + int64(i)*10}
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

// produceOpts are the producer fields of produced batches.
type produceOpts struct {
	codec codec.Codec
	per   int   // records per batch (default 5)
	pid   int64 // producer id; 0 means a plain producer
	txn   bool
}

// produce appends recs to l in batches and returns them with the offsets
// the log assigned.
func (e *testEnv) produce(l *localtier.Log, o produceOpts, recs []testRec) []testRec {
	e.t.Helper()
	if o.per <= 0 {
		o.per = 5
	}
	out := append([]testRec(nil), recs...)
	for start := 0; start < len(out); start += o.per {
		chunk := out[start:min(start+o.per, len(out))]
		rs := make([]record.Record, len(chunk))
		for i, r := range chunk {
			rs[i] = record.Record{Offset: int64(i), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
		}
		spec := record.NewBatchSpec(0, o.codec)
		if o.pid > 0 {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = o.pid, 0, e.seq[o.pid]
			spec.Transactional = o.txn
			e.seq[o.pid] += int32(len(rs))
		}
		b, err := e.enc.AppendBatch(nil, spec, rs)
		if err != nil {
			e.t.Fatal(err)
		}
		info, err := l.Append(b)
		if err != nil {
			e.t.Fatal(err)
		}
		for i := range chunk {
			chunk[i].Offset = info.FirstOffset + int64(i)
		}
	}
	return out
}

// startKafka serves cat over the Kafka protocol on a loopback port until
// the test ends.
func startKafka(t testing.TB, cat Catalog, o KafkaOptions) string {
	t.Helper()
	o.Catalog = cat
	if o.MaxFetchWait == 0 {
		o.MaxFetchWait = 200e6 // keep waits at the log end short in tests
	}
	if o.FetchPollInterval == 0 {
		o.FetchPollInterval = 5e6
	}
	s, err := NewKafkaServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kafka server: %v", err)
		}
	})
	return ln.Addr().String()
}

func counterValue(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
