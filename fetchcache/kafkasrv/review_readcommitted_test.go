package kafkasrv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// reviewFetch sends one Fetch of topic-partition at offset and returns the
// partition's answer, decoded by kmsg.
func reviewFetch(t *testing.T, addr, topic string, partition int32, offset int64, isolation int8, maxBytes, partMax int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	return fetchkit.FetchWith(t, fetchkit.ByNameClient(t, addr), topic, partition, offset, isolation, maxBytes, partMax)
}

// reviewServe uploads e's rolled segments to a new bucket and serves it
// alone (fetch mode) over Kafka; it returns the listener's address.
func reviewServe(t *testing.T, e *fetchkit.Env) string {
	t.Helper()
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	_, remote := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 8 << 20}, fetchcache.RemoteCatalogOptions{})
	return startKafka(t, remote, KafkaOptions{})
}

// reviewBatches decodes a partition's record batches with kmsg.
func reviewBatches(t *testing.T, data []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(data) >= 12 {
		n := int(int32(uint32(data[8])<<24|uint32(data[9])<<16|uint32(data[10])<<8|uint32(data[11]))) + 12
		if n > len(data) {
			break
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data[:n]); err != nil {
			t.Fatalf("kmsg decode: %v", err)
		}
		out = append(out, b)
		data = data[n:]
	}
	return out
}

// TestReviewRemoteReadCommittedAbortMarkerNotTiered: in fetch mode
// (the bucket only), a transaction whose records were uploaded but whose
// abort marker is still in the source's active segment (not uploaded) is
// not yet known to be aborted. A READ_COMMITTED Fetch must not hand its
// records out as committed: Kafka's last stable offset stops before the
// first offset of a transaction the log does not show resolved.
func TestReviewRemoteReadCommittedAbortMarkerNotTiered(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("txn", 1, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "1048576"})
	l := e.Log("txn", 0)
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(5, ts0, "plain"))
	aborted := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, PID: 7, Txn: true}, fetchkit.GenRecs(5, ts0+100, "aborted"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(5, ts0+200, "later"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	// The abort marker lands in the active segment, which is not uploaded.
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	addr := reviewServe(t, e)

	p := reviewFetch(t, addr, "txn", 0, 0, 1, 1<<20, 1<<20)
	if p.ErrorCode != 0 {
		t.Fatalf("error code %d", p.ErrorCode)
	}
	listed := map[int64]int64{}
	for _, a := range p.AbortedTransactions {
		listed[a.ProducerID] = a.FirstOffset
	}
	for _, b := range reviewBatches(t, p.RecordBatches) {
		if b.ProducerID != 7 {
			continue
		}
		if first, ok := listed[7]; ok && first <= b.FirstOffset {
			continue // the consumer drops it
		}
		t.Fatalf("READ_COMMITTED fetch returned the records %d-%d of producer 7's transaction (aborted; its marker not tiered yet) as committed: last stable offset %d, high watermark %d, aborted transactions %+v",
			b.FirstOffset, b.FirstOffset+int64(b.LastOffsetDelta), p.LastStableOffset, p.HighWatermark, p.AbortedTransactions)
	}
	if p.LastStableOffset > aborted[0].Offset {
		t.Fatalf("last stable offset %d is past the first offset %d of a transaction the bucket does not show resolved", p.LastStableOffset, aborted[0].Offset)
	}
}

// reviewTxnLog writes plain [0,5), producer 7's aborted transaction [5,10),
// a roll, plain [10,15), a roll, then the abort marker (15) and plain
// [16,21) in the active segment. It returns what READ_COMMITTED reads.
func reviewTxnLog(t *testing.T, e *fetchkit.Env, topic string) (committed []fetchkit.Rec) {
	t.Helper()
	e.Topic(topic, 1, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "1048576"})
	l := e.Log(topic, 0)
	committed = append(committed, e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(5, ts0, "plain"))...)
	e.Produce(l, fetchkit.ProduceOpts{PID: 7, Txn: true}, fetchkit.GenRecs(5, ts0+100, "aborted"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	committed = append(committed, e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(5, ts0+200, "later"))...)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	committed = append(committed, e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(5, ts0+300, "last"))...)
	return committed
}

// TestReviewCombinedReadCommittedAcrossBoundary: serve mode, the
// aborted transaction's records only in the bucket, its marker on local
// disk: READ_COMMITTED consumers skip them.
func TestReviewCombinedReadCommittedAcrossBoundary(t *testing.T) {
	e := fetchkit.NewEnv(t)
	committed := reviewTxnLog(t, e, "txn")
	l := e.Log("txn", 0)
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	if _, err := l.DeleteSegments(15); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 15 {
		t.Fatalf("local log start %d", l.LogStartOffset())
	}
	_, remote := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 8 << 20}, fetchcache.RemoteCatalogOptions{})
	addr := startKafka(t, fetchcache.NewCombinedCatalog(e.Dir, remote), KafkaOptions{})
	p := reviewFetch(t, addr, "txn", 0, 0, 1, 1<<20, 1<<20)
	if p.ErrorCode != 0 || p.LogStartOffset != 0 || p.HighWatermark != 21 || p.LastStableOffset != 21 {
		t.Fatalf("partition answer: error %d log start %d hw %d lso %d", p.ErrorCode, p.LogStartOffset, p.HighWatermark, p.LastStableOffset)
	}
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 5 {
		t.Fatalf("aborted transactions %+v, want producer 7 from 5", p.AbortedTransactions)
	}
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed)
}

// TestReviewRemoteReadCommittedMarkerInLaterSegment: fetch mode, the
// transaction's records and its marker in different uploaded segments.
func TestReviewRemoteReadCommittedMarkerInLaterSegment(t *testing.T) {
	e := fetchkit.NewEnv(t)
	committed := reviewTxnLog(t, e, "txn")
	l := e.Log("txn", 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	addr := reviewServe(t, e)
	for _, from := range []int64{0, 7} {
		p := reviewFetch(t, addr, "txn", 0, from, 1, 1<<20, 1<<20)
		if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 5 {
			t.Fatalf("from %d: aborted transactions %+v, want producer 7 from 5", from, p.AbortedTransactions)
		}
	}
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed)
}

// TestReviewRemoteKIP74FirstBatchWhole: from the bucket, a first batch
// larger than both the partition's and the request's max bytes is returned
// whole, at the segment boundary, mid-batch, and at the log start.
func TestReviewRemoteKIP74FirstBatchWhole(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("big", 1, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "1048576"})
	l := e.Log("big", 0)
	recs := fetchkit.GenRecs(40, ts0, "big")
	for i := range recs {
		recs[i].Value = make([]byte, 300)
	}
	e.Produce(l, fetchkit.ProduceOpts{Per: 10}, recs[:20])
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	e.Produce(l, fetchkit.ProduceOpts{Per: 10}, recs[20:])
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	addr := reviewServe(t, e)
	for _, c := range []struct{ off, base int64 }{{0, 0}, {13, 10}, {20, 20}, {39, 30}} {
		p := reviewFetch(t, addr, "big", 0, c.off, 0, 100, 50)
		bs := reviewBatches(t, p.RecordBatches)
		if p.ErrorCode != 0 || len(bs) != 1 || bs[0].FirstOffset != c.base || p.HighWatermark != 40 || p.LogStartOffset != 0 {
			t.Fatalf("fetch at %d: error %d, %d batches, hw %d, log start %d", c.off, p.ErrorCode, len(bs), p.HighWatermark, p.LogStartOffset)
		}
	}
	for _, off := range []int64{-1, 41} {
		if p := reviewFetch(t, addr, "big", 0, off, 0, 100, 50); p.ErrorCode != 1 || p.HighWatermark != 40 {
			t.Fatalf("fetch at %d: error %d hw %d, want OFFSET_OUT_OF_RANGE", off, p.ErrorCode, p.HighWatermark)
		}
	}
	if p := reviewFetch(t, addr, "big", 0, 40, 0, 100, 50); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch at the high watermark: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if p := reviewFetch(t, addr, "big", 5, 0, 0, 100, 50); p.ErrorCode != 3 {
		t.Fatalf("partition past the count: error %d, want UNKNOWN_TOPIC_OR_PARTITION", p.ErrorCode)
	}
}
