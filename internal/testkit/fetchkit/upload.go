package fetchkit

import (
	"context"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// UploadAll uploads a local env's rolled segments to a memory bucket.
func UploadAll(t testing.TB, e *Env, b objstore.Bucket) {
	t.Helper()
	u, err := remotetier.NewUploader(b, remotetier.NewLocalSource(e.Dir, vfs.Default), remotetier.Options{})
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
