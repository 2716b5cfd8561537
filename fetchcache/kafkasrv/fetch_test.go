package kafkasrv

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

func TestKafkaConsumeCodecsAcrossSegments(t *testing.T) {
	e := fetchkit.NewEnv(t)
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}
	e.Topic("codecs", len(codecs), nil)
	want := map[int32][]fetchkit.Rec{}
	for i, c := range codecs {
		l := e.Log("codecs", int32(i))
		want[int32(i)] = e.Produce(l, fetchkit.ProduceOpts{Codec: c, Per: 7}, fetchkit.GenRecs(120, ts0, c.String()))
		if n := len(l.Segments()); n < 3 {
			t.Fatalf("codec %v: %d segments, want several", c, n)
		}
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	for i, c := range codecs {
		p := int32(i)
		t.Run(c.String(), func(t *testing.T) {
			w := want[p]
			t.Run("start", func(t *testing.T) {
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AtStart(), len(w)), w)
			})
			t.Run("absolute", func(t *testing.T) {
				// Mid-batch: the batch holding 53 is returned whole, the
				// client drops the records before 53.
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().At(53), len(w)-53), w[53:])
			})
			t.Run("timestamp", func(t *testing.T) {
				// First record with timestamp >= ts0+10*77+5 is offset 78.
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AfterMilli(ts0+775), len(w)-78), w[78:])
			})
			t.Run("small_fetches", func(t *testing.T) {
				got := testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AtStart(), len(w),
					kgo.FetchMaxBytes(300), kgo.FetchMaxPartitionBytes(200))
				fetchkit.SameRecs(t, got, w)
			})
		})
	}
}

func TestKafkaConsumeCompactedWithGaps(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("compacted", 1, map[string]string{
		"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0",
		"delete.retention.ms": "86400000", "internal.segment.bytes": "2048",
	})
	l := e.Log("compacted", 0)
	var recs []fetchkit.Rec
	now := time.Now().UnixMilli()
	for i := range 160 {
		k := i % 23 // later, only a few keys are rewritten: the survivors leave gaps
		if i >= 100 {
			k = i % 5
		}
		r := fetchkit.Rec{Timestamp: now + int64(i), Key: []byte("key-" + strconv.Itoa(k)), Value: []byte("write " + strconv.Itoa(i))}
		if i == 150 {
			r.Value = nil // a tombstone survives (delete.retention.ms not passed)
		}
		recs = append(recs, r)
	}
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.LZ4, Per: 4}, recs)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	rep, err := compactor.RunOnce(context.Background(), e.Dir, compactor.PassOptions{Force: true, Config: compactor.Config{DedupeBufferSize: 1 << 20}})
	if err != nil {
		t.Fatalf("compact: %v (%+v)", err, rep)
	}
	want := testrecs.FromLog(t, l)
	gaps := 0
	for i := 1; i < len(want); i++ {
		if want[i].Offset != want[i-1].Offset+1 {
			gaps++
		}
	}
	if gaps == 0 || len(want) >= len(recs) {
		t.Fatalf("compaction left %d of %d records with %d gaps; the test needs gaps", len(want), len(recs), gaps)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "compacted", 0, kgo.NewOffset().AtStart(), len(want)), want)
	// Starting inside a gap serves from the next record present.
	var gapAt int64 = -1
	var from int
	for i := 1; i < len(want); i++ {
		if want[i].Offset > want[i-1].Offset+1 {
			gapAt, from = want[i-1].Offset+1, i
			break
		}
	}
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "compacted", 0, kgo.NewOffset().At(gapAt), len(want)-from), want[from:])
}

func TestKafkaReadCommitted(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("txn", 1, nil)
	l := e.Log("txn", 0)
	var committed, all []fetchkit.Rec
	plain := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Zstd}, fetchkit.GenRecs(10, ts0, "plain"))
	aborted := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Zstd, PID: 7, Txn: true}, fetchkit.GenRecs(8, ts0+1000, "aborted"))
	kept := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Snappy, PID: 8, Txn: true}, fetchkit.GenRecs(6, ts0+2000, "kept"))
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(8, 0, true, 1); err != nil {
		t.Fatal(err)
	}
	after := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(5, ts0+3000, "after"))
	committed = append(append(append(committed, plain...), kept...), after...)
	all = append(append(append(append(all, plain...), aborted...), kept...), after...)
	if got := l.AbortedTxns(0, l.LogEndOffset()); len(got) != 1 {
		t.Fatalf("setup: aborted txns %+v", got)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	t.Run("read_committed", func(t *testing.T) {
		fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed)
	})
	t.Run("read_uncommitted", func(t *testing.T) {
		fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(all)), all)
	})
}

// TestKafkaReadCommittedStopsAtOpenTxn: records at or past the last stable
// offset are not served to READ_COMMITTED consumers, and the high watermark
// still says where the log ends.
func TestKafkaReadCommittedStopsAtOpenTxn(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("open", 1, nil)
	l := e.Log("open", 0)
	plain := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(4, ts0, "plain"))
	e.Produce(l, fetchkit.ProduceOpts{PID: 9, Txn: true}, fetchkit.GenRecs(3, ts0, "open"))
	if lso := l.LastStableOffset(); lso != 4 {
		t.Fatalf("setup: lso %d", lso)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.IsolationLevel, req.SessionEpoch = 1<<20, 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "open"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 7 || p.LastStableOffset != 4 || p.LogStartOffset != 0 {
		t.Fatalf("partition answer %+v", p)
	}
	it := record.NewIter(p.RecordBatches)
	var last int64 = -1
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		last = b.LastOffset()
	}
	if last != plain[len(plain)-1].Offset || it.Err() != nil {
		t.Fatalf("read_committed returned batches up to %d (err %v), want up to %d", last, it.Err(), plain[len(plain)-1].Offset)
	}
	if p.AbortedTransactions == nil {
		t.Fatal("read_committed answer has null aborted transactions")
	}
}

func TestKafkaFetchWaitsForNewData(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("live", 1, nil)
	l := e.Log("live", 0)
	first := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(3, ts0, "first"))
	addr := startKafka(t, e.Cat, KafkaOptions{MaxFetchWait: 2 * time.Second})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(2*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"live": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []fetchkit.Rec
	collect := func(n int) {
		for len(got) < n && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, fetchkit.Rec{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value})
			})
		}
	}
	collect(3)
	// The consumer now waits at the log end; new data reaches it.
	second := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(2, ts0+100, "second"))
	collect(5)
	want := append(first, second...)
	for i := range want {
		want[i].Headers = nil
	}
	for i := range got {
		got[i].Headers = nil
	}
	fetchkit.SameRecs(t, got, want)
}

func TestKafkaFetchErrors(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("f", 1, nil)
	e.Produce(e.Log("f", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(12, ts0, "f"))
	m := fetchcache.NewServeMetrics(nil)
	addr := startKafka(t, e.Cat, KafkaOptions{Metrics: m})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	fetch := func(topic string, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch = 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch("f", 13); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 12 || p.RecordBatches == nil {
		t.Fatalf("past the end: %+v", p)
	}
	if p := fetch("nope", 0); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
	if p := fetch("f", 12); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 12 {
		t.Fatalf("at the end: %+v", p)
	}
	for code, want := range map[string]float64{fetchcache.CodeOffsetOutOfRange: 1, fetchcache.CodeUnknownTopicOrPartition: 1} {
		if got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, code)); got != want {
			t.Errorf("kafka requests{%s} = %v, want %v", code, got, want)
		}
	}
}

// TestKafkaFetchOutOfRangeNamesWholeRange: in serve, a Fetch past the end of
// a partition whose older offsets are in the bucket answers
// OFFSET_OUT_OF_RANGE with the whole readable range — log_start_offset the
// bucket's start, not the local log's — since the Fetch response carries no
// error message to say more.
func TestKafkaFetchOutOfRangeNamesWholeRange(t *testing.T) {
	e := fetchkit.NewEnv(t)
	l, mem := fetchkit.OffloadedTopic(t, e, "cold", 5)
	remote, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startKafka(t, fetchcache.NewCombinedCatalog(e.Dir, remote), KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "cold"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = l.LogEndOffset()+10, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 0 || p.HighWatermark != l.LogEndOffset() {
		t.Fatalf("past the end: error %d, log start %d, high watermark %d; want OFFSET_OUT_OF_RANGE with [0, %d) (local start %d)",
			p.ErrorCode, p.LogStartOffset, p.HighWatermark, l.LogEndOffset(), l.LogStartOffset())
	}
}

// staleCatalog serves partitions whose offsets come from a manifest cached
// before the last upload (the log end capped at end) and whose store
// refuses the read that would re-read it, as an overloaded gets gate does.
type staleCatalog struct {
	fetchcache.Catalog
	end int64
}

func (c staleCatalog) Partition(ctx context.Context, topic string, partition int32) (fetchcache.Partition, error) {
	p, err := c.Catalog.Partition(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	return stalePart{p, c.end}, nil
}

type stalePart struct {
	fetchcache.Partition
	end int64
}

func (p stalePart) Offsets(ctx context.Context) (fetchcache.Offsets, error) {
	off, err := p.Partition.Offsets(ctx)
	off.LogEnd, off.LastStable = min(off.LogEnd, p.end), min(off.LastStable, p.end)
	return off, err
}

func (p stalePart) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	if offset > p.end || offset < 0 {
		return nil, &gate.OverloadedError{Gate: "gets", RetryAfter: 50 * time.Millisecond}
	}
	return p.Partition.Read(ctx, offset, maxBytes)
}

// TestKafkaFetchPastCachedEndOverloaded: a fetch offset past the cached log
// end is out of range only once the re-read manifest says so. When the
// store refuses that re-read (overloaded) the Fetch is throttled, not
// answered OFFSET_OUT_OF_RANGE, which would send the client to its
// auto.offset.reset (a replay from the start, or skipped records). An
// offset below the cached log start is out of range whatever the re-read
// says: a cached log start is never above the real one.
func TestKafkaFetchPastCachedEndOverloaded(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("r", 1, nil)
	e.Produce(e.Log("r", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(20, ts0, "r"))
	addr := startKafka(t, staleCatalog{Catalog: e.Cat, end: 10}, KafkaOptions{})
	rc := fetchkit.DialRaw(t, addr)
	fetch := func(offset int64) (kmsg.FetchResponseTopicPartition, int32) {
		t.Helper()
		q := fetchOf(0, 1<<20, "r", int32(0))
		q.Topics[0].Partitions[0].FetchOffset = offset
		resp := kmsg.NewPtrFetchResponse()
		if err := rc.Request(1, q, resp); err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0], resp.ThrottleMillis
	}
	if p, throttle := fetch(15); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || throttle <= 0 { // the log ends at 20
		t.Fatalf("fetch at 15 (log end 20, cached 10, re-read refused): error %d, %d bytes, throttle %d ms; want no error, no data and a throttle",
			p.ErrorCode, len(p.RecordBatches), throttle)
	}
	if p, _ := fetch(-1); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at -1 (re-read refused): error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
}
