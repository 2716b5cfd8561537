package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"
)

// atomicViolations drives write under OnIndex(i) for i = 0, 1, ... until it
// succeeds, and reports every way it broke the atomic-replace contract:
// a target that is neither old nor new (live, or after a crash), a failure
// that is not the injected one, a swallowed injection, a leftover tmp file,
// or a success that is not durable. old == nil means no previous file.
func atomicViolations(t *testing.T, write func(FS, string, []byte) error, old []byte) (bad []string, ops int64) {
	t.Helper()
	const target = "/data/topic-0/leader-epoch-checkpoint"
	newData := []byte("0\n2\n0 0\n5 1234\n")
	state := func(fs FS) (string, bool) {
		f, err := fs.Open(target)
		if errors.Is(err, os.ErrNotExist) {
			return absent, old == nil
		}
		if err != nil {
			return err.Error(), false
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err.Error(), false
		}
		return string(b), (old != nil && string(b) == string(old)) || string(b) == string(newData)
	}
	for i := int64(0); ; i++ {
		if i > 100 {
			t.Fatal("workload never succeeded")
		}
		mem := NewMem()
		must(t, MkdirAllSync(mem, "/data/topic-0", 0o755))
		if old != nil {
			must(t, WriteFileAtomic(mem, target, old))
		}
		inj := OnIndex(i)
		err := write(NewErrorFS(mem, inj), target, newData)
		if s, ok := state(mem); !ok {
			bad = append(bad, fmt.Sprintf("op %d: live target %q", i, s))
		}
		crashed := mem.CrashClone()
		if s, ok := state(crashed); !ok {
			bad = append(bad, fmt.Sprintf("op %d: target after crash %q", i, s))
		}
		if _, serr := mem.Stat(target + ".tmp"); !errors.Is(serr, os.ErrNotExist) {
			bad = append(bad, fmt.Sprintf("op %d: tmp file left behind (%v)", i, serr))
		}
		if err == nil {
			if inj.Fired() {
				bad = append(bad, fmt.Sprintf("op %d: injected error swallowed", i))
				continue
			}
			if s, _ := state(crashed); s != string(newData) {
				bad = append(bad, fmt.Sprintf("success not durable: after crash %q", s))
			}
			return bad, inj.Ops()
		}
		if !errors.Is(err, ErrInjected) {
			bad = append(bad, fmt.Sprintf("op %d: error not injected: %v", i, err))
		}
		if !inj.Fired() {
			bad = append(bad, fmt.Sprintf("op %d: failed without injection: %v", i, err))
		}
	}
}

func TestWriteFileAtomicUnderInjectedErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  []byte
	}{
		{"fresh", nil},
		{"replace", []byte("0\n1\n0 0\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, ops := atomicViolations(t, WriteFileAtomic, tc.old)
			for _, b := range bad {
				t.Error(b)
			}
			// create, write, sync, close, rename, syncdir: each was failed once.
			if ops != 6 {
				t.Errorf("workload ran %d operations, want 6", ops)
			}
		})
	}
}

// The harness must catch writers that are not atomic, or it proves nothing.
func TestAtomicHarnessCatchesBrokenWriters(t *testing.T) {
	writers := map[string]func(FS, string, []byte) error{
		"in_place": func(fs FS, name string, data []byte) error {
			f, err := fs.Create(name)
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return errors.Join(err, f.Close())
			}
			if err := f.Sync(); err != nil {
				return errors.Join(err, f.Close())
			}
			return f.Close()
		},
		"no_file_sync": func(fs FS, name string, data []byte) error {
			f, err := fs.Create(name + ".tmp")
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return errors.Join(err, f.Close(), fs.Remove(name+".tmp"))
			}
			if err := f.Close(); err != nil {
				return errors.Join(err, fs.Remove(name+".tmp"))
			}
			if err := fs.Rename(name+".tmp", name); err != nil {
				return errors.Join(err, fs.Remove(name+".tmp"))
			}
			return fs.SyncDir(dirOf(name))
		},
		"no_dir_sync": func(fs FS, name string, data []byte) error {
			f, err := fs.Create(name + ".tmp")
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return errors.Join(err, f.Close(), fs.Remove(name+".tmp"))
			}
			if err := f.Sync(); err != nil {
				return errors.Join(err, f.Close(), fs.Remove(name+".tmp"))
			}
			if err := f.Close(); err != nil {
				return errors.Join(err, fs.Remove(name+".tmp"))
			}
			if err := fs.Rename(name+".tmp", name); err != nil {
				return errors.Join(err, fs.Remove(name+".tmp"))
			}
			return nil
		},
		"swallows_errors": func(fs FS, name string, data []byte) error {
			_ = WriteFileAtomic(fs, name, data)
			return nil
		},
	}
	for name, w := range writers {
		t.Run(name, func(t *testing.T) {
			bad, _ := atomicViolations(t, w, []byte("old"))
			if len(bad) == 0 {
				t.Fatal("harness found no violation")
			}
			t.Logf("found %d violations, first: %s", len(bad), bad[0])
		})
	}
}

func TestErrorFSOpSequence(t *testing.T) {
	mem := NewMem()
	must(t, mem.MkdirAll("/d", 0o755))
	var got []string
	fs := NewErrorFS(mem, InjectorFunc(func(op Op) error {
		got = append(got, op.String())
		return nil
	}))
	must(t, WriteFileAtomic(fs, "/d/f", []byte("x")))
	f, err := fs.OpenFile("/d/f", os.O_RDWR, 0)
	must(t, err)
	buf := make([]byte, 1)
	_, err = f.Read(buf)
	must(t, err)
	_, err = f.ReadAt(buf, 0)
	must(t, err)
	_, err = f.WriteAt(buf, 1)
	must(t, err)
	_, err = f.Seek(0, io.SeekStart) // not offered to the injector
	must(t, err)
	must(t, f.Truncate(1))
	_, err = f.Stat()
	must(t, err)
	must(t, f.Close())
	want := []string{
		"create /d/f.tmp", "write /d/f.tmp", "sync /d/f.tmp", "close /d/f.tmp",
		"rename /d/f.tmp -> /d/f", "syncdir /d",
		"open /d/f", "read /d/f", "readat /d/f", "writeat /d/f", "truncate /d/f", "fstat /d/f", "close /d/f",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ops\n got %q\nwant %q", got, want)
	}
}

func TestErrorFSEveryOpInjectable(t *testing.T) {
	mem := NewMem()
	must(t, mem.MkdirAll("/d", 0o755))
	mustCreate(t, mem, "/d/f", "abc")
	fail := NewErrorFS(mem, InjectorFunc(func(op Op) error {
		return fmt.Errorf("%w: %s", ErrInjected, op)
	}))
	pass := NewErrorFS(mem, InjectorFunc(func(Op) error { return nil }))
	f, err := pass.OpenFile("/d/f", os.O_RDWR, 0)
	must(t, err)
	ff := &errorFile{inner: f.(*errorFile).inner, inj: fail.inj}
	buf := make([]byte, 1)
	calls := map[string]func() error{
		"Create":    func() error { _, err := fail.Create("/d/g"); return err },
		"Open":      func() error { _, err := fail.Open("/d/f"); return err },
		"OpenFile":  func() error { _, err := fail.OpenFile("/d/f", os.O_RDONLY, 0); return err },
		"Remove":    func() error { return fail.Remove("/d/f") },
		"RemoveAll": func() error { return fail.RemoveAll("/d") },
		"Rename":    func() error { return fail.Rename("/d/f", "/d/h") },
		"MkdirAll":  func() error { return fail.MkdirAll("/e", 0o755) },
		"ReadDir":   func() error { _, err := fail.ReadDir("/d"); return err },
		"Stat":      func() error { _, err := fail.Stat("/d/f"); return err },
		"SyncDir":   func() error { return fail.SyncDir("/d") },
		"Lock":      func() error { _, err := fail.Lock("/d/LOCK"); return err },
		"Chtimes":   func() error { return fail.Chtimes("/d/f", time.Unix(1, 0), time.Unix(1, 0)) },
		"Read":      func() error { _, err := ff.Read(buf); return err },
		"ReadAt":    func() error { _, err := ff.ReadAt(buf, 0); return err },
		"Write":     func() error { _, err := ff.Write(buf); return err },
		"WriteAt":   func() error { _, err := ff.WriteAt(buf, 0); return err },
		"Sync":      func() error { return ff.Sync() },
		"Truncate":  func() error { return ff.Truncate(0) },
		"FileStat":  func() error { _, err := ff.Stat(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrInjected) {
			t.Errorf("%s: got %v, want ErrInjected", name, err)
		}
	}
	// Nothing reached the inner FS.
	checkFiles(t, mem, map[string]string{"/d/f": "abc", "/d/g": absent, "/d/h": absent, "/d/LOCK": absent})
	if fi, err := mem.Stat("/d/f"); err != nil || fi.ModTime().Equal(time.Unix(1, 0)) {
		t.Errorf("failed Chtimes reached the inner FS: %v, %v", fi, err)
	}
	if _, err := mem.Stat("/e"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/e exists after failed MkdirAll: %v", err)
	}
	// An injected Close still closes the inner file.
	if err := ff.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Close: got %v, want ErrInjected", err)
	}
	if _, err := f.Write(buf); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("inner file still open after injected Close: %v", err)
	}
}

func TestOnIndex(t *testing.T) {
	inj := OnIndex(2)
	for i := range 5 {
		err := inj.MaybeError(Op{Kind: OpFileWrite, Path: "/x"})
		if (i == 2) != errors.Is(err, ErrInjected) {
			t.Fatalf("op %d: err %v", i, err)
		}
		if inj.Fired() != (i >= 2) {
			t.Fatalf("op %d: Fired = %v", i, inj.Fired())
		}
	}
	if inj.Ops() != 5 {
		t.Fatalf("Ops = %d", inj.Ops())
	}
	if OpFileRead.Mutates() || !OpRename.Mutates() || OpKind(99).String() != "OpKind(99)" {
		t.Fatal("OpKind helpers wrong")
	}
}

// CreateTemp tries another name when one exists, gives up after
// createTempTries, and returns any other failure at once.
func TestCreateTempRetries(t *testing.T) {
	exists := func(n int) (*ErrorFS, *int) {
		creates := 0
		return NewErrorFS(NewMem(), InjectorFunc(func(op Op) error {
			if op.Kind != OpCreate {
				return nil
			}
			creates++
			if n < 0 || creates <= n {
				return &os.PathError{Op: "open", Path: op.Path, Err: os.ErrExist}
			}
			return nil
		})), &creates
	}
	fs, creates := exists(3)
	f, err := CreateTemp(fs, "/", "t*")
	must(t, err)
	must(t, f.Close())
	if *creates != 4 {
		t.Fatalf("%d creates, want 3 taken names and one new", *creates)
	}
	fs, creates = exists(-1)
	if _, err := CreateTemp(fs, "/", "t*"); !errors.Is(err, os.ErrExist) || *creates != createTempTries {
		t.Fatalf("every name taken: %v after %d creates, want ErrExist after %d", err, *creates, createTempTries)
	}
	inj := OnIndex(0)
	if _, err := CreateTemp(NewErrorFS(NewMem(), inj), "/", "t*"); !errors.Is(err, ErrInjected) || inj.Ops() != 1 {
		t.Fatalf("injected create: %v after %d ops, want ErrInjected after 1", err, inj.Ops())
	}
}
