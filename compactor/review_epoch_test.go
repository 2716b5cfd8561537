package compactor

import (
	"fmt"
	"strings"
	"testing"
)

// A producer's last entry is a transaction marker with a newer epoch than
// its last data batch (the coordinator bumped the epoch when it aborted a
// timed-out transaction that wrote nothing here; transaction.version 2
// bumps it at every commit). Kafka's producer state forgets the data batch
// on the epoch change, so the cleaner keeps that marker (empty once past its
// horizon): it holds the epoch that fences the producer's zombies. Keeping
// the older data batch instead loses the newer epoch from the log.
func TestReviewMarkerWithNewEpochKeptForFencing(t *testing.T) {
	e := newEnv(t, map[string]string{"delete.retention.ms": "1000"})
	e.produceTo(e.log, 0, 5, true, kv("k", "v1"))
	if _, err := e.log.AppendEndTxnMarker(5, 0, true, 0); err != nil {
		t.Fatal(err)
	}
	// Timed-out transaction at epoch 0 with no data here: aborted at epoch 1.
	if _, err := e.log.AppendEndTxnMarker(5, 1, false, 0); err != nil {
		t.Fatal(err)
	}
	e.produce(kv("k", "v2"))
	e.roll()
	e.produce(kv("tail", "x"))
	for range 4 {
		e.pass(true)
		e.clock.ms += 2000
	}
	_, batches := readLog(t, e.fs, e.log)
	var of5 []string
	maxEpoch := int16(-1)
	for _, b := range batches {
		if b.ProducerID() == 5 {
			of5 = append(of5, fmt.Sprintf("@%d control=%v epoch=%d records=%d", b.BaseOffset(), b.IsControl(), b.ProducerEpoch(), b.RecordCount()))
			maxEpoch = max(maxEpoch, b.ProducerEpoch())
		}
	}
	if maxEpoch != 1 {
		t.Fatalf("producer 5's epoch 1 is gone from the log; its batches left: %s", strings.Join(of5, ", "))
	}
	if got, want := show(e.read()), "3:k=v2 4:tail=x"; got != want {
		t.Fatalf("records %s, want %s", got, want)
	}
}
