package integration

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
)

// TestFetchColdReadCommittedClients: a partition of plain records and two
// producers' transactions, committed and aborted, interleaved and spanning
// segment rolls (an abort marker segments after its records), uploaded to
// MinIO and read cold. Debian's kcat (librdkafka, read_committed by
// default) and franz-go with read_committed get every record but the
// aborted ones, from the fetch service's aborted-transaction lists;
// franz-go with read_uncommitted gets them all.
func TestFetchColdReadCommittedClients(t *testing.T) {
	kcat := kcatPath(t)
	var all, committed []rec
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "txns", 1, nil)
		l := partitionLog(t, d, "txns", 0)
		plain := &producer{t: t}
		a, b := &producer{t: t, pid: 7001}, &producer{t: t, pid: 7002}
		end := func(p *producer, commit bool) {
			if _, err := l.AppendEndTxnMarker(p.pid, 0, commit, 0); err != nil {
				t.Fatal(err)
			}
		}
		roll := func() {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 6 {
			abort := i%2 == 1
			rs := plain.produce(l, codec.Snappy, 4, genRecs(8, fmt.Sprint("plain", i)))
			all, committed = append(all, rs...), append(committed, rs...)
			ra := a.produce(l, codec.LZ4, 3, genRecs(9, fmt.Sprint("a", i)))
			rb := b.produce(l, codec.Zstd, 5, genRecs(10, fmt.Sprint("b", i)))
			all = append(all, ra...)
			all = append(all, rb...)
			end(b, true)
			committed = append(committed, rb...)
			roll() // a's transaction stays open across the roll
			rs = plain.produce(l, codec.None, 2, genRecs(4, fmt.Sprint("tail", i)))
			all, committed = append(all, rs...), append(committed, rs...)
			end(a, !abort)
			if !abort {
				committed = append(committed, ra...)
			}
			roll()
		}
	})
	byOffset := func(a, b rec) int { return cmp.Compare(a.Offset, b.Offset) }
	slices.SortFunc(committed, byOffset)
	slices.SortFunc(all, byOffset)
	if len(committed) >= len(all) {
		t.Fatalf("setup: %d committed of %d records, want aborted ones", len(committed), len(all))
	}
	svc := startFetch(t, cd.store, chunkcache.CacheOptions{ChunkBytes: 4 << 10}, kafkasrv.KafkaOptions{})
	t.Run("kcat", func(t *testing.T) {
		testrecs.Same(t, runKcat(t, kcat, svc.kafkaAddr, "txns", 0, "beginning"), committed, false)
	})
	t.Run("franz-go/read_committed", func(t *testing.T) {
		testrecs.Same(t, testrecs.ConsumeKgo(t, svc.kafkaAddr, "txns", 0, kgo.NewOffset().AtStart(), len(committed),
			kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed, false)
	})
	t.Run("franz-go/read_uncommitted", func(t *testing.T) {
		testrecs.Same(t, testrecs.ConsumeKgo(t, svc.kafkaAddr, "txns", 0, kgo.NewOffset().AtStart(), len(all)), all, false)
	})
}
