package compactor

import (
	"container/heap"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
)

// txnState follows transactions while the cleaner walks a log in offset
// order, as Kafka's CleanedTransactionMetadata does: it learns which data
// batches belong to aborted transactions (from the .txnindex entries added
// with addAborted) and which markers may go.
type txnState struct {
	pending   abortedHeap                  // aborted txns not yet reached, by first offset
	seen      map[index.AbortedTxn]bool    // entries already added (segments overlap)
	aborted   map[int64]*ongoingAborted    // producer id -> aborted txn in progress
	committed map[int64]bool               // producer ids with an open txn that is not aborted
	keep      func(index.AbortedTxn) error // called for abort markers kept with their entry
}

type ongoingAborted struct {
	txn      index.AbortedTxn
	observed bool // a batch of it was seen in this pass
}

type abortedHeap []index.AbortedTxn

func (h abortedHeap) Len() int           { return len(h) }
func (h abortedHeap) Less(i, j int) bool { return h[i].FirstOffset < h[j].FirstOffset }
func (h abortedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *abortedHeap) Push(x any)        { *h = append(*h, x.(index.AbortedTxn)) }
func (h *abortedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newTxnState() *txnState {
	return &txnState{seen: map[index.AbortedTxn]bool{}, aborted: map[int64]*ongoingAborted{}, committed: map[int64]bool{}}
}

func (t *txnState) addAborted(txns []index.AbortedTxn) {
	for _, a := range txns {
		if !t.seen[a] {
			t.seen[a] = true
			heap.Push(&t.pending, a)
		}
	}
}

func (t *txnState) consumeUpTo(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := heap.Pop(&t.pending).(index.AbortedTxn)
		if _, ok := t.aborted[a.ProducerID]; !ok {
			t.aborted[a.ProducerID] = &ongoingAborted{txn: a}
		}
	}
}

// onBatch updates the state with a data batch and reports whether it
// belongs to an aborted transaction (and may be discarded).
func (t *txnState) onBatch(b record.Batch) bool {
	t.consumeUpTo(b.LastOffset())
	if !b.IsTransactional() {
		return false
	}
	if a, ok := t.aborted[b.ProducerID()]; ok {
		a.observed = true
		return true
	}
	t.committed[b.ProducerID()] = true
	return false
}

// onControl updates the state with a control batch whose first record's
// key is key (nil for an empty batch) and reports whether the marker may be
// discarded (once its delete horizon has passed): an abort marker when no
// batch of its transaction was seen in this pass, a commit marker when no
// batch of its transaction was seen. Other control records are kept.
func (t *txnState) onControl(b record.Batch, key []byte, hasRecord bool) (bool, error) {
	t.consumeUpTo(b.LastOffset())
	if !hasRecord {
		return true, nil // an empty control batch was already cleaned
	}
	_, typ, err := record.ParseControlKey(key)
	if err != nil {
		return false, err
	}
	pid := b.ProducerID()
	switch typ {
	case record.ControlAbort:
		a, ok := t.aborted[pid]
		delete(t.aborted, pid)
		if ok && a.observed {
			// Keep the marker (and its index entry) until the data is gone.
			if t.keep != nil {
				if err := t.keep(a.txn); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		return true, nil
	case record.ControlCommit:
		had := t.committed[pid]
		delete(t.committed, pid)
		return !had, nil
	default:
		return false, nil
	}
}
