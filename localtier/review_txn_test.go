package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A transaction open across a roll and a restart: the loader rebuilds open
// transactions from the active segment only, so it forgets the one that
// began in a rolled segment. The LSO then runs past it, and its later abort
// writes no .txnindex entry (READ_COMMITTED consumers and the cleaner see
// the aborted records as committed).
func TestReviewOpenTxnSurvivesRollAndRestart(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1000)}
	dir := t.TempDir()
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	tx := txnBatch(t, 7)
	mustAppend(t, l, tx) // offset 0, txn of producer 7 open
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(t, 1, 10, 1000, codec.None)) // offset 1
	if got := l.LastStableOffset(); got != 0 {
		t.Fatalf("LSO before restart = %d, want 0", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 2)
	defer l2.Close()
	if got := l2.LastStableOffset(); got != 0 {
		t.Errorf("LSO after restart = %d, want 0 (producer 7's transaction is still open)", got)
	}
	if _, err := l2.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	if got := l2.AbortedTxns(0, 100); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 {
		t.Errorf("aborted txns after the abort = %+v, want one entry [0, 2] for producer 7", got)
	}
}

// txnBatch is a transactional batch of one record of producer pid (epoch 0,
// sequence 0) at offset 0, to be appended at the log end.
func txnBatch(t *testing.T, pid int64) []byte {
	t.Helper()
	spec := record.NewBatchSpec(0, codec.None)
	spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, pid, 0, 0
	var e record.Encoder
	tx, err := e.AppendBatch(nil, spec, []record.Record{{Offset: 0, Timestamp: 1000, Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}
