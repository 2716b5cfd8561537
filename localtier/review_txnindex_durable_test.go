package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// appendAbortedTxnOf7 appends a transactional batch of producer 7 at the log
// end, a plain batch, and producer 7's abort marker.
func appendAbortedTxnOf7(t *testing.T, l *Log) (first, marker int64) {
	t.Helper()
	tx := txnBatch(t, 7)
	first = mustAppend(t, l, tx).FirstOffset
	mustAppend(t, l, batchOf(t, 1, 10, 1000, codec.None))
	var err error
	marker, err = l.AppendEndTxnMarker(7, 0, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	return first, marker
}

// Flush returned, so the abort is durable: after a power loss the aborted
// transaction must still be in the .txnindex. The .txnindex is created on
// the first abort, long after the directory was last synced: without a
// directory sync at Flush (as after every other file creation in the
// engine) the power loss drops the file and READ_COMMITTED consumers see
// the aborted records.
func TestReviewTxnIndexCreatedThenFlushedSurvivesPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	first, marker := appendAbortedTxnOf7(t, l)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	crashed := mem.CrashClone() // power loss after Flush returned
	_ = l.Close()
	l2, _ := openTestLog(t, crashed, "/d/t-0", cfg, clock, rp)
	defer l2.Close()
	if got := l2.LogEndOffset(); got != marker+1 {
		t.Fatalf("log end after the power loss = %d, want %d (flushed)", got, marker+1)
	}
	got := l2.AbortedTxns(0, l2.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != first || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions after Flush and a power loss = %+v, want one [%d, %d] of producer 7", got, first, marker)
	}
}
