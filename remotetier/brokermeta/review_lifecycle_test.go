package brokermeta

import (
	"context"
	"testing"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
)

// A topic deleted between two passes, with the controller writing a metadata
// snapshot past the RemoveTopicRecord before the second pass (Kafka does,
// every metadata.log.max.snapshot.interval.ms or 20 MiB of records): the
// reader replays from the new snapshot, which holds state, not history. The
// deletion must still be reported, or the deleted topic's remote data stays
// served and is never removed.
func TestKRaftSourceDeletionCoveredBySnapshot(t *testing.T) {
	ctx := context.Background()
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	var ordersID, keepID kraft.TopicID
	ordersID[0], keepID[0] = 1, 2
	if _, err := l.Append(kraftlog.Topic("orders", ordersID), kraftlog.Partition(ordersID, 0, 1, 0, 1),
		kraftlog.Topic("keep", keepID), kraftlog.Partition(keepID, 0, 1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	src := &KRaftSource{LogDir: logDir, NodeID: 1}
	snap, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Topic("orders"); !ok || len(snap.Deleted) != 0 {
		t.Fatalf("first snapshot: topics %v, deleted %v", snap.Names(), snap.Deleted)
	}

	// orders is deleted; a metadata snapshot covering the removal follows.
	if _, err := l.Append(kraftlog.RemoveTopic(ordersID)); err != nil {
		t.Fatal(err)
	}
	im, err := kraft.ReadDir(vfs.Default, l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot(kraftlog.ImageRecords(im)); err != nil {
		t.Fatal(err)
	}

	snap, err = src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Topic("orders"); ok {
		t.Fatal("orders still live")
	}
	found := false
	for _, d := range snap.Deleted {
		if d.Name == "orders" && d.ID == ordersID {
			found = true
		}
		if d.Name == "keep" {
			t.Errorf("a live topic reported deleted: %+v", d)
		}
	}
	if !found {
		t.Fatalf("the deletion of orders, covered by a new metadata snapshot, was not reported: deleted %+v", snap.Deleted)
	}
	// Still reported on the next pass (the uploader dedups).
	if snap, err = src.Snapshot(ctx); err != nil || len(snap.Deleted) == 0 {
		t.Fatalf("next snapshot: deleted %+v, %v", snap.Deleted, err)
	}
}
