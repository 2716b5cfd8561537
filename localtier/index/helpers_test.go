package index

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

// forEachFS runs fn on the OS filesystem and on a MemFS.
func forEachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/data/p-0", 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, m, "/data/p-0")
	})
}

func readFile(t *testing.T, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func join(dir, name string) string { return filepath.Join(dir, name) }

func mustCorrupt(t *testing.T, err error) *CorruptIndexError {
	t.Helper()
	var ce *CorruptIndexError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want *CorruptIndexError", err)
	}
	return ce
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
