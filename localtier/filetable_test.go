package localtier

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// fdCounter counts the descriptors open on an FS (opens minus closes) and
// the most ever open at once.
type fdCounter struct {
	vfs.FS
	open, peak atomic.Int64
}

func (c *fdCounter) fs(inner vfs.FS) vfs.FS { c.FS = inner; return c }

func (c *fdCounter) Create(name string) (vfs.File, error) {
	return c.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (c *fdCounter) Open(name string) (vfs.File, error) { return c.OpenFile(name, os.O_RDONLY, 0) }

func (c *fdCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return &countedFile{File: f, c: c}, nil
}

type countedFile struct {
	vfs.File
	c    *fdCounter
	once sync.Once
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.c.open.Add(-1) })
	return f.File.Close()
}

// TestFileTableBoundsDescriptors appends to and reads from many partitions
// with several segments each, through a data dir whose open-file table is
// far smaller than the files they have, then reopens the dir: the records
// are all there and the descriptors open at once never passed the table's
// limit (plus the data dir's own checkpoint and config files, one at a
// time). Without a bound the same workload holds every file open.
func TestFileTableBoundsDescriptors(t *testing.T) {
	const parts, rounds = 40, 6
	for _, tc := range []struct {
		name     string
		max      int
		peakOver int // the peak must be above this (unbounded) ...
		peakMax  int // ... and at most this
	}{
		{"table of 8", 8, 0, 8 + 1},
		{"table of 1", 1, 0, 1 + 1},
		{"unbounded", -1, parts * 3, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: dfClock.t}
			var c fdCounter
			fsys := c.fs(vfs.NewMem())
			opts := LogDirOptions{Now: clock.Now, MaxOpenFiles: tc.max}
			d, _, err := OpenLogDir(fsys, "/data", opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateTopic("t", parts, map[string]string{"internal.segment.bytes": "1500", "index.interval.bytes": "200"}); err != nil {
				t.Fatal(err)
			}
			for r := 0; r < rounds; r++ {
				for p := 0; p < parts; p++ {
					l, _ := d.Partition("t", int32(p))
					mustAppend(t, l, batchOf(t, 2, 200, clock.t.UnixMilli(), codec.None))
				}
				if r == rounds/2 {
					if err := d.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			check := func(d *LogDir, what string) {
				t.Helper()
				for p := 0; p < parts; p++ {
					l, _ := d.Partition("t", int32(p))
					if n := len(readAll(t, l)); n != 2*rounds {
						t.Fatalf("%s: partition %d: %d records, want %d", what, p, n, 2*rounds)
					}
					if segs := len(l.Segments()); segs < 2 {
						t.Fatalf("%s: partition %d has %d segments; the test wants rolls", what, p, segs)
					}
				}
			}
			check(d, "before close")
			st, max, bounded := d.OpenFiles()
			if bounded != (tc.max > 0) || (bounded && max != tc.max) {
				t.Fatalf("OpenFiles: max %d bounded %v", max, bounded)
			}
			if bounded && (st.Evictions == 0 || st.Reopens == 0) {
				t.Fatalf("the table never closed and reopened a file: %+v", st)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if n := c.open.Load(); n != 0 {
				t.Fatalf("%d descriptors open after Close", n)
			}
			d, _, err = OpenLogDir(fsys, "/data", opts)
			if err != nil {
				t.Fatal(err)
			}
			check(d, "after reopen")
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if p := c.peak.Load(); p <= int64(tc.peakOver) || p > int64(tc.peakMax) {
				t.Fatalf("peak of %d descriptors open at once; want (%d, %d]", p, tc.peakOver, tc.peakMax)
			}
			t.Logf("peak %d descriptors open for %d partitions", c.peak.Load(), parts)
		})
	}
}

// TestFileTableConcurrentReads reads partitions from many goroutines through
// a table of 2 while every partition takes appends: every read finds its
// records, and every partition ends with all of them.
func TestFileTableConcurrentReads(t *testing.T) {
	clock := &fakeClock{t: dfClock.t}
	d, _, err := OpenLogDir(vfs.NewMem(), "/data", LogDirOptions{Now: clock.Now, MaxOpenFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const parts = 6
	if _, err := d.CreateTopic("t", parts, map[string]string{"internal.segment.bytes": "1500"}); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		l, _ := d.Partition("t", int32(p))
		for i := 0; i < 5; i++ {
			mustAppend(t, l, batchOf(t, 2, 200, clock.t.UnixMilli(), codec.None))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, parts*3)
	for p := 0; p < parts; p++ { // appenders, one per partition, all through the table
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _ := d.Partition("t", int32(p))
			for i := 0; i < 10; i++ {
				if _, err := l.Append(batchOf(t, 2, 200, clock.t.UnixMilli(), codec.None)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for g := 0; g < parts*2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _ := d.Partition("t", int32(g%parts))
			for i := 0; i < 20; i++ {
				for off := int64(0); off < 10; off += 2 {
					res, err := l.Read(off, 1, true)
					if err != nil {
						errs <- err
						return
					}
					if len(res.Data) == 0 {
						errs <- fmt.Errorf("partition %d offset %d: no data", g%parts, off)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p := 0; p < parts; p++ {
		l, _ := d.Partition("t", int32(p))
		if n := len(readAll(t, l)); n != 2*15 {
			t.Fatalf("partition %d: %d records, want %d", p, n, 2*15)
		}
	}
}

// TestFileTableReopenFails: an operation whose reopen fails returns that
// failure (naming the file), and the file can be used again once the
// cause is gone; an eviction's failed sync is reported by the next Sync.
func TestFileTableReopenFails(t *testing.T) {
	mem := vfs.NewMem()
	var failOpen, failSync atomic.Bool
	efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if (op.Kind == vfs.OpOpen && failOpen.Load()) || (op.Kind == vfs.OpFileSync && failSync.Load()) {
			return fmt.Errorf("%w: %s", vfs.ErrInjected, op)
		}
		return nil
	}))
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	tab := NewFileTable(1)
	fsys := tab.FS(efs)
	a, err := fsys.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	failSync.Store(true)
	b, err := fsys.OpenFile("/d/b", os.O_RDWR|os.O_CREATE, 0o644) // evicts a, whose sync fails
	if err != nil {
		t.Fatal(err)
	}
	failSync.Store(false)
	if st := tab.Stats(); st.Open != 1 || st.Evictions != 1 {
		t.Fatalf("stats %+v, want 1 open, 1 eviction", st)
	}
	failOpen.Store(true)
	buf := make([]byte, 5)
	_, err = a.ReadAt(buf, 0) // reopen of a fails
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("read with a failing reopen: %v", err)
	}
	if want := "reopen /d/a"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	failOpen.Store(false)
	if _, err := a.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
		t.Fatalf("read after the cause is gone: %q, %v", buf, err)
	}
	if err := a.Sync(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync after an eviction whose sync failed: %v, want the eviction's error", err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	// A rename through the table follows the file it moves.
	if err := fsys.Rename("/d/a", "/d/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(); err != nil { // evicts a again
		t.Fatal(err)
	}
	if _, err := a.ReadAt(buf, 0); err != nil || a.Name() != "/d/c" {
		t.Fatalf("read after rename: %v (name %s)", err, a.Name())
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if st := tab.Stats(); st.Open != 0 || st.Files != 0 || st.Failed != 1 {
		t.Fatalf("stats after close %+v", st)
	}
}
