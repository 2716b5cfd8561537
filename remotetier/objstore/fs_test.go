package objstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

func newFS(t *testing.T, dir string) *objstore.Filesystem {
	t.Helper()
	b, err := objstore.NewFilesystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// tree lists every file and directory under dir (relative, '/'-separated).
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." {
			if d.IsDir() {
				rel += "/"
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFilesystemFailedPutLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := newFS(t, dir)
	objtesting.MustPut(t, b, "seg/old", []byte("original"))
	before := tree(t, dir)
	boom := errors.New("reader broke")
	for _, key := range []string{"seg/old", "seg/new", "fresh/dir/new"} {
		_, err := b.Put(ctx, key, &objtesting.FailingReader{Data: objtesting.Pattern(1, 100_000), Err: boom}, 200_000, objstore.Condition{})
		if !errors.Is(err, boom) {
			t.Fatalf("Put %s = %v, want the reader's error", key, err)
		}
		_, err = b.Put(ctx, key, bytes.NewReader([]byte("short")), 6, objstore.Condition{})
		if !errors.Is(err, objstore.ErrSizeMismatch) {
			t.Fatalf("Put %s short = %v, want ErrSizeMismatch", key, err)
		}
	}
	if after := tree(t, dir); !slices.Equal(after, before) {
		t.Errorf("failed puts changed the directory:\nbefore %q\nafter  %q", before, after)
	}
	if got := objtesting.MustGet(t, b, "seg/old"); string(got) != "original" {
		t.Errorf("old object = %q", got)
	}
}

// TestFilesystemKillMidPut kills -9 a process in the middle of a Put and
// checks that neither the overwritten key nor a new key shows a partial
// object, and that the bucket keeps working.
func TestFilesystemKillMidPut(t *testing.T) {
	dir := t.TempDir()
	b := newFS(t, dir)
	old := objtesting.MustPut(t, b, "seg/existing", []byte("committed before the crash"))
	for _, key := range []string{"seg/existing", "seg/new"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFilesystemHelperProcess$")
		cmd.Env = append(os.Environ(), "TIERED_FS_HELPER=put-and-hang", "TIERED_FS_DIR="+dir, "TIERED_FS_KEY="+key)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = strings.NewReader("") // the helper's reader hangs on its own pipe
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "HALF\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q, %v", line, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	// Half-written temporaries exist but are not objects.
	if tmps, _ := os.ReadDir(filepath.Join(dir, ".tiered-tmp")); len(tmps) != 2 {
		t.Errorf("expected the two killed puts' temporaries, found %d", len(tmps))
	}
	b2 := newFS(t, dir) // a fresh open after the crash
	if got := objtesting.MustGet(t, b2, "seg/existing"); string(got) != "committed before the crash" {
		t.Errorf("overwritten key after crash = %q", got)
	}
	if a, err := b2.Attributes(context.Background(), "seg/existing"); err != nil || a.ETag != old.ETag {
		t.Errorf("attributes after crash = %+v, %v", a, err)
	}
	if _, err := b2.Get(context.Background(), "seg/new"); !objstore.IsNotFound(err) {
		t.Errorf("new key after crash: %v, want ErrNotFound", err)
	}
	var keys []string
	b2.List(context.Background(), "", func(i objstore.ObjectInfo) error { keys = append(keys, i.Key); return nil })
	if !slices.Equal(keys, []string{"seg/existing"}) {
		t.Errorf("List after crash = %q", keys)
	}
	objtesting.MustPut(t, b2, "seg/new", []byte("retried"))
}

// TestFilesystemCrossProcessIfMatch races processes (each its own flock
// handle) swapping the same object from the same ETag: exactly one wins.
func TestFilesystemCrossProcessIfMatch(t *testing.T) {
	dir := t.TempDir()
	b := newFS(t, dir)
	base := objtesting.MustPut(t, b, "manifest", []byte("v0"))
	const procs = 4
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range procs {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestFilesystemHelperProcess$")
		cmds[i].Env = append(os.Environ(), "TIERED_FS_HELPER=if-match", "TIERED_FS_DIR="+dir,
			"TIERED_FS_KEY=manifest", "TIERED_FS_ETAG="+base.ETag, fmt.Sprintf("TIERED_FS_ID=%d", i))
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout = outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	winners := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v: %s", i, err, outs[i])
		}
		switch out := outs[i].String(); {
		case strings.Contains(out, "WON"):
			winners++
		case strings.Contains(out, "LOST"):
		default:
			t.Errorf("helper %d said %q", i, out)
		}
	}
	if winners != 1 {
		t.Errorf("%d processes won the swap, want 1", winners)
	}
}

// TestFilesystemHelperProcess is the child of the tests above.
func TestFilesystemHelperProcess(t *testing.T) {
	mode := os.Getenv("TIERED_FS_HELPER")
	if mode == "" {
		t.Skip("helper process only")
	}
	b, err := objstore.NewFilesystem(os.Getenv("TIERED_FS_DIR"))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	key := os.Getenv("TIERED_FS_KEY")
	switch mode {
	case "put-and-hang":
		r, w, _ := os.Pipe()
		go func() {
			w.Write(objtesting.Pattern(9, 1<<20))
			time.Sleep(100 * time.Millisecond) // let the Put copy it to disk
			fmt.Println("HALF")
			// never closes w: the Put waits for the rest until killed
		}()
		b.Put(context.Background(), key, r, 2<<20, objstore.Condition{})
		fmt.Println("UNREACHABLE")
		os.Exit(3)
	case "if-match":
		data := []byte("from " + os.Getenv("TIERED_FS_ID"))
		_, err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.IfMatch(os.Getenv("TIERED_FS_ETAG")))
		switch {
		case err == nil:
			fmt.Println("WON")
		case objstore.IsPreconditionFailed(err):
			fmt.Println("LOST")
		default:
			fmt.Println("ERR", err)
		}
		os.Exit(0)
	}
}

func TestFilesystemRefusesEscapingKeys(t *testing.T) {
	ctx := context.Background()
	outer := t.TempDir()
	root := filepath.Join(outer, "bucket")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newFS(t, root)
	for _, key := range []string{
		"../escape", "a/../../escape", "/etc/passwd", "..", "a/..", ".tiered-tmp/x", ".tiered-lock",
		strings.Repeat("x", 256), "ok/" + strings.Repeat("y", 256),
	} {
		if _, err := b.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Get(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if got := tree(t, outer); !slices.Equal(got, []string{"bucket/", "bucket/.tiered-lock", "bucket/.tiered-tmp/"}) {
		t.Errorf("files appeared: %q", got)
	}
	// 255 bytes is a legal name.
	objtesting.MustPut(t, b, strings.Repeat("z", 255), []byte("ok"))
}

func TestFilesystemETagWithoutXattr(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := newFS(t, dir)
	a := objtesting.MustPut(t, b, "k", []byte("content"))
	if err := unix.Removexattr(filepath.Join(dir, "k"), "user.tiered.etag"); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	got, err := b.Attributes(ctx, "k")
	if err != nil || got.ETag != a.ETag {
		t.Fatalf("recomputed ETag %q (%v), want %q", got.ETag, err, a.ETag)
	}
	if _, err := b.Put(ctx, "k", strings.NewReader("next"), 4, objstore.IfMatch(a.ETag)); err != nil {
		t.Fatalf("IfMatch against a recomputed ETag: %v", err)
	}
	// A file put there by hand is an object, with the same ETag the memory
	// backend gives the same bytes; a bogus xattr is ignored.
	if err := os.WriteFile(filepath.Join(dir, "by-hand"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	unix.Setxattr(filepath.Join(dir, "by-hand"), "user.tiered.etag", []byte("garbage"), 0)
	mem := objstore.NewMemory()
	want := objtesting.MustPut(t, mem, "x", []byte("content"))
	if got, err := b.Attributes(ctx, "by-hand"); err != nil || got.ETag != want.ETag || got.ETag != a.ETag {
		t.Errorf("hand-placed file ETag %q (%v), want %q", got.ETag, err, want.ETag)
	}
}

func TestFilesystemKeyConflicts(t *testing.T) {
	ctx := context.Background()
	b := newFS(t, t.TempDir())
	objtesting.MustPut(t, b, "a", []byte("file"))
	_, err := b.Put(ctx, "a/b", strings.NewReader("x"), 1, objstore.Condition{})
	if err == nil || errors.Is(err, objstore.ErrInvalidKey) || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("Put below an object = %v, want a conflict error", err)
	}
	objtesting.MustPut(t, b, "c/d", []byte("file"))
	_, err = b.Put(ctx, "c", strings.NewReader("x"), 1, objstore.Condition{})
	if err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Put over a directory = %v, want a directory error", err)
	}
	if err := b.Delete(ctx, "c"); err != nil {
		t.Errorf("Delete of a directory name: %v", err)
	}
	if got := objtesting.MustGet(t, b, "c/d"); string(got) != "file" {
		t.Errorf("c/d = %q after deleting c", got)
	}
}

func TestFilesystemDeletePrunesEmptyDirs(t *testing.T) {
	dir := t.TempDir()
	b := newFS(t, dir)
	objtesting.MustPut(t, b, "t/p/seg1", []byte("1"))
	objtesting.MustPut(t, b, "t/q/seg2", []byte("2"))
	if err := b.Delete(context.Background(), "t/p/seg1"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); !slices.Equal(got, []string{".tiered-lock", ".tiered-tmp/", "t/", "t/q/", "t/q/seg2"}) {
		t.Errorf("tree after delete = %q", got)
	}
}

func TestFilesystemRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	newFS(t, dir)
	stale := filepath.Join(dir, ".tiered-tmp", "put-stale")
	fresh := filepath.Join(dir, ".tiered-tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	newFS(t, dir)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary (maybe another writer's) removed: %v", err)
	}
}

func TestFilesystemGetReadsOneVersion(t *testing.T) {
	// A reader opened before an overwrite keeps reading the old version.
	b := newFS(t, t.TempDir())
	objtesting.MustPut(t, b, "k", []byte("old version"))
	rc, attrs, err := objstore.GetWithAttrs(context.Background(), b, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	objtesting.MustPut(t, b, "k", []byte("new version!"))
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != "old version" || attrs.Size != 11 {
		t.Errorf("read %q (%v), attrs %+v", got, err, attrs)
	}
}
