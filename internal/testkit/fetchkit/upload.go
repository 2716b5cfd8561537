package fetchkit

import (
	"context"
	"testing"

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
