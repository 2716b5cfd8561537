package kafkasrv

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
)

// kmsgBatches decodes a partition's record batches with franz-go's kmsg:
// how many batches, and the records they hold (their NumRecords).
func kmsgBatches(t *testing.T, data []byte) (batches, records int, first int64) {
	t.Helper()
	first = -1
	for len(data) > 0 {
		if len(data) < 12 {
			t.Fatalf("%d trailing bytes", len(data))
		}
		n := 12 + int(int32(binary.BigEndian.Uint32(data[8:12])))
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data[:n]); err != nil {
			t.Fatalf("batch %d: %v", batches, err)
		}
		if first < 0 {
			first = b.FirstOffset
		}
		batches++
		records += int(b.NumRecords)
		data = data[n:]
	}
	return batches, records, first
}

// emptiedLog is a partition "empty"/p whose segments [10, 20) and [20, 30)
// the cleaner emptied whole: they are replaced by one segment holding only
// the sentinel batch at offset 29, without records (ReplaceSegments). A read
// at 10 stops at that segment's end, after the sentinel; the next segment,
// from 30, starts with an aborted transaction of producer 7 (30-34), its
// marker (35), then 10 plain records, and 10 more records follow in the
// active segment.
func emptiedLog(t *testing.T, e *fetchkit.Env, p int32) *localtier.Log {
	t.Helper()
	l := e.Log("empty", p)
	roll := func() {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(10, ts0+int64(i)*1000, "seg"))
		roll()
	}
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, PID: 7, Txn: true}, fetchkit.GenRecs(5, ts0+3000, "aborted"))
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(10, ts0+4000, "after"))
	roll()
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(10, ts0+5000, "active"))
	fetchkit.EmptySegments(t, l, 10, 30)
	return l
}

// TestKafkaFetchGoesPastEmptyBatches: a Fetch whose read at its offset
// finds only a batch without records (here the cleaner's sentinel, at a
// segment's end) goes on reading after it, so the partition's answer holds
// records (librdkafka 2.0.2, kcat, takes an answer without records for a
// max bytes too small, and after ten fails with "Message at offset N might
// be too large to fetch"). For read_committed the aborted
// transactions cover the data read after it. The same through a remote
// partition (its reads stop at segment ends too, and come as views).
func TestKafkaFetchGoesPastEmptyBatches(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("empty", 1, map[string]string{"remote.storage.enable": "true"})
	l := emptiedLog(t, e, 0)
	if res, err := l.Read(10, 1<<20, true); err != nil || len(res.Data) == 0 {
		t.Fatalf("read at 10: %v", err)
	} else if n, recs, _ := kmsgBatches(t, res.Data); n != 1 || recs != 0 {
		t.Fatalf("setup: the log's read at 10 returns %d batches, %d records; want the sentinel alone", n, recs)
	}
	check := func(t *testing.T, addr string) {
		cl := fetchkit.ByNameClient(t, addr)
		t.Run("read_uncommitted", func(t *testing.T) {
			rp := fetchkit.FetchOne(t, cl, "empty", 0, 10)
			n, recs, first := kmsgBatches(t, rp.RecordBatches)
			if rp.ErrorCode != 0 || recs == 0 || first != 29 {
				t.Fatalf("fetch at 10: error %d, %d batches from %d, %d records; want the sentinel at 29 and the records after it", rp.ErrorCode, n, first, recs)
			}
		})
		t.Run("read_committed", func(t *testing.T) {
			rp := fetchkit.FetchWith(t, cl, "empty", 0, 10, 1, 1<<20, 1<<20)
			_, recs, _ := kmsgBatches(t, rp.RecordBatches)
			if rp.ErrorCode != 0 || recs == 0 {
				t.Fatalf("fetch at 10: error %d, %d records", rp.ErrorCode, recs)
			}
			if len(rp.AbortedTransactions) != 1 || rp.AbortedTransactions[0].ProducerID != 7 || rp.AbortedTransactions[0].FirstOffset != 30 {
				t.Fatalf("aborted transactions %+v, want producer 7 from 30", rp.AbortedTransactions)
			}
		})
	}
	t.Run("local", func(t *testing.T) { check(t, startKafka(t, e.Cat, KafkaOptions{})) })
	t.Run("remote", func(t *testing.T) {
		mem := fetchkit.Offload(t, e, l)
		_, cat := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 64 << 10, MemoryBytes: 64 << 20}, fetchcache.RemoteCatalogOptions{})
		part, err := cat.Partition(context.Background(), "empty", 0)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := fetchcache.ReadView(context.Background(), part, 10, 1<<20); err != nil || v.Len == 0 {
			t.Fatalf("remote read at 10: %v", err)
		} else if n, recs, _ := kmsgBatches(t, v.Bytes()); n != 1 || recs != 0 {
			t.Fatalf("setup: the remote read at 10 returns %d batches, %d records; want the sentinel alone", n, recs)
		}
		check(t, startKafka(t, cat, KafkaOptions{}))
	})
}

// TestKafkaFetchCutKeepsNoEmptyBatchAlone: a partition after another with
// data, left room for its batch without records but not for the batch of
// records after it, is answered empty (its records come in a later Fetch)
// rather than with the empty batch alone.
func TestKafkaFetchCutKeepsNoEmptyBatchAlone(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("empty", 2, nil)
	emptiedLog(t, e, 1)
	l0 := e.Log("empty", 0)
	e.Produce(l0, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(10, ts0, "p0"))
	res, err := l0.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	cl := fetchkit.ByNameClient(t, startKafka(t, e.Cat, KafkaOptions{}))
	req := fetchOf(0, 1<<20, "empty", int32(0), "empty", int32(1))
	req.Topics[1].Partitions[0].FetchOffset = 10
	// Partition 0's batches, and room for the sentinel (61 bytes) only.
	req.MaxBytes = int32(len(res.Data) + 100)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[1].Partitions[0]
	if len(p0.RecordBatches) != len(res.Data) {
		t.Fatalf("partition 0: %d bytes, want its %d", len(p0.RecordBatches), len(res.Data))
	}
	if n, recs, first := kmsgBatches(t, p1.RecordBatches); p1.ErrorCode != 0 || n != 0 {
		t.Fatalf("partition 1: error %d, %d batches from %d, %d records; want none", p1.ErrorCode, n, first, recs)
	}
	// First in the next Fetch, it gets its records.
	req = fetchOf(0, 1<<20, "empty", int32(1))
	req.Topics[0].Partitions[0].FetchOffset = 10
	if resp, err = req.RequestWith(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	if _, recs, _ := kmsgBatches(t, resp.Topics[0].Partitions[0].RecordBatches); recs == 0 {
		t.Fatal("partition 1 alone: no records")
	}
}
