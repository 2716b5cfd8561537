package remotetier

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestLocalSourceListsOnlyDurableSegments: the local source offers a rolled
// segment for upload only once it is flushed (the log's recovery point has
// passed it). Rolls fsync, but a log opened after a crash starts at the
// checkpointed recovery point, which can be older than its rolled segments
// (written by an older tiered, whose rolls did not fsync); an upload of
// unflushed segments could put the remote tier ahead of what a power loss
// leaves on disk: the log would then hand out again offsets the bucket
// holds with other records.
func TestLocalSourceListsOnlyDurableSegments(t *testing.T) {
	dir := t.TempDir()
	d := upOpenDir(t, dir)
	upTopic(t, d, "du", 1)
	upSegments(t, upPartition(t, d, "du", 0), 3, 2, 3, 10)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	rps := map[checkpoint.TopicPartition]int64{{Topic: "du", Partition: 0}: 0}
	if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, localtier.RecoveryPointCheckpoint), rps); err != nil {
		t.Fatal(err)
	}
	d = upOpenDir(t, dir)
	l := upPartition(t, d, "du", 0)
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the pass, want 0 (the checkpoint's)", rp)
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
