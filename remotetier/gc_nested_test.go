package remotetier

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestGCKeepsNestedDeploymentKeys: a deployment whose bucket prefix lies
// inside another's partition folder. The outer deployment's GC lists that
// folder and meets the inner one's objects there: they belong to another
// partition (another prefix), whose own manifest references them, and stay.
// Only keys of the partition being collected are its orphans.
func TestGCKeepsNestedDeploymentKeys(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	outer := upOpenDir(t, t.TempDir())
	upTopic(t, outer, "o", 1)
	upSegments(t, upPartition(t, outer, "o", 0), 2, 2, 3, 10)
	if _, err := upUploader(t, mem, NewLocalSource(outer, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	dk, err := manifest.DataKeys("", "o", 0, 0, "00000000")
	if err != nil {
		t.Fatal(err)
	}
	nested := path.Dir(dk.Log) + "/nested"
	inner := upOpenDir(t, t.TempDir())
	upTopic(t, inner, "i", 1)
	upSegments(t, upPartition(t, inner, "i", 0), 2, 2, 3, 10)
	if _, err := upUploader(t, mem, NewLocalSource(inner, nil), Options{Prefix: nested}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	innerKeys := upReferenced(t, mem, manifest.Key{Prefix: nested, Topic: "i", Partition: 0})
	if len(innerKeys) == 0 {
		t.Fatal("the inner deployment referenced nothing")
	}
	rep, err := GC(ctx, mem, GCOptions{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 0 {
		t.Fatalf("gc of the outer deployment deleted %v", rep.Deleted)
	}
	for k := range innerKeys {
		if _, err := mem.Attributes(ctx, k); err != nil {
			t.Fatalf("the inner deployment's %s: %v", k, err)
		}
	}
}

// TestRemoveLineageKeepsNestedDeploymentKeys: removing a lineage deletes its
// partitions' objects, not those of a deployment whose prefix lies inside
// its partition folder, even one mirroring the same topic (same name, ID
// and partition under its own prefix).
func TestRemoveLineageKeepsNestedDeploymentKeys(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const id = "q7bS3xN0TNyYPBzUlLsMBg"
	put := func(key string) {
		if _, err := mem.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	keysOf := func(prefix string) []string {
		root, err := manifest.ManifestKeyID(prefix, "o", id, 0)
		if err != nil {
			t.Fatal(err)
		}
		dk, err := manifest.DataKeysID(prefix, "o", id, 0, 0, manifest.NewAttemptID())
		if err != nil {
			t.Fatal(err)
		}
		return []string{root, dk.Log, dk.Indexes}
	}
	outer := keysOf("")
	nested := keysOf(path.Dir(outer[1]) + "/nested")
	for _, k := range append(append([]string(nil), outer...), nested...) {
		put(k)
	}
	n, err := RemoveLineage(ctx, mem, "", "o", manifest.TopicLineage{TopicID: id, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(outer) {
		t.Fatalf("removed %d objects, want the lineage's %d", n, len(outer))
	}
	for _, k := range nested {
		if _, err := mem.Attributes(ctx, k); err != nil {
			t.Fatalf("the nested deployment's %s: %v", k, err)
		}
	}
}

// TestGCUnreadableTopicObject: a topic object GC cannot read only hides the
// topic's removed lineages; each partition's own orphans are still
// collected, and the error says once which check was skipped.
func TestGCUnreadableTopicObject(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	dir := upOpenDir(t, t.TempDir())
	upTopic(t, dir, "o", 2)
	for p := range int32(2) {
		upSegments(t, upPartition(t, dir, "o", p), 2, 2, 3, 10)
	}
	if _, err := upUploader(t, mem, NewLocalSource(dir, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for p := range int32(2) {
		dk, err := manifest.DataKeys("", "o", p, 1000, "0badc0de")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Put(ctx, dk.Log, strings.NewReader("x"), 1, objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, dk.Log)
	}
	tk, err := manifest.TopicKey("", "o")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Put(ctx, tk, strings.NewReader("{not json"), 9, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	rep, err := GC(ctx, mem, GCOptions{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err == nil || strings.Count(err.Error(), "removed lineages not collected") != 1 {
		t.Fatalf("gc with the topic object unreadable: %v, want one error naming the skipped check", err)
	}
	for _, k := range orphans {
		if !slices.ContainsFunc(rep.Deleted, func(o Orphan) bool { return o.Key == k }) {
			t.Fatalf("orphan %s not collected: %+v", k, rep.Deleted)
		}
	}
}
