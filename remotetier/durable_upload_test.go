package remotetier

import (
	"context"
	"testing"
)

// TestLocalSourceListsOnlyDurableSegments: the local source offers a rolled
// segment for upload only once it is flushed (the log's recovery point has
// passed it). Rolls do not fsync, and with the default flush settings
// nothing does until shutdown, so an upload of unflushed segments could
// put the remote tier ahead of what a power loss leaves on disk: the log
// would then hand out again offsets the bucket holds with other records.
func TestLocalSourceListsOnlyDurableSegments(t *testing.T) {
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "du", 1)
	l := upPartition(t, d, "du", 0)
	upSegments(t, l, 3, 2, 3, 10)
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the pass, want 0 (nothing flushed yet)", rp)
	}
	parts, err := NewLocalSource(d, nil).Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || len(parts[0].Segments) == 0 {
		t.Fatalf("partitions %+v, want du-0 with rolled segments", parts)
	}
	last := parts[0].Segments[len(parts[0].Segments)-1]
	if rp := l.RecoveryPoint(); rp < last.NextOffset {
		t.Fatalf("segments up to offset %d offered for upload with the recovery point at %d: not durable", last.NextOffset, rp)
	}
}
