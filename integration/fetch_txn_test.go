package integration

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

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

// TestGroupKafkajsReadCommitted: kafkajs (read_committed by default, its own
// handling of aborted transactions) reads, through a consumer group of the
// real `tiered fetch` over MinIO, a cold topic of two partitions holding
// plain records and a producer's transactions, committed and aborted, whose
// markers fall after segment rolls: it prints every committed record once
// and no aborted one.
func TestGroupKafkajsReadCommitted(t *testing.T) {
	node := requireClients(t)
	bin := tiered(t)
	type po struct {
		p   int32
		off int64
	}
	want := map[po]string{} // committed records' values
	aborted := 0
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "kjtx", 2, nil)
		for p := range int32(2) {
			l := partitionLog(t, d, "kjtx", p)
			plain, txn := &producer{t: t}, &producer{t: t, pid: 8000 + int64(p)}
			for i := range 5 {
				for _, r := range plain.produce(l, codec.Gzip, 3, genRecs(6, fmt.Sprint("plain", p, i))) {
					want[po{p, r.Offset}] = string(r.Value)
				}
				rt := txn.produce(l, codec.Gzip, 4, genRecs(8, fmt.Sprint("txn", p, i)))
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
				commit := i%2 == 0
				if _, err := l.AppendEndTxnMarker(txn.pid, 0, commit, 0); err != nil {
					t.Fatal(err)
				}
				for _, r := range rt {
					if commit {
						want[po{p, r.Offset}] = string(r.Value)
					} else {
						aborted++
					}
				}
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	})
	addrs := pickAddrs(t, 2)
	f := startFetchAt(t, bin, cd.srv.URL(cd.bucket, ""), fleetConfig(t, addrs[0], addrs[1], nil, 0, ""), addrs[0], addrs[1])
	defer f.stop()
	got := runGroupClient(t, 2*time.Minute, "kafkajs", kafkajsArgs(node, addrs[1], "kjtx-app", "kjtx", 10_000, 6*time.Second)...)
	seen := map[po]bool{}
	for _, r := range got {
		k := po{r.Partition, r.Offset}
		v, ok := want[k]
		if !ok {
			t.Fatalf("kafkajs printed partition %d offset %d: not a committed record (%d aborted)", r.Partition, r.Offset, aborted)
		}
		if r.value(t) != v {
			t.Fatalf("kafkajs printed partition %d offset %d with value %q, want %q", r.Partition, r.Offset, r.value(t), v)
		}
		if seen[k] {
			t.Fatalf("kafkajs printed partition %d offset %d twice", r.Partition, r.Offset)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("kafkajs printed %d committed records, want %d", len(seen), len(want))
	}
}
