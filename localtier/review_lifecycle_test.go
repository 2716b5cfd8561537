package localtier

import (
	"os"
	"path/filepath"
	"testing"
)

// A broker whose topics are created and deleted all the time: the view's
// cache of rolled segments' ends must not keep the partitions the broker
// deleted (renamed to -delete, then removed), or the sidecar's memory grows
// with every topic ever deleted.
func TestBrokerViewForgetsDeletedPartitions(t *testing.T) {
	dir, l := brokerPartition(t, 4, 3, 3, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v := openView(t, dir)
	if segs, err := v.Segments("t", 0); err != nil || len(segs) != 4 {
		t.Fatalf("segments %+v, %v", segs, err)
	}
	if len(v.tails) != 1 {
		t.Fatalf("%d cached partitions, want 1", len(v.tails))
	}
	// Kafka deletes the topic: the directory is renamed, then removed.
	live := filepath.Join(dir, "t-0")
	gone := filepath.Join(dir, "t-0.0123456789abcdef0123456789abcdef-delete")
	if err := os.Rename(live, gone); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if ps, err := v.Partitions(); err != nil || len(ps) != 0 {
		t.Fatalf("partitions %+v, %v", ps, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.tails) != 0 {
		t.Fatalf("the deleted partition's segments are still cached: %v", v.tails)
	}
}
