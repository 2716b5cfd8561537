package vfs

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOverlayBaseFiles changes files that exist in the base through an
// Overlay: the overlay shows every change, the base keeps its bytes.
func TestOverlayBaseFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"seg.log": "0123456789", "seg.index": "abcdefgh", "gone": "x", "sub/deep": "deep"}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotTree(t, dir)
	o := NewOverlay(Default)
	path := func(n string) string { return filepath.Join(dir, n) }

	// Truncate a base file (no copy), read through two handles.
	f, err := o.OpenFile(path("seg.log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, o, path("seg.log")); got != "0123" {
		t.Fatalf("after truncate the overlay reads %q", got)
	}
	p := make([]byte, 8)
	if n, err := f.ReadAt(p, 2); n != 2 || err != io.EOF || string(p[:n]) != "23" {
		t.Fatalf("ReadAt past the truncated end = %d %v %q", n, err, p[:n])
	}
	// A write copies the bytes into memory.
	if _, err := f.WriteAt([]byte("XY"), 3); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, o, path("seg.log")); got != "012XY" {
		t.Fatalf("after write the overlay reads %q", got)
	}
	// A handle stays on its file across a rename.
	if err := o.Rename(path("seg.log"), path("seg.log.swap")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReadAt(p[:5], 0); n != 5 || err != nil || string(p[:5]) != "012XY" {
		t.Fatalf("renamed handle reads %q, %v", p[:n], err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stat(path("seg.log")); !os.IsNotExist(err) {
		t.Fatalf("renamed-away file: Stat = %v", err)
	}
	// Rename of an untouched base file, removal, a new file, a removed dir.
	if err := o.Rename(path("seg.index"), path("seg.index.deleted")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, o, path("seg.index.deleted")); got != "abcdefgh" {
		t.Fatalf("renamed base file reads %q", got)
	}
	if err := o.Remove(path("gone")); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(path("gone")); !os.IsNotExist(err) {
		t.Fatalf("second Remove = %v", err)
	}
	if err := WriteFileAtomic(o, path("checkpoint"), []byte("cp")); err != nil {
		t.Fatal(err)
	}
	if err := o.RemoveAll(path("sub")); err != nil {
		t.Fatal(err)
	}
	ents, err := o.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"checkpoint", "seg.index.deleted", "seg.log.swap"}; !slices.Equal(names, want) {
		t.Fatalf("overlay lists %v, want %v", names, want)
	}
	if err := o.MkdirAll(path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ents, err := o.ReadDir(path("sub")); err != nil || len(ents) != 0 {
		t.Fatalf("recreated dir lists %v, %v: the removed base files must stay hidden", ents, err)
	}
	if after := snapshotTree(t, dir); !maps.Equal(before, after) {
		t.Fatalf("the overlay changed its base:\nbefore %v\nafter  %v", before, after)
	}
}
