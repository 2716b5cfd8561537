package kafkasrv

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// BenchmarkFetch reads a partition from start to end with Kafka Fetch
// requests of 1 MiB over loopback (franz-go, raw requests), from the bucket
// through the chunk cache (the spliced, uncopied path; warm) and from
// local segments; b.SetBytes makes MB/s the record batches served.
func BenchmarkFetch(b *testing.B) {
	b.Run("remote", func(b *testing.B) {
		cat, end := fetchkit.ColdCombined(b)
		benchFetch(b, cat, "cold", end)
	})
	b.Run("local", func(b *testing.B) {
		e := fetchkit.NewEnv(b)
		e.Topic("hot", 1, map[string]string{"internal.segment.bytes": "262144"})
		l := e.Log("hot", 0)
		e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, Per: 20}, fetchkit.GenRecs(25000, ts0, "z"))
		benchFetch(b, e.Cat, "hot", l.LogEndOffset())
	})
}

func benchFetch(b *testing.B, cat fetchcache.Catalog, topic string, end int64) {
	addr := startKafka(b, cat, KafkaOptions{})
	cl := fetchkit.MustClient(b, kgo.SeedBrokers(addr))
	ctx := context.Background()
	readAll := func() int64 {
		var n int64
		for off := int64(0); off < end; {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = off, 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				b.Fatalf("fetch at %d: error %d, %d bytes", off, p.ErrorCode, len(p.RecordBatches))
			}
			n += int64(len(p.RecordBatches))
			it := record.NewIter(p.RecordBatches)
			for {
				bt, ok := it.Next()
				if !ok {
					break
				}
				off = bt.NextOffset()
			}
		}
		return n
	}
	b.SetBytes(readAll()) // warm
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		readAll()
	}
}
