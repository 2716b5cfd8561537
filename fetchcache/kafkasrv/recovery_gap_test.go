package kafkasrv

import (
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestKafkaConsumeAcrossRecoveryGap: a flushed segment whose tail was torn
// loses only that tail on open (localtier's loader, as Kafka's); the later
// segments stay, and a Kafka consumer reads across the gap, from the start
// and from an offset inside it.
func TestKafkaConsumeAcrossRecoveryGap(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("gap", 1, nil)
	l := e.Log("gap", 0)
	all := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, Per: 5}, fetchkit.GenRecs(120, ts0, "gap"))
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	dir := e.Dir.Dir()
	if err := e.Dir.Close(); err != nil {
		t.Fatal(err)
	}
	// Tear segment 1 in the middle of its data: it is below the recovery
	// point the clean close checkpointed.
	if err := os.Truncate(segs[1].Path, segs[1].Size/2); err != nil {
		t.Fatal(err)
	}
	d, rep, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if rep.Recovery.SegmentsDeleted != 0 || rep.Recovery.OffsetsLost == 0 {
		t.Fatalf("recovery %+v: want a gap and no segment deleted", rep.Recovery)
	}
	l2, err := d.Partition("gap", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := testrecs.FromLog(t, l2)
	if int64(len(want)) != int64(len(all))-rep.Recovery.OffsetsLost || l2.LogEndOffset() != int64(len(all)) {
		t.Fatalf("%d records readable, log end %d; want %d and %d", len(want), l2.LogEndOffset(), int64(len(all))-rep.Recovery.OffsetsLost, len(all))
	}
	gapAt, from := int64(-1), 0
	for i := 1; i < len(want); i++ {
		if want[i].Offset > want[i-1].Offset+1 {
			gapAt, from = want[i-1].Offset+1, i
			break
		}
	}
	if gapAt < 0 || gapAt >= segs[2].BaseOffset {
		t.Fatalf("no gap in segment 1 (gap at %d)", gapAt)
	}
	addr := startKafka(t, fetchcache.NewLocalCatalog(d), KafkaOptions{})
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "gap", 0, kgo.NewOffset().AtStart(), len(want)), want)
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "gap", 0, kgo.NewOffset().At(gapAt), len(want)-from), want[from:])
}
