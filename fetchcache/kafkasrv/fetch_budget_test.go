package kafkasrv

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// fetchOf is a Fetch v12 of the given (topic, partition) pairs from offset
// 0, in order, repeats included.
func fetchOf(maxWait int32, partMax int32, pairs ...any) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 12, maxWait, 50<<20, -1
	for i := 0; i < len(pairs); i += 2 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = pairs[i].(string)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = pairs[i+1].(int32), partMax
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func batchBytes(r *kmsg.FetchResponse) (n int) {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}

// TestKafkaFetchCollapsesRepeats: a Fetch naming one partition 3,000 times
// (and its topic twice) is answered once for it, as Kafka's map of fetch
// data does, not 3,000 times: the response is one partition's bytes.
func TestKafkaFetchCollapsesRepeats(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("dup", 2, nil)
	e.Produce(e.Log("dup", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(400, ts0, "dup"))
	e.Produce(e.Log("dup", 1), fetchkit.ProduceOpts{}, fetchkit.GenRecs(40, ts0, "dup1"))
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()

	one, err := fetchOf(0, 1<<20, "dup", int32(0)).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []any
	for range 3000 {
		pairs = append(pairs, "dup", int32(0))
	}
	pairs = append(pairs, "dup", int32(1), "dup", int32(0))
	req := fetchOf(0, 1<<20, pairs...)
	// Also one topic entry that repeats its partition.
	req.Topics[1].Partitions = append(req.Topics[1].Partitions, req.Topics[1].Partitions[0])
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("response has %d topics, first with %d partitions; want one topic with partitions 0 and 1", len(resp.Topics), len(resp.Topics[0].Partitions))
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if p0.Partition != 0 || p1.Partition != 1 || p0.ErrorCode != 0 || p1.ErrorCode != 0 {
		t.Fatalf("partitions %d (err %d), %d (err %d); want 0 then 1 (first-appearance order), no errors", p0.Partition, p0.ErrorCode, p1.Partition, p1.ErrorCode)
	}
	if got, want := len(p0.RecordBatches), batchBytes(one); got != want || want == 0 {
		t.Fatalf("partition 0 answered with %d bytes, alone %d", got, want)
	}
}

// TestKafkaFetchPartitionCap: a Fetch naming more distinct partitions than
// MaxFetchPartitions is refused whole with INVALID_REQUEST, before any
// partition is looked up, and its connection closed; repeats do not count.
func TestKafkaFetchPartitionCap(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("cap", 8, nil)
	cat := &countingCatalog{Catalog: e.Cat}
	addr := startKafka(t, cat, KafkaOptions{MaxFetchPartitions: 4})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()
	var within, over []any
	for p := range int32(4) {
		within = append(within, "cap", p, "cap", p)
	}
	for p := range int32(5) {
		over = append(over, "cap", p)
	}
	resp, err := fetchOf(0, 1<<10, within...).RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 4 {
		t.Fatalf("4 distinct partitions named twice: %v %+v", err, resp)
	}
	before := cat.lookups.Load()
	resp, err = fetchOf(0, 1<<10, over...).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 0 {
		t.Fatalf("5 partitions over a cap of 4: error %d, %d topics; want INVALID_REQUEST and none", resp.ErrorCode, len(resp.Topics))
	}
	if n := cat.lookups.Load() - before; n != 0 {
		t.Fatalf("refused fetch looked up %d partitions", n)
	}
}

// TestKafkaFetchResponseBudget: the bytes of Fetch responses in flight come
// from one budget. With none free, a Fetch waits its max wait and is then
// throttled, with no data and no error; with room for part of it, it
// answers what fits; and every byte goes back once responses are written.
func TestKafkaFetchResponseBudget(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("b", 2, nil)
	for p := range int32(2) {
		e.Produce(e.Log("b", p), fetchkit.ProduceOpts{}, fetchkit.GenRecs(400, ts0, "b"))
	}
	// Room for one partition's reservation and a little: once the first
	// partition keeps its few hundred bytes, the second's 8 KiB do not fit.
	const partMax = 8 << 10
	const capacity = partMax + 256
	s, addr := startKafkaServer(t, e.Cat, KafkaOptions{MaxInFlightResponseBytes: capacity})
	g := s.respBudget
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()
	drained := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for g.InFlight() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("response budget still holds %d bytes after the responses were written", g.InFlight())
			}
			time.Sleep(time.Millisecond)
		}
	}

	t.Run("none_free_throttles", func(t *testing.T) {
		if !g.TryStart(capacity) { // other responses hold it all
			t.Fatal("budget not free at start")
		}
		start := time.Now()
		resp, err := fetchOf(50, partMax, "b", int32(0)).RequestWith(ctx, cl)
		g.Done(capacity)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if resp.ThrottleMillis <= 0 || p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 400 {
			t.Fatalf("fetch without budget: throttle %d ms, partition %+v; want a throttle, no data, no error", resp.ThrottleMillis, p)
		}
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Fatalf("answered after %v, before its max wait of 50ms", waited)
		}
		drained(t)
	})
	t.Run("room_for_part_answers_what_fits", func(t *testing.T) {
		resp, err := fetchOf(50, partMax, "b", int32(0), "b", int32(1)).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[1].Partitions[0]
		if resp.ThrottleMillis != 0 || len(p0.RecordBatches) == 0 || len(p1.RecordBatches) != 0 || p1.ErrorCode != 0 || p1.HighWatermark != 400 {
			t.Fatalf("throttle %d, p0 %d bytes, p1 %d bytes (err %d, hwm %d); want p0's data only, p1 with its offsets", resp.ThrottleMillis, len(p0.RecordBatches), len(p1.RecordBatches), p1.ErrorCode, p1.HighWatermark)
		}
		drained(t)
	})
	t.Run("free_again_serves", func(t *testing.T) {
		resp, err := fetchOf(50, partMax, "b", int32(1)).RequestWith(ctx, cl)
		if err != nil || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 || resp.ThrottleMillis != 0 {
			t.Fatalf("fetch with the budget free: %v %+v", err, resp)
		}
		drained(t)
	})
}

// countingCatalog counts partition lookups.
type countingCatalog struct {
	fetchcache.Catalog
	lookups atomic.Int64
}

func (c *countingCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	c.lookups.Add(1)
	return c.Catalog.Partition(ctx, topic, p)
}

// TestKafkaFetchResponseCap: one response carries at most the request's
// MaxBytes and the listener's FetchMaxBytes (Kafka's fetch.max.bytes),
// whichever is smaller, past the first batch (KIP-74: the first partition
// with data gets one whole batch even when it is larger).
func TestKafkaFetchResponseCap(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("cap", 3, map[string]string{"internal.segment.bytes": "1048576"})
	for p := range int32(3) {
		e.Produce(e.Log("cap", p), fetchkit.ProduceOpts{}, fetchkit.GenRecs(600, ts0, "cap"))
	}
	const brokerCap = 6000
	addr := startKafka(t, e.Cat, KafkaOptions{FetchMaxBytes: brokerCap})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	tests := []struct {
		name     string
		maxBytes int32
		want     int // the cap
	}{
		{"request_below_broker", 2500, 2500},
		{"request_above_broker", 50 << 20, brokerCap},
		{"request_none", 0, brokerCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fetchOf(0, 1<<20, "cap", int32(0), "cap", int32(1), "cap", int32(2))
			req.MaxBytes = tt.maxBytes
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			first := 0 // the first batch, which may pass the cap
			for _, rt := range resp.Topics {
				if b := rt.Partitions[0].RecordBatches; first == 0 && len(b) > 0 {
					first = int(binary.BigEndian.Uint32(b[8:12])) + 12
				}
			}
			if got := batchBytes(resp); got > max(tt.want, first) || got == 0 {
				t.Fatalf("response of %d record bytes, want 1 to %d", got, max(tt.want, first))
			}
		})
	}
}

// TestKafkaFetchBatchLargerThanBudget: a batch larger than the whole
// response budget is served (alone, holding all of it), as KIP-74 returns
// a first batch larger than the limits, instead of the Fetch being
// throttled at that offset for ever.
func TestKafkaFetchBatchLargerThanBudget(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("big", 1, nil)
	recs := make([]fetchkit.Rec, 4)
	for i := range recs {
		recs[i] = fetchkit.Rec{Timestamp: ts0 + int64(i), Value: make([]byte, 3000)}
	}
	e.Produce(e.Log("big", 0), fetchkit.ProduceOpts{Per: 4}, recs) // one batch of ~12 KB
	const capacity = 4 << 10
	s, addr := startKafkaServer(t, e.Cat, KafkaOptions{MaxInFlightResponseBytes: capacity})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	resp, err := fetchOf(50, 1<<10, "big", int32(0)).RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if resp.ThrottleMillis != 0 || p.ErrorCode != 0 || len(p.RecordBatches) <= capacity {
		t.Fatalf("fetch of a %d-byte budget's larger batch: throttle %d ms, error %d, %d bytes; want the whole batch",
			capacity, resp.ThrottleMillis, p.ErrorCode, len(p.RecordBatches))
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.respBudget.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("response budget holds %d bytes after the response was written", s.respBudget.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
}
