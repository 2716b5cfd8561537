package compactor

import (
	"slices"
	"testing"
)

// TestKafkaDocExample is the log of Kafka's compaction documentation: keys
// K1, K2, K3 over offsets 0-6 with K3 deleted compact to offsets 4, 5, 6
// (the tombstone stays through delete.retention.ms), and after the horizon
// the tombstone goes too.
func TestKafkaDocExample(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(kv("K1", "V1"))
	e.produce(kv("K2", "V2"))
	e.produce(kv("K1", "V3"))
	e.produce(kv("K3", "V4"))
	e.produce(kv("K1", "V5"))
	e.produce(kv("K2", "V6"))
	e.produce(tomb("K3"))
	e.roll()
	rep := e.pass(false)
	if rep.LogsCleaned != 1 {
		t.Fatalf("report: %s", rep)
	}
	recs := e.read()
	if want := []int64{4, 5, 6}; !slices.Equal(offsetsOf(recs), want) {
		t.Fatalf("after cleaning: %s, want offsets %v", show(recs), want)
	}
	if recs[0].Value != "V5" || recs[1].Value != "V6" || !recs[2].Tomb {
		t.Fatalf("after cleaning: %s", show(recs))
	}
	// The tombstone's batch now carries the delete horizon.
	_, batches := readLog(t, e.fs, e.log)
	last := batches[len(batches)-1]
	if !last.HasDeleteHorizon() || last.DeleteHorizon() != t0+86_400_000 {
		t.Fatalf("tombstone batch: horizon flag %v, horizon %d", last.HasDeleteHorizon(), last.DeleteHorizon())
	}
	// One ms before the horizon: kept. At the horizon: gone.
	e.clock.ms = t0 + 86_400_000 - 1
	e.pass(true)
	if recs := e.read(); len(recs) != 3 {
		t.Fatalf("before the horizon: %s", show(recs))
	}
	e.clock.ms = t0 + 86_400_000
	e.pass(true)
	if recs := e.read(); !slices.Equal(offsetsOf(recs), []int64{4, 5}) {
		t.Fatalf("after the horizon: %s", show(recs))
	}
}

// TestUserStory is the three-user story: u1 and u2 keep their latest
// values, u3 is deleted and, after the grace period and a second run, is
// gone entirely.
func TestUserStory(t *testing.T) {
	e := newEnv(t, map[string]string{"delete.retention.ms": "3600000"})
	e.produce(kv("u1", "alice@old"))
	e.produce(kv("u2", "bob@example"))
	e.produce(kv("u3", "carol@example"))
	e.produce(kv("u1", "alice@new"))
	e.produce(tomb("u3"))
	e.roll()
	e.pass(false)
	recs := e.read()
	if want := "1:u2=bob@example 3:u1=alice@new 4:u3=<tombstone>"; show(recs) != want {
		t.Fatalf("first run: %s, want %s", show(recs), want)
	}
	e.clock.ms += 3_600_000
	// New data makes the log dirty again; the second run drops u3.
	e.produce(kv("u2", "bob@new"))
	e.roll()
	e.pass(false)
	recs = e.read()
	if want := "3:u1=alice@new 5:u2=bob@new"; show(recs) != want {
		t.Fatalf("second run: %s, want %s", show(recs), want)
	}
}
