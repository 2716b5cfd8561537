package brokermeta

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
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

// The fallback source's topic ID must not flip with the set of partitions
// the log dir holds: a directory of an old incarnation left under the live
// name (Kafka before 3.7 leaves such stray logs of a topic deleted while the
// broker was down) beside a partition of the live topic. When the live
// partition moves away, the topic's ID must not read as changed to the old
// one: that would report the live topic deleted, and the sidecar would stop
// serving it, refuse its uploads and remove its remote data.
func TestFallbackSourceMixedIDs(t *testing.T) {
	ctx := context.Background()
	logDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(logDir, "meta.properties"), []byte("version=1\nnode.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live, stale := localtier.TopicID{1}, localtier.TopicID{2}
	for p, id := range map[string]localtier.TopicID{"orders-0": live, "orders-1": stale, "orders-2": live} {
		d := filepath.Join(logDir, p)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := localtier.WritePartitionMetadata(vfs.Default, d, id); err != nil {
			t.Fatal(err)
		}
	}
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	src := NewFallbackSource(view)
	if _, err := src.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// orders-0 is reassigned to another broker.
	if err := os.RemoveAll(filepath.Join(logDir, "orders-0")); err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range snap.Deleted {
		if d.ID == live {
			t.Fatalf("the live topic reported deleted after one of its partitions moved away: %+v", snap.Deleted)
		}
	}
}

// A KRaft snapshot is the cluster's whole state (Authoritative) and names
// the cluster of its log dir's meta.properties; without a cluster.id it
// names none. The fallback source's is never authoritative: a partition
// moved away looks the same as one deleted.
func TestSnapshotClusterAndAuthority(t *testing.T) {
	ctx := context.Background()
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	var id kraft.TopicID
	id[0] = 1
	if _, err := l.Append(kraftlog.Topic("orders", id), kraftlog.Partition(id, 0, 1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	src := &KRaftSource{LogDir: logDir, NodeID: 1}
	if snap, err := src.Snapshot(ctx); err != nil || !snap.Authoritative || snap.ClusterID != "" {
		t.Fatalf("no meta.properties: %+v, %v", snap, err)
	}
	props := "#\n#Mon Sep 02 15:43:32 IST 2024\ncluster.id = rwd2jqiwRaCycLq7mKVHXA\nnode.id=1\nversion=1\n"
	if err := os.WriteFile(filepath.Join(logDir, "meta.properties"), []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	if snap, err := src.Snapshot(ctx); err != nil || !snap.Authoritative || snap.ClusterID != "rwd2jqiwRaCycLq7mKVHXA" {
		t.Fatalf("with meta.properties: %+v, %v", snap, err)
	}
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := NewFallbackSource(view).Snapshot(ctx); err != nil || snap.Authoritative {
		t.Fatalf("fallback: %+v, %v", snap, err)
	}
}
