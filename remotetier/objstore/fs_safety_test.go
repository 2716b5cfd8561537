package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

// resolvers runs fn with each way the filesystem backend resolves keys:
// openat2 (Linux) and the portable openat walk.
func resolvers(t *testing.T, fn func(t *testing.T)) {
	t.Run("walk", func(t *testing.T) { objstore.UseOpenat2(t, false); fn(t) })
	if objstore.HaveOpenat2 {
		t.Run("openat2", func(t *testing.T) { objstore.UseOpenat2(t, true); fn(t) })
	}
}

// bucketModes opens dir read-write and read-only.
var bucketModes = []struct {
	name string
	open func(string) (*objstore.Filesystem, error)
}{
	{"read-write", objstore.NewFilesystem},
	{"read-only", objstore.NewFilesystemReadOnly},
}

// readAll is every read of key: Get, GetRange and Attributes.
func readAll(ctx context.Context, b objstore.BucketReader, key string) []error {
	var errs []error
	rc, err := b.Get(ctx, key)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	errs = append(errs, err)
	rc, err = b.GetRange(ctx, key, 0, 4)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	errs = append(errs, err)
	_, err = b.Attributes(ctx, key)
	return append(errs, err)
}

// TestFilesystemRefusesSymlinks plants links inside the bucket — to a
// file outside it, to a directory outside it, and to an object inside it —
// and requires every read through them to fail with ErrSymlink naming the
// key, a List through a linked directory to fail the same way, and writes
// never to reach outside the bucket.
func TestFilesystemRefusesSymlinks(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		for _, mode := range bucketModes {
			t.Run(mode.name, func(t *testing.T) {
				ctx := context.Background()
				outer := t.TempDir()
				secret := filepath.Join(outer, "secret")
				if err := os.WriteFile(secret, []byte("SECRET DATA"), 0o600); err != nil {
					t.Fatal(err)
				}
				outDir := filepath.Join(outer, "elsewhere")
				if err := os.MkdirAll(filepath.Join(outDir, "00"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(outDir, "00", "x.log"), []byte("OUTSIDE"), 0o644); err != nil {
					t.Fatal(err)
				}
				root := filepath.Join(outer, "bucket")
				rw := newFS(t, mkdir(t, root))
				objtesting.MustPut(t, rw, "t-0/real.log", []byte("inside"))
				links := map[string]string{
					"t-0/evil.log":           secret,                              // object linked out
					"t-1":                    outDir,                              // partition dir linked out
					"t-0/alias.log":          filepath.Join(root, "t-0/real.log"), // link inside the bucket
					"t-0/relative.log":       "../../secret",                      // relative, climbing out
					"manifests/t/0/manifest": secret,
				}
				for key, target := range links {
					p := filepath.Join(root, filepath.FromSlash(key))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(target, p); err != nil {
						t.Fatal(err)
					}
				}
				b, err := mode.open(root)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				for _, key := range []string{"t-0/evil.log", "t-1/00/x.log", "t-0/alias.log", "t-0/relative.log", "manifests/t/0/manifest"} {
					for i, err := range readAll(ctx, b, key) {
						if !errors.Is(err, objstore.ErrSymlink) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
							t.Errorf("read %d of %s = %v, want ErrSymlink naming the key", i, key, err)
						}
					}
				}
				if err := b.List(ctx, "t-1/00/", func(objstore.ObjectInfo) error { return nil }); !errors.Is(err, objstore.ErrSymlink) {
					t.Errorf("List through a linked directory = %v, want ErrSymlink", err)
				}
				var listed []string
				if err := b.List(ctx, "", func(o objstore.ObjectInfo) error { listed = append(listed, o.Key); return nil }); err != nil {
					t.Fatal(err)
				}
				// Links are listed (not followed), so readers see them fail.
				wantListed := []string{"manifests/t/0/manifest", "t-0/alias.log", "t-0/evil.log", "t-0/real.log", "t-0/relative.log", "t-1"}
				if !slices.Equal(listed, wantListed) {
					t.Errorf("List = %q, want %q", listed, wantListed)
				}
				if got := objtesting.MustGet(t, b, "t-0/real.log"); string(got) != "inside" {
					t.Errorf("regular object = %q", got)
				}
				if mode.name == "read-only" {
					return
				}
				// Writes through a linked directory are refused; a link at
				// the key itself is replaced (Put) or removed (Delete), and
				// what it pointed to is left alone.
				if _, err := b.Put(ctx, "t-1/00/y.log", strings.NewReader("x"), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrSymlink) {
					t.Errorf("Put through a linked directory = %v, want ErrSymlink", err)
				}
				if err := b.Delete(ctx, "t-1/00/x.log"); !errors.Is(err, objstore.ErrSymlink) {
					t.Errorf("Delete through a linked directory = %v, want ErrSymlink", err)
				}
				if _, err := b.Put(ctx, "t-0/evil.log", strings.NewReader("x"), 1, objstore.IfAbsent()); !errors.Is(err, objstore.ErrSymlink) {
					t.Errorf("conditional Put over a link = %v, want ErrSymlink", err)
				}
				if err := b.Delete(ctx, "t-0/relative.log"); err != nil {
					t.Errorf("Delete of a link = %v", err)
				}
				objtesting.MustPut(t, b, "t-0/alias.log", []byte("replaced"))
				if got := objtesting.MustGet(t, b, "t-0/alias.log"); string(got) != "replaced" {
					t.Errorf("replaced link = %q", got)
				}
				for path, want := range map[string]string{secret: "SECRET DATA", filepath.Join(outDir, "00", "x.log"): "OUTSIDE",
					filepath.Join(root, "t-0/real.log"): "inside"} {
					if got, err := os.ReadFile(path); err != nil || string(got) != want {
						t.Errorf("%s = %q, %v; want %q untouched", path, got, err, want)
					}
				}
				if _, err := os.Stat(filepath.Join(outDir, "00", "y.log")); err == nil {
					t.Error("a Put wrote outside the bucket")
				}
			})
		}
	})
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFilesystemSpecialFilesFailAtOnce puts a FIFO (no writer: a blocking
// open would wait forever), a character device and a socket where objects
// should be: every read fails with ErrNotRegular at once.
func TestFilesystemSpecialFilesFailAtOnce(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		for _, mode := range bucketModes {
			t.Run(mode.name, func(t *testing.T) {
				ctx := context.Background()
				root := t.TempDir()
				newFS(t, root)
				if err := os.MkdirAll(filepath.Join(root, "t-0"), 0o755); err != nil {
					t.Fatal(err)
				}
				special := map[string]string{"t-0/fifo.log": "FIFO"}
				if err := unix.Mkfifo(filepath.Join(root, "t-0/fifo.log"), 0o644); err != nil {
					t.Fatal(err)
				}
				// /dev/null's numbers; only root may create a device node.
				if out, err := exec.Command("mknod", filepath.Join(root, "t-0/dev.log"), "c", "1", "3").CombinedOutput(); err == nil {
					special["t-0/dev.log"] = "character device"
				} else {
					t.Logf("no device node (%v %s): checking FIFO and socket only", err, out)
				}
				ln, err := net.Listen("unix", filepath.Join(root, "t-0/sock.log"))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				special["t-0/sock.log"] = ""
				b, err := mode.open(root)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				for key, kind := range special {
					done := make(chan []error, 1)
					go func() { done <- readAll(ctx, b, key) }()
					select {
					case errs := <-done:
						for i, err := range errs {
							if !errors.Is(err, objstore.ErrNotRegular) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || !strings.Contains(err.Error(), kind) {
								t.Errorf("read %d of %s = %v, want ErrNotRegular naming the key and %q", i, key, err, kind)
							}
						}
					case <-time.After(10 * time.Second):
						// Unblock the hung open so the test binary can end.
						if f, err := os.OpenFile(filepath.Join(root, "t-0/fifo.log"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
							f.Close()
						}
						t.Fatalf("reading %s still blocked after 10s", key)
					}
				}
				if mode.name == "read-write" {
					_, err := b.Put(ctx, "t-0/fifo.log", strings.NewReader("x"), 1, objstore.IfAbsent())
					if !errors.Is(err, objstore.ErrNotRegular) {
						t.Errorf("conditional Put over a FIFO = %v, want ErrNotRegular", err)
					}
				}
			})
		}
	})
}

// TestFilesystemReadOnlyWritesNothing opens a bucket read-only: it creates
// no lock file or temporary directory, leaves stale temporaries alone (only
// writers clean up), reads everything and refuses writes with ErrReadOnly.
func TestFilesystemReadOnlyWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "obj"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := t.TempDir()
	rw := newFS(t, fresh)
	objtesting.MustPut(t, rw, "k", []byte("v"))
	stale := filepath.Join(fresh, ".tiered-tmp", "put-stale")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, fresh} {
		before := tree(t, d)
		b, err := objstore.NewFilesystemReadOnly(d)
		if err != nil {
			t.Fatal(err)
		}
		if !b.ReadOnly() {
			t.Error("ReadOnly() = false")
		}
		var keys []string
		if err := b.List(ctx, "", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil || len(keys) != 1 {
			t.Errorf("List = %q, %v", keys, err)
		}
		for _, err := range readAll(ctx, b, keys[0]) {
			if err != nil {
				t.Errorf("read %s: %v", keys[0], err)
			}
		}
		if _, err := b.Put(ctx, "new", bytes.NewReader([]byte("x")), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrReadOnly) {
			t.Errorf("Put = %v, want ErrReadOnly", err)
		}
		if err := b.Delete(ctx, keys[0]); !errors.Is(err, objstore.ErrReadOnly) {
			t.Errorf("Delete = %v, want ErrReadOnly", err)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if after := tree(t, d); !slices.Equal(before, after) {
			t.Errorf("a read-only open changed %s:\nbefore %q\nafter  %q", d, before, after)
		}
	}
}

// TestFilesystemReadOnlyAsUnprivilegedUser reads a bucket whose every
// directory and file is read-only, as uid 65534 (the test runs as root,
// for whom permissions mean nothing, so it re-runs its own binary as that
// user): the read-only open and every read work, and the read-write open
// fails because it cannot create its lock file and temporary directory.
func TestFilesystemReadOnlyAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child as uid 65534 (as a normal user, chmod already protects the bucket)")
	}
	outer := traversableTempDir(t)
	root := filepath.Join(outer, "bucket")
	rw := newFS(t, mkdir(t, root))
	objtesting.MustPut(t, rw, "t-0/00.log", objtesting.Pattern(3, 10_000))
	rw.Close()
	for _, p := range []string{".tiered-tmp", ".tiered-lock"} {
		if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := chmodTree(root, 0o444, 0o555); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(outer, "objstore.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"read-only", "read-write"} {
		cmd := exec.Command(bin, "-test.run=^TestFilesystemUnprivilegedHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TIERED_FS_UNPRIV="+mode, "TIERED_FS_DIR="+root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		switch mode {
		case "read-only":
			if err != nil || !strings.Contains(string(out), "READ 10000 ") {
				t.Errorf("read-only open as uid 65534: %v\n%s", err, out)
			}
		case "read-write":
			if err == nil || !strings.Contains(string(out), "permission denied") {
				t.Errorf("read-write open as uid 65534 should fail for lack of write permission: %v\n%s", err, out)
			}
		}
	}
}

// TestFilesystemUnprivilegedHelper is the child of the test above.
func TestFilesystemUnprivilegedHelper(t *testing.T) {
	mode := os.Getenv("TIERED_FS_UNPRIV")
	if mode == "" {
		t.Skip("helper process only")
	}
	open := objstore.NewFilesystemReadOnly
	if mode == "read-write" {
		open = objstore.NewFilesystem
	}
	b, err := open(os.Getenv("TIERED_FS_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	n := 0
	if err := b.List(ctx, "", func(o objstore.ObjectInfo) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("List: %d objects, %v", n, err)
	}
	got := objtesting.MustGet(t, b, "t-0/00.log")
	for _, err := range readAll(ctx, b, "t-0/00.log") {
		if err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("READ %d %d\n", len(got), os.Getuid())
}

// traversableTempDir is a t.TempDir that other users can reach (the
// testing package makes its parent 0700).
func traversableTempDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// chmodTree sets every file to fileMode and every directory to dirMode.
func chmodTree(root string, fileMode, dirMode os.FileMode) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, dirMode)
		}
		return os.Chmod(p, fileMode)
	})
}

// TestFilesystemLostPreconditionLeavesNoDirectories: an IfMatch Put of a
// key in directories that do not exist fails without creating them.
func TestFilesystemLostPreconditionLeavesNoDirectories(t *testing.T) {
	resolvers(t, func(t *testing.T) {
		dir := t.TempDir()
		b := newFS(t, dir)
		before := tree(t, dir)
		_, err := b.Put(context.Background(), "new/dirs/k", strings.NewReader("x"), 1, objstore.IfMatch(`"0123456789abcdef0123456789abcdef"`))
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			t.Fatalf("Put = %v, want ErrPreconditionFailed", err)
		}
		if after := tree(t, dir); !slices.Equal(before, after) {
			t.Errorf("a lost precondition changed the directory:\nbefore %q\nafter  %q", before, after)
		}
	})
}
