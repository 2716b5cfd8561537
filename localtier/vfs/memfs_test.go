package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// absent in a want map means the path must not exist.
const absent = "\x00<absent>"

func memWrite(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkFiles asserts each path's content (or absence) in fs.
func checkFiles(t *testing.T, fs FS, want map[string]string) {
	t.Helper()
	for name, w := range want {
		f, err := fs.Open(name)
		if w == absent {
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: want absent, got err %v", name, err)
			}
			if err == nil {
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(got) != w {
			t.Errorf("%s = %q, %v; want %q", name, got, err, w)
		}
	}
}

func TestCrashClone(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, fs *MemFS)
		live  map[string]string // before the crash
		crash map[string]string // after CrashClone
	}{
		{
			name: "unsynced_write_lost",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				must(t, fs.SyncDir("/d"))
				memWrite(t, f, "data")
				must(t, f.Close())
			},
			live:  map[string]string{"/d/f": "data"},
			crash: map[string]string{"/d/f": ""},
		},
		{
			name: "synced_write_kept",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				memWrite(t, f, "data")
				must(t, f.Sync())
				must(t, f.Close())
				must(t, fs.SyncDir("/d"))
			},
			live:  map[string]string{"/d/f": "data"},
			crash: map[string]string{"/d/f": "data"},
		},
		{
			name: "write_after_sync_lost",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				memWrite(t, f, "aaa")
				must(t, f.Sync())
				must(t, fs.SyncDir("/d"))
				_, err = f.WriteAt([]byte("B"), 1) // in place: must not leak into the synced copy
				must(t, err)
				memWrite(t, f, "ccc")
				must(t, f.Close())
			},
			live:  map[string]string{"/d/f": "aBaccc"},
			crash: map[string]string{"/d/f": "aaa"},
		},
		{
			name: "unsynced_truncate_undone",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				memWrite(t, f, "abcdef")
				must(t, f.Sync())
				must(t, fs.SyncDir("/d"))
				must(t, f.Truncate(2))
				must(t, f.Close())
			},
			live:  map[string]string{"/d/f": "ab"},
			crash: map[string]string{"/d/f": "abcdef"},
		},
		{
			name: "synced_file_without_dir_sync_lost",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				memWrite(t, f, "data")
				must(t, f.Sync())
				must(t, f.Close())
			},
			live:  map[string]string{"/d/f": "data"},
			crash: map[string]string{"/d/f": absent},
		},
		{
			name: "unsynced_rename_undone",
			setup: func(t *testing.T, fs *MemFS) {
				mustDurable(t, fs, "/d/a", "A")
				must(t, fs.Rename("/d/a", "/d/b"))
			},
			live:  map[string]string{"/d/a": absent, "/d/b": "A"},
			crash: map[string]string{"/d/a": "A", "/d/b": absent},
		},
		{
			name: "synced_rename_kept",
			setup: func(t *testing.T, fs *MemFS) {
				mustDurable(t, fs, "/d/a", "A")
				mustDurable(t, fs, "/d/b", "B")
				must(t, fs.Rename("/d/a", "/d/b"))
				must(t, fs.SyncDir("/d"))
			},
			live:  map[string]string{"/d/a": absent, "/d/b": "A"},
			crash: map[string]string{"/d/a": absent, "/d/b": "A"},
		},
		{
			name: "unsynced_remove_undone",
			setup: func(t *testing.T, fs *MemFS) {
				mustDurable(t, fs, "/d/a", "A")
				must(t, fs.Remove("/d/a"))
			},
			live:  map[string]string{"/d/a": absent},
			crash: map[string]string{"/d/a": "A"},
		},
		{
			name: "synced_remove_kept",
			setup: func(t *testing.T, fs *MemFS) {
				mustDurable(t, fs, "/d/a", "A")
				must(t, fs.Remove("/d/a"))
				must(t, fs.SyncDir("/d"))
			},
			live:  map[string]string{"/d/a": absent},
			crash: map[string]string{"/d/a": absent},
		},
		{
			name: "dir_handle_sync_is_sync_dir",
			setup: func(t *testing.T, fs *MemFS) {
				f, err := fs.Create("/d/f")
				must(t, err)
				memWrite(t, f, "x")
				must(t, f.Sync())
				must(t, f.Close())
				d, err := fs.Open("/d")
				must(t, err)
				must(t, d.Sync())
				must(t, d.Close())
			},
			live:  map[string]string{"/d/f": "x"},
			crash: map[string]string{"/d/f": "x"},
		},
		{
			name: "new_dir_needs_parent_sync",
			setup: func(t *testing.T, fs *MemFS) {
				must(t, fs.MkdirAll("/n/m", 0o755))
				mustDurable(t, fs, "/n/m/f", "x") // syncs /n/m but not / or /n
			},
			live:  map[string]string{"/n/m/f": "x"},
			crash: map[string]string{"/n/m/f": absent, "/d/probe": absent},
		},
		{
			name: "mkdirallsync_makes_new_dirs_durable",
			setup: func(t *testing.T, fs *MemFS) {
				must(t, MkdirAllSync(fs, "/n/m", 0o755))
				mustDurable(t, fs, "/n/m/f", "x")
			},
			live:  map[string]string{"/n/m/f": "x"},
			crash: map[string]string{"/n/m/f": "x"},
		},
		{
			name: "write_file_atomic_durable",
			setup: func(t *testing.T, fs *MemFS) {
				must(t, WriteFileAtomic(fs, "/d/cp", []byte("v1")))
			},
			live:  map[string]string{"/d/cp": "v1", "/d/cp.tmp": absent},
			crash: map[string]string{"/d/cp": "v1", "/d/cp.tmp": absent},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewMem()
			must(t, MkdirAllSync(fs, "/d", 0o755))
			tt.setup(t, fs)
			checkFiles(t, fs, tt.live)
			crashed := fs.CrashClone()
			checkFiles(t, crashed, tt.crash)
			checkFiles(t, fs, tt.live) // cloning must not disturb the original
		})
	}
}

// mustDurable creates name with content and makes both durable.
func mustDurable(t *testing.T, fs FS, name, content string) {
	t.Helper()
	f, err := fs.Create(name)
	must(t, err)
	memWrite(t, f, content)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, fs.SyncDir(dirOf(name)))
}

func dirOf(name string) string {
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '/' {
			return name[:i]
		}
	}
	return "/"
}

func TestCrashCloneIsIndependent(t *testing.T) {
	fs := NewMem()
	must(t, MkdirAllSync(fs, "/d", 0o755))
	mustDurable(t, fs, "/d/f", "orig")
	l, err := fs.Lock("/d/LOCK")
	must(t, err)
	defer l.Close()
	must(t, fs.SyncDir("/d"))

	c := fs.CrashClone()
	l2, err := c.Lock("/d/LOCK")
	if err != nil {
		t.Fatalf("lock survived the crash: %v", err)
	}
	must(t, l2.Close())
	f, err := c.OpenFile("/d/f", os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("XXXX"), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	checkFiles(t, fs, map[string]string{"/d/f": "orig"})
	checkFiles(t, c, map[string]string{"/d/f": "XXXX"})
}

func TestMemPathsShareOneRoot(t *testing.T) {
	fs := NewMem()
	must(t, fs.MkdirAll("a/b", 0o755))
	mustCreate(t, fs, "/a/b/../b/./f", "x")
	checkFiles(t, fs, map[string]string{"a/b/f": "x", "/a/b/f": "x"})
	fi, err := fs.Stat("/")
	if err != nil || !fi.IsDir() {
		t.Fatalf("Stat(/) = %v, %v", fi, err)
	}
	if err := fs.Rename("/a", "/a/b/c"); err == nil {
		t.Fatal("renaming a directory into itself succeeded")
	}
}

func TestMemConcurrent(t *testing.T) {
	fs := NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("/d/f%d", i)
			for j := range 50 {
				if err := WriteFileAtomic(fs, name, []byte(fmt.Sprint(j))); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				if _, err := fs.ReadDir("/d"); err != nil {
					errs <- err
					return
				}
				_ = fs.CrashClone()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 8 {
		checkFiles(t, fs, map[string]string{fmt.Sprintf("/d/f%d", i): "49"})
	}
}
