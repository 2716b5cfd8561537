package compactor

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// txnModelRec is one appended data record: its key and value, and the
// transaction it belongs to (0: none).
type txnModelRec struct {
	key, value string
	tomb       bool
	appendedMs int64
	txn        int
}

type txnModelTxn struct {
	pid               int64
	first, last       int64 // data offsets written
	marker            int64 // -1 while open
	committed, closed bool
}

// TestReviewTxnModel appends plain records and transactions of three
// transactional producers (committed, aborted, left open across passes),
// rolls and cleans at random (small offset maps too), and after every pass
// checks what a read_committed consumer relies on: every record is the one
// appended at its offset; each key's latest committed record is there
// unless it is a tombstone past delete.retention.ms; every aborted batch
// still in the log is covered by an aborted-transaction entry and no
// committed one is; a transaction's marker stays while any of its batches
// does; nothing at or past the last stable offset is removed.
func TestReviewTxnModel(t *testing.T) { runSeeds(t, 12, runTxnModel) }

func runTxnModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const retention = 10_000
	e := modelEnv(t, rng, 2000, retention)
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.LZ4}
	model := map[int64]txnModelRec{}
	txns := []*txnModelTxn{nil}
	open := map[int64]int{} // pid -> open txn
	epochs := map[int64]int16{}
	keys := 4 + rng.IntN(20)
	records := func(step int) []record.Record { return randomRecords(rng, 1+rng.IntN(3), keys, 6, step) }
	active := int64(3)
	for step := range 450 {
		if step == 200 {
			// Producer 3 goes quiet after a timed-out transaction with
			// nothing here: its last entry is that marker's new epoch.
			if id, ok := open[3]; ok {
				off, err := e.log.AppendEndTxnMarker(3, epochs[3], false, 0)
				if err != nil {
					t.Fatal(err)
				}
				txns[id].marker, txns[id].closed = off, true
				delete(open, 3)
			}
			epochs[3]++
			if _, err := e.log.AppendEndTxnMarker(3, epochs[3], false, 0); err != nil {
				t.Fatal(err)
			}
			active = 2
		}
		switch op := rng.IntN(10); {
		case op < 4:
			recs := records(step)
			info := e.produceTo(e.log, codecs[rng.IntN(len(codecs))], -1, false, recs...)
			for i, r := range recs {
				model[info.FirstOffset+int64(i)] = txnModelRec{key: string(r.Key), value: string(r.Value), tomb: r.Value == nil, appendedMs: e.clock.ms}
			}
		default:
			pid := 1 + rng.Int64N(active)
			id, isOpen := open[pid]
			if isOpen && rng.IntN(2) == 0 {
				commit := rng.IntN(2) == 0
				if !commit && rng.IntN(3) == 0 {
					epochs[pid]++ // the coordinator aborts on timeout with a bumped epoch
				}
				off, err := e.log.AppendEndTxnMarker(pid, epochs[pid], commit, 0)
				if err != nil {
					t.Fatal(err)
				}
				txns[id].marker, txns[id].committed, txns[id].closed = off, commit, true
				delete(open, pid)
				break
			}
			if !isOpen && rng.IntN(4) == 0 {
				// A transaction that wrote nothing here timed out: the
				// coordinator bumps the epoch and writes the abort marker.
				epochs[pid]++
				if _, err := e.log.AppendEndTxnMarker(pid, epochs[pid], false, 0); err != nil {
					t.Fatal(err)
				}
				break
			}
			if !isOpen {
				txns = append(txns, &txnModelTxn{pid: pid, first: -1, marker: -1})
				id = len(txns) - 1
				open[pid] = id
			}
			recs := records(step)
			info := e.produceTxn(codecs[rng.IntN(len(codecs))], pid, epochs[pid], recs...)
			for i, r := range recs {
				model[info.FirstOffset+int64(i)] = txnModelRec{key: string(r.Key), value: string(r.Value), tomb: r.Value == nil, appendedMs: e.clock.ms, txn: id}
			}
			if txns[id].first < 0 {
				txns[id].first = info.FirstOffset
			}
			txns[id].last = info.LastOffset
		}
		e.clock.ms += int64(rng.IntN(300))
		if rng.IntN(8) == 0 {
			e.roll()
		}
		if rng.IntN(40) == 0 {
			e.reopen() // open transactions survive a restart
		}
		if rng.IntN(12) == 0 {
			e.cfg.DedupeBufferSize = 1 << 20
			if rng.IntN(2) == 0 {
				e.cfg.DedupeBufferSize = int64(24 * (10 + rng.IntN(60)))
			}
			lso := e.log.LastStableOffset()
			if _, err := RunOnce(context.Background(), e.dir, PassOptions{Force: rng.IntN(3) == 0, Config: e.cfg}); err != nil {
				t.Fatalf("step %d: pass: %v", step, err)
			}
			checkTxnModel(t, e, model, txns, retention, lso, step)
			checkEpochs(t, e, epochs, step)
		}
	}
}

func checkTxnModel(t *testing.T, e *env, model map[int64]txnModelRec, txns []*txnModelTxn, retention, lso int64, step int) {
	t.Helper()
	_, batches := readLog(t, e.fs, e.log)
	var d record.Decoder
	present := map[string][]int64{}
	txnBatches := map[int]bool{}
	markers := map[int64]bool{}
	for _, b := range batches {
		if b.IsControl() {
			markers[b.BaseOffset()] = true
			continue
		}
		if b.IsTransactional() {
			m, ok := model[b.LastOffset()]
			if !ok || m.txn == 0 {
				// A kept empty batch keeps its last offset; find the txn by its base.
				m = model[b.BaseOffset()]
			}
			tx := txns[m.txn]
			if m.txn == 0 || tx.pid != b.ProducerID() {
				t.Fatalf("step %d: transactional batch [%d, %d] of producer %d matches no transaction", step, b.BaseOffset(), b.LastOffset(), b.ProducerID())
			}
			txnBatches[m.txn] = true
			covered := false
			for _, a := range e.log.AbortedTxns(b.BaseOffset(), b.LastOffset()+1) {
				if a.ProducerID == b.ProducerID() && a.FirstOffset <= b.BaseOffset() && b.LastOffset() <= a.LastOffset {
					covered = true
				}
			}
			if tx.closed && !tx.committed && !covered && b.RecordCount() > 0 {
				t.Fatalf("step %d: aborted batch [%d, %d] left without its aborted-transaction entry: read_committed would see it", step, b.BaseOffset(), b.LastOffset())
			}
			if (!tx.closed || tx.committed) && covered {
				t.Fatalf("step %d: batch [%d, %d] of a committed or open transaction is covered by an abort entry", step, b.BaseOffset(), b.LastOffset())
			}
		}
		recs, err := d.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			m, ok := model[r.Offset]
			if !ok || m.key != string(r.Key) || m.tomb != (r.Value == nil) || (!m.tomb && m.value != string(r.Value)) {
				t.Fatalf("step %d: offset %d holds %q=%q, model has %+v", step, r.Offset, r.Key, r.Value, m)
			}
			present[m.key] = append(present[m.key], r.Offset)
		}
	}
	for id, tx := range txns {
		if id > 0 && txnBatches[id] && tx.closed && !markers[tx.marker] {
			t.Fatalf("step %d: transaction %d (producer %d, committed %v) keeps batches but lost its marker at %d", step, id, tx.pid, tx.committed, tx.marker)
		}
	}
	// Each key's latest committed record below the LSO of the pass.
	latest := map[string]int64{}
	for off, m := range model {
		if off >= lso {
			continue
		}
		if tx := txns[m.txn]; m.txn != 0 && (!tx.closed || !tx.committed) {
			continue
		}
		if l, ok := latest[m.key]; !ok || off > l {
			latest[m.key] = off
		}
	}
	for key, off := range latest {
		m := model[off]
		found := false
		for _, o := range present[key] {
			found = found || o == off
		}
		if !found && !(m.tomb && e.clock.ms >= m.appendedMs+retention) {
			t.Fatalf("step %d: key %s lost its latest committed record at %d (%+v); the log holds %v", step, key, off, m, present[key])
		}
	}
	// Nothing at or past the LSO was removed.
	for off, m := range model {
		if off < lso {
			continue
		}
		found := false
		for _, o := range present[m.key] {
			found = found || o == off
		}
		if !found {
			t.Fatalf("step %d: offset %d at or past the LSO %d was removed", step, off, lso)
		}
	}
}

// produceTxn appends recs as one transactional batch of pid at epoch.
func (e *env) produceTxn(c codec.Codec, pid int64, epoch int16, recs ...record.Record) localtier.AppendInfo {
	e.t.Helper()
	for i := range recs {
		recs[i].Offset, recs[i].Timestamp = int64(i), e.clock.ms
	}
	spec := record.NewBatchSpec(0, c)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = pid, epoch, 0, true
	b, err := e.enc.AppendBatch(nil, spec, recs)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := e.log.Append(b)
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

// checkEpochs: the log keeps, for every producer (none expires here), a
// batch with its latest epoch, which fences its zombies after a restart.
func checkEpochs(t *testing.T, e *env, epochs map[int64]int16, step int) {
	t.Helper()
	_, batches := readLog(t, e.fs, e.log)
	last := map[int64]int16{}
	for _, b := range batches {
		if b.ProducerID() >= 0 {
			last[b.ProducerID()] = max(last[b.ProducerID()], b.ProducerEpoch())
		}
	}
	for pid, ep := range epochs {
		if last[pid] != ep {
			t.Fatalf("step %d: producer %d is at epoch %d but the log's latest batch of it has epoch %d", step, pid, ep, last[pid])
		}
	}
}
