package compactor

import (
	"testing"

	"github.com/tiered/tiered/localtier/codec"
)

// An aborted transaction that began before a roll and a restart: the log
// forgets it on reopen, writes no .txnindex entry for its abort, and the
// cleaner then treats the aborted value as the latest committed one and
// drops the real latest value.
func TestReviewAbortAfterRestartIsHonoured(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(kv("k", "committed"))
	e.roll()
	e.produceTo(e.log, codec.None, 7, true, kv("k", "aborted"))
	e.roll()
	e.produce(kv("other", "x"))
	e.reopen()
	if _, err := e.log.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	e.roll()
	e.produce(kv("tail", "y"))
	e.pass(true)
	for _, r := range e.read() {
		if r.Key == "k" && r.Value != "committed" {
			t.Errorf("key k reads %q after cleaning; the committed value was dropped: %s", r.Value, show(e.read()))
		}
	}
}
