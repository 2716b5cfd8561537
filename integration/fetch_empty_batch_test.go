package integration

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
)

// TestFetchColdKcatPastEmptyBatch: a partition where the cleaner emptied
// 12 pairs of segments whole, each pair replaced by a segment holding only
// its sentinel batch (no records) between segments of records, is
// uploaded to MinIO and read cold. Debian's kcat (librdkafka 2.0.2) reads
// it whole, from the beginning and from inside an emptied range: a Fetch
// whose read stopped after a sentinel answered it alone, and librdkafka
// doubles its partition max bytes on every answer without a record, up to
// 1 GiB, then fails with "Message at offset N might be too large to fetch"
// (the 11th such answer of a run). franz-go reads the same.
func TestFetchColdKcatPastEmptyBatch(t *testing.T) {
	kcat := kcatPath(t)
	const pairs = 12
	var want []rec
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "emptied", 1, nil)
		l := partitionLog(t, d, "emptied", 0)
		pr := &producer{t: t}
		fill := func(tag string) {
			pr.produce(l, codec.None, 5, genRecs(10, tag))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range pairs {
			fill(fmt.Sprint("kept", i))
			fill(fmt.Sprint("gone", i))
			fill(fmt.Sprint("gone", i))
			fetchkit.EmptySegments(t, l, int64(i*30+10), int64(i*30+30))
		}
		fill("last")
		want = testrecs.FromLog(t, l)
	})
	if len(want) != (pairs+1)*10 || want[10].Offset != 30 {
		t.Fatalf("setup: %d records, want %d with 10-29 emptied", len(want), (pairs+1)*10)
	}
	svc := startFetch(t, cd.store, chunkcache.CacheOptions{ChunkBytes: 4 << 10}, kafkasrv.KafkaOptions{})
	for _, from := range []int64{0, 15} {
		w := fromOffset(want, from)
		t.Run("from_"+strconv.FormatInt(from, 10)+"/kcat", func(t *testing.T) {
			testrecs.Same(t, runKcat(t, kcat, svc.kafkaAddr, "emptied", 0, strconv.FormatInt(from, 10)), w, false)
		})
		t.Run("from_"+strconv.FormatInt(from, 10)+"/franz-go", func(t *testing.T) {
			testrecs.Same(t, testrecs.ConsumeKgo(t, svc.kafkaAddr, "emptied", 0, kgo.NewOffset().At(from), len(w)), w, true)
		})
	}
}
