package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"

	"github.com/tiered/tiered/localtier/vfs"
)

// A crash before any flush: the OS had written the .log's pages back (as it
// does on its own) but not the .txnindex. The segment is past the recovery
// point, so it is recovered; Kafka's LogSegment.recover rebuilds the
// .txnindex from the abort markers it replays (updateProducerState,
// txnIndex.reset), so the aborted transaction is indexed again; recovery
// that only trimmed the .txnindex would leave it unindexed for good.
func TestReviewRecoveryRebuildsTxnIndexFromAbortMarkers(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	first, marker := appendAbortedTxnOf7(t, l)
	// Writeback of the .log alone.
	if err := l.active().log.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	_ = l.Close()
	l2, rep := openTestLog(t, crashed, "/d/t-0", cfg, clock, 0)
	defer l2.Close()
	t.Logf("recovery: %+v", rep)
	if got := l2.LogEndOffset(); got != marker+1 {
		t.Fatalf("log end = %d, want %d", got, marker+1)
	}
	got := l2.AbortedTxns(0, l2.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != first || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions after recovery = %+v, want one [%d, %d] of producer 7 (its abort marker is in the recovered log)", got, first, marker)
	}
}

// The same with the transaction begun in a flushed, rolled segment: the
// replay must start from the snapshot at the recovered segment's base,
// which holds the open transaction, to rebuild the entry with its first
// offset.
func TestReviewRecoveryRebuildsTxnIndexAcrossRoll(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	tx := txnBatch(t, 7)
	mustAppend(t, l, tx) // offset 0
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	mustAppend(t, l, batchOf(t, 1, 10, 1000, codec.None)) // offset 1
	marker, err := l.AppendEndTxnMarker(7, 0, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.active().log.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	_ = l.Close()
	l2, _ := openTestLog(t, crashed, "/d/t-0", cfg, clock, rp)
	defer l2.Close()
	got := l2.AbortedTxns(0, l2.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions after recovery = %+v, want one [0, %d] of producer 7", got, marker)
	}
	if lso := l2.LastStableOffset(); lso != l2.LogEndOffset() {
		t.Fatalf("LSO %d, want the log end %d (the transaction was aborted)", lso, l2.LogEndOffset())
	}
}
