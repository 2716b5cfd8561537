package fetchkit

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// UploadAll uploads a local env's rolled segments to a memory bucket.
func UploadAll(t testing.TB, e *Env, b objstore.Bucket) {
	t.Helper()
	upload(t, remotetier.NewLocalSource(e.Dir, vfs.Default), b)
}

// UploadAllID is UploadAll with every partition carrying topicID, as a
// broker's partition.metadata gives it: the segments go to that lineage,
// and a topicID other than the bucket's current one for a topic re-creates
// it there (the old lineage is superseded).
func UploadAllID(t testing.TB, e *Env, b objstore.Bucket, topicID string) {
	t.Helper()
	upload(t, WithTopicID(remotetier.NewLocalSource(e.Dir, vfs.Default), topicID), b)
}

// WithTopicID gives every partition src lists topic ID id, as a broker's
// partition.metadata does (tiered's own log engine has none).
func WithTopicID(src remotetier.Source, id string) remotetier.Source { return idSource{src, id} }

// idSource gives every partition of its source topic ID id.
type idSource struct {
	remotetier.Source
	id string
}

func (s idSource) Partitions(ctx context.Context) ([]remotetier.Partition, error) {
	ps, err := s.Source.Partitions(ctx)
	for i := range ps {
		ps[i].TopicID = s.id
	}
	return ps, err
}

func upload(t testing.TB, src remotetier.Source, b objstore.Bucket) {
	t.Helper()
	u, err := remotetier.NewUploader(b, src, remotetier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := u.RunOnce(context.Background()); err != nil || rep.UploadedSegments == 0 {
		t.Fatalf("upload: %v (%+v)", err, rep)
	}
}

// Offload rolls l, uploads every rolled segment of the env to a new memory
// bucket, and deletes them locally, as local retention would after the
// upload: the offsets below l's new log start are only in the bucket.
func Offload(t testing.TB, e *Env, l *localtier.Log) *objstore.Memory {
	t.Helper()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mem := objstore.NewMemory()
	UploadAll(t, e, mem)
	if _, err := l.DeleteSegments(l.Segments()[len(l.Segments())-1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	return mem
}

// OffloadedTopic creates topic (one partition, remote storage on) with 60
// records in the bucket only (Offload) and tail records after them in the
// local log, in batches of 3: a serve partition whose older offsets are
// remote. It returns the partition's log and the bucket.
func OffloadedTopic(t testing.TB, e *Env, topic string, tail int) (*localtier.Log, *objstore.Memory) {
	t.Helper()
	e.Topic(topic, 1, map[string]string{"remote.storage.enable": "true"})
	l := e.Log(topic, 0)
	e.Produce(l, ProduceOpts{Per: 4}, GenRecs(60, Ts0, "a"))
	mem := Offload(t, e, l)
	e.Produce(l, ProduceOpts{Per: 3}, GenRecs(tail, Ts0+5000, "b"))
	if l.LogStartOffset() == 0 {
		t.Fatal("setup: nothing was offloaded")
	}
	return l, mem
}

// EditJSONFile rewrites the JSON object in path after edit changed it (a
// replay checkpoint as another release, or an earlier moment, wrote it).
func EditJSONFile(t testing.TB, path string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	edit(m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
