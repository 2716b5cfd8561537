package vfs

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// forEachFS runs fn against the OS filesystem (in a temp dir) and a MemFS
// (in a directory of the same name), so both implement one contract.
func forEachFS(t *testing.T, fn func(t *testing.T, fs FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { fn(t, Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		fs := NewMem()
		dir := "/tmp/vfs-contract"
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, fs, dir)
	})
	// An Overlay over an OS directory (overlay_test.go covers base files
	// taken over).
	t.Run("overlay", func(t *testing.T) {
		dir := t.TempDir()
		before := snapshotTree(t, dir)
		fn(t, NewOverlay(Default), dir)
		if after := snapshotTree(t, dir); !maps.Equal(before, after) {
			t.Fatalf("the overlay changed its base: before %v, after %v", before, after)
		}
	})
}

// snapshotTree maps every file under dir (except lock files, the one thing
// an Overlay writes to its base) to its contents.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), "lock") {
			return nil
		}
		if d.IsDir() {
			out[path] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustCreate(t *testing.T, fs FS, name, content string) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, fs FS, name string) string {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErrIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want one matching %v", err, target)
	}
}

func TestContract(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, fs FS, dir string)
	}{
		{"write_read_readat", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			f, err := fs.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, s := range []string{"hello", " world"} {
				if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if fi, err := f.Stat(); err != nil || fi.Size() != 11 || fi.Name() != "f" || fi.IsDir() {
				t.Fatalf("Stat = %v, %v", fi, err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(f); err != nil || string(b) != "hello world" {
				t.Fatalf("ReadAll = %q, %v", b, err)
			}
			if n, err := f.Read(make([]byte, 4)); n != 0 || err != io.EOF {
				t.Fatalf("Read at EOF = %d, %v", n, err)
			}
			p := make([]byte, 5)
			if n, err := f.ReadAt(p, 6); n != 5 || err != nil || string(p) != "world" {
				t.Fatalf("ReadAt(6) = %d, %v, %q", n, err, p)
			}
			if n, err := f.ReadAt(p, 8); n != 3 || err != io.EOF || string(p[:n]) != "rld" {
				t.Fatalf("ReadAt past end = %d, %v, %q", n, err, p[:n])
			}
			if n, err := f.ReadAt(p, 100); n != 0 || err != io.EOF {
				t.Fatalf("ReadAt beyond = %d, %v", n, err)
			}
			if f.Name() != name {
				t.Fatalf("Name = %q, want %q", f.Name(), name)
			}
		}},
		{"seek_and_write_past_end", func(t *testing.T, fs FS, dir string) {
			f, err := fs.Create(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("abcdef")); err != nil {
				t.Fatal(err)
			}
			if pos, err := f.Seek(-2, io.SeekEnd); pos != 4 || err != nil {
				t.Fatalf("Seek(-2, End) = %d, %v", pos, err)
			}
			if pos, err := f.Seek(-1, io.SeekCurrent); pos != 3 || err != nil {
				t.Fatalf("Seek(-1, Current) = %d, %v", pos, err)
			}
			if _, err := f.Seek(-1, io.SeekStart); err == nil {
				t.Fatal("Seek to negative offset succeeded")
			}
			if _, err := f.Seek(2, io.SeekEnd); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("X")); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("Z"), 11); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, f.Name()); got != "abcdef\x00\x00X\x00\x00Z" {
				t.Fatalf("content %q", got)
			}
		}},
		{"truncate_zero_fills", func(t *testing.T, fs FS, dir string) {
			f, err := fs.Create(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("abcdef")); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(2); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, f.Name()); got != "ab\x00\x00" {
				t.Fatalf("content %q, want old bytes gone", got)
			}
			if err := f.Truncate(-1); err == nil {
				t.Fatal("Truncate(-1) succeeded")
			}
		}},
		{"create_truncates_existing", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			mustCreate(t, fs, name, "old content")
			mustCreate(t, fs, name, "new")
			if got := readAll(t, fs, name); got != "new" {
				t.Fatalf("content %q", got)
			}
		}},
		{"open_flags", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			_, err := fs.Open(name)
			wantErrIs(t, err, os.ErrNotExist)
			_, err = fs.OpenFile(name, os.O_RDWR, 0)
			wantErrIs(t, err, os.ErrNotExist)
			mustCreate(t, fs, name, "abc")
			_, err = fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			wantErrIs(t, err, os.ErrExist)

			ro, err := fs.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ro.Write([]byte("x")); err == nil {
				t.Fatal("Write on read-only file succeeded")
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}

			ap, err := fs.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ap.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			if _, err := ap.Write([]byte("de")); err != nil {
				t.Fatal(err)
			}
			if _, err := ap.WriteAt([]byte("z"), 0); err == nil {
				t.Fatal("WriteAt on O_APPEND file succeeded")
			}
			if err := ap.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, name); got != "abcde" {
				t.Fatalf("content %q", got)
			}

			rw, err := fs.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := rw.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, name); got != "" {
				t.Fatalf("after O_TRUNC content %q", got)
			}
		}},
		{"closed_file", func(t *testing.T, fs FS, dir string) {
			f, err := fs.Create(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = f.Write([]byte("x"))
			wantErrIs(t, err, os.ErrClosed)
			wantErrIs(t, f.Close(), os.ErrClosed)
		}},
		{"rename_replaces_and_keeps_open_handles", func(t *testing.T, fs FS, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			mustCreate(t, fs, a, "new")
			mustCreate(t, fs, b, "old")
			oldHandle, err := fs.Open(b)
			if err != nil {
				t.Fatal(err)
			}
			defer oldHandle.Close()
			if err := fs.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, b); got != "new" {
				t.Fatalf("b = %q", got)
			}
			_, err = fs.Stat(a)
			wantErrIs(t, err, os.ErrNotExist)
			if got, err := io.ReadAll(oldHandle); err != nil || string(got) != "old" {
				t.Fatalf("handle on replaced file reads %q, %v", got, err)
			}
			wantErrIs(t, fs.Rename(a, b), os.ErrNotExist)
		}},
		{"rename_across_dirs", func(t *testing.T, fs FS, dir string) {
			src, dst := filepath.Join(dir, "x", "f"), filepath.Join(dir, "y", "g")
			for _, d := range []string{filepath.Dir(src), filepath.Dir(dst)} {
				if err := fs.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mustCreate(t, fs, src, "data")
			if err := fs.Rename(src, dst); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, dst); got != "data" {
				t.Fatalf("dst = %q", got)
			}
			if err := fs.Rename(filepath.Join(dir, "y"), filepath.Join(dir, "z")); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, filepath.Join(dir, "z", "g")); got != "data" {
				t.Fatalf("after dir rename = %q", got)
			}
		}},
		{"remove", func(t *testing.T, fs FS, dir string) {
			f, sub := filepath.Join(dir, "f"), filepath.Join(dir, "sub")
			mustCreate(t, fs, f, "x")
			if err := fs.Remove(f); err != nil {
				t.Fatal(err)
			}
			_, err := fs.Stat(f)
			wantErrIs(t, err, os.ErrNotExist)
			wantErrIs(t, fs.Remove(f), os.ErrNotExist)
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			mustCreate(t, fs, filepath.Join(sub, "g"), "y")
			if err := fs.Remove(sub); err == nil {
				t.Fatal("Remove of non-empty dir succeeded")
			}
			if err := fs.RemoveAll(sub); err != nil {
				t.Fatal(err)
			}
			_, err = fs.Stat(sub)
			wantErrIs(t, err, os.ErrNotExist)
			if err := fs.RemoveAll(sub); err != nil {
				t.Fatalf("RemoveAll of missing dir: %v", err)
			}
			if err := fs.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fs.Remove(sub); err != nil {
				t.Fatalf("Remove of empty dir: %v", err)
			}
		}},
		{"readdir_sorted", func(t *testing.T, fs FS, dir string) {
			for _, n := range []string{"c", "a", "00000000000000000010.log", "b"} {
				mustCreate(t, fs, filepath.Join(dir, n), n)
			}
			if err := fs.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			ents, err := fs.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
				if e.IsDir() != (e.Name() == "d") {
					t.Fatalf("%s IsDir = %v", e.Name(), e.IsDir())
				}
			}
			want := []string{"00000000000000000010.log", "a", "b", "c", "d"}
			if !slices.Equal(names, want) {
				t.Fatalf("ReadDir = %v, want %v", names, want)
			}
			_, err = fs.ReadDir(filepath.Join(dir, "missing"))
			wantErrIs(t, err, os.ErrNotExist)
			if _, err := fs.ReadDir(filepath.Join(dir, "a")); err == nil {
				t.Fatal("ReadDir of a file succeeded")
			}
		}},
		{"mkdirall_and_stat", func(t *testing.T, fs FS, dir string) {
			deep := filepath.Join(dir, "a", "b", "c")
			if err := fs.MkdirAll(deep, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fs.MkdirAll(deep, 0o755); err != nil {
				t.Fatalf("MkdirAll of existing dir: %v", err)
			}
			fi, err := fs.Stat(deep)
			if err != nil || !fi.IsDir() || fi.Name() != "c" {
				t.Fatalf("Stat = %v, %v", fi, err)
			}
			file := filepath.Join(dir, "file")
			mustCreate(t, fs, file, "x")
			if err := fs.MkdirAll(filepath.Join(file, "sub"), 0o755); err == nil {
				t.Fatal("MkdirAll below a file succeeded")
			}
			_, err = fs.Create(filepath.Join(dir, "nodir", "f"))
			wantErrIs(t, err, os.ErrNotExist)
		}},
		{"sync_dir", func(t *testing.T, fs FS, dir string) {
			if err := fs.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
			wantErrIs(t, fs.SyncDir(filepath.Join(dir, "missing")), os.ErrNotExist)
			if err := MkdirAllSync(fs, filepath.Join(dir, "p", "q"), 0o755); err != nil {
				t.Fatal(err)
			}
			if fi, err := fs.Stat(filepath.Join(dir, "p", "q")); err != nil || !fi.IsDir() {
				t.Fatalf("Stat = %v, %v", fi, err)
			}
		}},
		{"lock", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, ".lock")
			l1, err := fs.Lock(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Stat(name); err != nil {
				t.Fatalf("Lock did not create the file: %v", err)
			}
			_, err = fs.Lock(name)
			wantErrIs(t, err, ErrLocked)
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q does not name %s", err, name)
			}
			if err := l1.Close(); err != nil {
				t.Fatal(err)
			}
			l2, err := fs.Lock(name)
			if err != nil {
				t.Fatalf("relock after release: %v", err)
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Lock(filepath.Join(dir, "nodir", ".lock")); err == nil {
				t.Fatal("Lock in a missing directory succeeded")
			}
		}},
		{"chtimes", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			mustCreate(t, fs, name, "x")
			at := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
			if err := fs.Chtimes(name, at, at); err != nil {
				t.Fatal(err)
			}
			if fi, err := fs.Stat(name); err != nil || !fi.ModTime().Equal(at) {
				t.Fatalf("Stat = %v, %v; want modification time %v", fi, err, at)
			}
			later := at.Add(time.Hour)
			if err := fs.Chtimes(name, later, later); err != nil {
				t.Fatal(err)
			}
			ents, err := fs.ReadDir(dir)
			if err != nil || len(ents) != 1 {
				t.Fatalf("ReadDir = %v, %v", ents, err)
			}
			if fi, err := ents[0].Info(); err != nil || !fi.ModTime().Equal(later) {
				t.Fatalf("ReadDir info = %v, %v; want modification time %v", fi, err, later)
			}
			wantErrIs(t, fs.Chtimes(filepath.Join(dir, "missing"), at, at), os.ErrNotExist)
		}},
		{"create_temp", func(t *testing.T, fs FS, dir string) {
			seen := map[string]bool{}
			for range 20 {
				f, err := CreateTemp(fs, dir, "chunk.*.tmp")
				if err != nil {
					t.Fatal(err)
				}
				name := f.Name()
				base := filepath.Base(name)
				if filepath.Dir(name) != dir || !strings.HasPrefix(base, "chunk.") || !strings.HasSuffix(base, ".tmp") || len(base) <= len("chunk..tmp") {
					t.Fatalf("temporary file %q does not follow the pattern in %s", name, dir)
				}
				if seen[name] {
					t.Fatalf("temporary name %s handed out twice", name)
				}
				seen[name] = true
				if _, err := f.Write([]byte(base)); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, fs, name); got != base {
					t.Fatalf("%s holds %q", name, got)
				}
			}
			f, err := CreateTemp(fs, dir, "plain")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if base := filepath.Base(f.Name()); !strings.HasPrefix(base, "plain") || base == "plain" {
				t.Fatalf("pattern without * gave %q", base)
			}
			if _, err := CreateTemp(fs, dir, "a/b*"); err == nil {
				t.Fatal("pattern with a separator accepted")
			}
			_, err = CreateTemp(fs, filepath.Join(dir, "nodir"), "x*")
			wantErrIs(t, err, os.ErrNotExist)
		}},
		{"read_file", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "f")
			for _, data := range []string{"", "abc", strings.Repeat("y", 70000)} {
				mustCreate(t, fs, name, data)
				got, err := ReadFile(fs, name)
				if err != nil || string(got) != data {
					t.Fatalf("ReadFile = %d bytes, %v; want %d bytes", len(got), err, len(data))
				}
			}
			_, err := ReadFile(fs, filepath.Join(dir, "missing"))
			wantErrIs(t, err, os.ErrNotExist)
		}},
		{"write_file_atomic", func(t *testing.T, fs FS, dir string) {
			name := filepath.Join(dir, "checkpoint")
			for _, data := range [][]byte{[]byte("0\n1\nfoo 0 5\n"), nil, bytes.Repeat([]byte("x"), 70000)} {
				if err := WriteFileAtomic(fs, name, data); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, fs, name); got != string(data) {
					t.Fatalf("content has %d bytes, want %d", len(got), len(data))
				}
			}
			ents, err := fs.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 || ents[0].Name() != "checkpoint" {
				t.Fatalf("dir holds %v, want only checkpoint", ents)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { forEachFS(t, tt.run) })
	}
}
