package chunkcache

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// The disk-tier sweep caches three full chunks and a short last one.
const (
	diskFaultChunk = 100
	diskFaultFile  = diskFaultChunk + chunkTrailerLen // a full chunk's file
)

var diskFaultKeys = []chunkKey{{"seg", "v1", 0}, {"seg", "v1", 1}, {"seg", "v1", 2}, {"seg", "v1", 3}}

func diskFaultPayload(k chunkKey) []byte {
	n := int64(diskFaultChunk)
	if k.index == 3 {
		n = 50
	}
	return content(k.String(), n)
}

func openFaultTier(fsys vfs.FS, dir string, files int64) (*diskTier, *cacheMetrics, error) {
	m := newCacheMetrics(nil)
	d, err := openDiskTier(fsys, dir, files*diskFaultFile, diskFaultChunk, m, slog.New(slog.DiscardHandler))
	return d, m, err
}

// seedDiskFault leaves in dir, durably, what an earlier run would: chunk
// 0's file, the temporary of a write it did not finish, and a file that is
// not the cache's.
func seedDiskFault(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, _, err := openFaultTier(fsys, dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	d.put(diskFaultKeys[0], diskFaultPayload(diskFaultKeys[0]))
	tmp := filepath.Join(dir, d.fileName(diskFaultKeys[1])+".123"+chunkTmpExt)
	if !d.has(diskFaultKeys[0]) || d.close() != nil {
		t.Fatal("seeding the disk tier failed")
	}
	for name, data := range map[string][]byte{tmp: encodeChunkFile(diskFaultPayload(diskFaultKeys[1]))[:70], filepath.Join(dir, "notes.txt"): []byte("mine")} {
		if err := vfs.WriteFileAtomic(fsys, name, data); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		f, err := fsys.OpenFile(filepath.Join(dir, e.Name()), 0, 0)
		if err == nil {
			err = errors.Join(f.Sync(), f.Close())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// getChecked reads k from d: a miss, or the chunk's bytes, never others.
func getChecked(t *testing.T, d *diskTier, k chunkKey) bool {
	t.Helper()
	want := diskFaultPayload(k)
	got, ok := d.get(k, int64(len(want)))
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("disk tier served wrong bytes for %v", k)
	}
	return ok
}

// diskFaultWorkload opens the tier on the seeded dir (reload: list, remove
// the temporary), puts chunks 1-3 (create, write, close, chtimes, rename;
// the third put trims chunk 0), reads every chunk (open, stat, read,
// close, chtimes), and reopens with room for two files (the reload trims
// the oldest) and reads again, on efs. Only opening the tier can fail.
// After each put every file under a chunk's name in dir (read on fsys,
// under efs) must be whole, and no temporary may be left unless removing
// one failed (tmpOK): a failed write leaves neither a partial chunk file
// nor litter. It reports the chunk files the tier found corrupt: with no
// power lost, none should be.
func diskFaultWorkload(t *testing.T, efs, fsys vfs.FS, dir string, tmpOK func() bool) (corrupt int, err error) {
	d, m, err := openFaultTier(efs, dir, 3)
	if err != nil {
		return 0, err
	}
	for _, k := range diskFaultKeys[1:] {
		d.put(k, diskFaultPayload(k))
		checkChunkFiles(t, fsys, dir, tmpOK())
	}
	for _, k := range diskFaultKeys {
		getChecked(t, d, k)
	}
	corrupt = int(testutil.ToFloat64(m.corrupt))
	if err := d.close(); err != nil {
		return corrupt, err
	}
	if d, m, err = openFaultTier(efs, dir, 2); err != nil {
		return corrupt, err
	}
	for _, k := range diskFaultKeys {
		getChecked(t, d, k)
	}
	return corrupt + int(testutil.ToFloat64(m.corrupt)), d.close()
}

// checkChunkFiles fails t unless every chunk file in dir is whole and,
// unless tmpOK, dir holds no temporary.
func checkChunkFiles(t *testing.T, fsys vfs.FS, dir string, tmpOK bool) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), chunkTmpExt) && !tmpOK {
			t.Fatalf("temporary %s left behind", e.Name())
		}
		if !strings.HasSuffix(e.Name(), chunkFileExt) {
			continue
		}
		data, err := vfs.ReadFile(fsys, filepath.Join(dir, e.Name()))
		if err == nil {
			_, err = decodeChunkFile(data, -1)
		}
		if err != nil {
			t.Fatalf("chunk file %s is not whole: %v", e.Name(), err)
		}
	}
}

// diskFaultOutcome reopens the tier on fsys, without faults, and checks it:
// no temporary survives the reload, the foreign file is untouched, the
// index is exactly the chunk files on disk and within the bound, and every
// read is a miss or the right bytes. With strict (no power was lost) every
// indexed file must also read back good: a failed write must not leave a
// partial file under a chunk's name.
func diskFaultOutcome(t *testing.T, fsys vfs.FS, dir string, strict bool) (hits, corrupt int) {
	t.Helper()
	d, m, err := openFaultTier(fsys, dir, 3)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer d.close()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	var bytesOnDisk int64
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasSuffix(name, chunkTmpExt):
			t.Errorf("temporary %s survived a reload", name)
		case strings.HasSuffix(name, chunkFileExt):
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, name)
			bytesOnDisk += info.Size()
		}
	}
	if data, err := vfs.ReadFile(fsys, filepath.Join(dir, "notes.txt")); err != nil || string(data) != "mine" {
		t.Errorf("foreign file changed: %q, %v", data, err)
	}
	indexed := slices.Sorted(slices.Values(d.names()))
	if !slices.Equal(indexed, files) || d.size() != bytesOnDisk || bytesOnDisk > 3*diskFaultFile {
		t.Errorf("index %v (%d bytes), chunk files %v (%d bytes), bound %d", indexed, d.size(), files, bytesOnDisk, 3*diskFaultFile)
	}
	for _, k := range diskFaultKeys {
		had := d.has(k)
		if getChecked(t, d, k) {
			hits++
		} else if had && strict {
			t.Errorf("chunk %v is indexed but does not read back, with no power lost", k)
		}
	}
	return hits, int(testutil.ToFloat64(m.corrupt))
}

// TestDiskTierFaults fails each filesystem operation of the disk tier's
// workload (reload, puts, reads, trims on put and on reload) in turn. Then,
// on the files as they are (a restart), on what a power cut just before the
// operation leaves (nothing the tier wrote: it never syncs), and on a
// power cut that kept the directory entries but not the data (torn files),
// a reopened tier must be consistent and never serve wrong bytes. On the
// OS filesystem only the restart is checked.
func TestDiskTierFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		mem  bool
	}{{"mem", true}, {"os", false}} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]int{}
			kinds := map[vfs.OpKind]bool{}
			for i := int64(0); ; i++ {
				if i > 500 {
					t.Fatal("the workload never ran without a fault")
				}
				var (
					fsys        vfs.FS = vfs.Default
					dir                = filepath.Join(t.TempDir(), "cache")
					mem         *vfs.MemFS
					crash, torn *vfs.MemFS
					at          vfs.Op
					n           int64
				)
				if tc.mem {
					mem = vfs.NewMem()
					fsys, dir = mem, "/cache"
				}
				seedDiskFault(t, fsys, dir)
				fired := false
				efs := vfs.NewErrorFS(fsys, vfs.InjectorFunc(func(op vfs.Op) error {
					n++
					if n-1 != i {
						return nil
					}
					fired, at = true, op
					if mem != nil {
						crash = mem.CrashClone()
						if err := mem.SyncDir(dir); err != nil {
							t.Error(err)
						}
						torn = mem.CrashClone()
					}
					return fmt.Errorf("%w at op %d (%s)", vfs.ErrInjected, i, op)
				}))
				corrupt, err := diskFaultWorkload(t, efs, fsys, dir, func() bool { return fired && at.Kind == vfs.OpRemove })
				if err != nil && !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("op %d (%s): failure is not the injected one: %v", i, at, err)
				}
				// A failed read of a chunk file counts as corruption (the
				// file is dropped and the chunk refetched).
				if allowed := b2i(fired && at.Kind == vfs.OpFileReadAt); corrupt > allowed {
					t.Fatalf("op %d (%s): %d chunk files found corrupt with no power lost: a failed write left a partial file", i, at, corrupt)
				}
				if !fired {
					if err != nil {
						t.Fatalf("fault-free workload failed: %v", err)
					}
					if hits, corrupt := diskFaultOutcome(t, fsys, dir, true); hits != 2 || corrupt != 0 {
						t.Fatalf("fault-free workload leaves %d good chunks (%d corrupt), want the 2 newest", hits, corrupt)
					}
					t.Logf("workload ran without a fault once op %d was past its %d operations; failed %v; outcomes %v",
						i, n, slices.Sorted(maps.Keys(kinds)), seen)
					for _, k := range []vfs.OpKind{vfs.OpMkdirAll, vfs.OpLock, vfs.OpReadDir, vfs.OpRemove, vfs.OpCreate, vfs.OpFileWrite,
						vfs.OpFileClose, vfs.OpChtimes, vfs.OpRename, vfs.OpOpen, vfs.OpFileStat, vfs.OpFileReadAt} {
						if !kinds[k] {
							t.Errorf("no %s operation was failed", k)
						}
					}
					need := []string{"restart: hits", "restart: open failed"}
					if tc.mem {
						need = append(need, "power cut: hits", "torn: corrupt detected")
					}
					for _, o := range need {
						if seen[o] == 0 {
							t.Errorf("no fault point gave the outcome %q: %v", o, seen)
						}
					}
					reliability.Record(t, "fetch cache: fail or cut power at each fs operation of the disk tier ("+tc.name+")",
						int(i)+1, seen["chunks read"], 0)
					return
				}
				kinds[at.Kind] = true
				if err != nil {
					seen["restart: open failed"]++
				}
				t.Run(fmt.Sprintf("op%03d_%s", i, at.Kind), func(t *testing.T) {
					outcomes := map[string]vfs.FS{"restart": fsys}
					if mem != nil {
						outcomes["power cut"], outcomes["torn"] = crash, torn
					}
					for name, o := range outcomes {
						hits, corrupt := diskFaultOutcome(t, o, dir, name == "restart")
						seen["chunks read"] += len(diskFaultKeys)
						if hits > 0 {
							seen[name+": hits"]++
						}
						if corrupt > 0 {
							seen[name+": corrupt detected"]++
						}
					}
				})
			}
		})
	}
}

// TestCachingBucketDiskFaults runs two sessions of a caching bucket over a
// disk tier in t.TempDir() (the second reads what the first cached), failing
// one filesystem operation in turn, then a session without faults: every
// read returns the object's bytes (from the store where the disk tier
// failed), a failure to open the cache is the injected one, and without
// faults the second session is served from disk alone.
func TestCachingBucketDiskFaults(t *testing.T) {
	store := objstore.NewMemory()
	const size = 450
	want := putObject(t, store, "seg", size)
	inner := newCounting(store)
	session := func(fsys vfs.FS, dir string) (storeReads int, err error) {
		t.Helper()
		c, err := NewCachingBucket(inner, CacheOptions{ChunkBytes: diskFaultChunk, MemoryBytes: 1000, ReadAheadChunks: -1,
			FetchParallelism: 1, CacheDir: dir, DiskBytes: 10 * diskFaultFile, FS: fsys, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return 0, err
		}
		inner.takeRanges()
		if got := readAll(t, c, "seg", 0, size); !bytes.Equal(got, want) {
			t.Fatal("caching bucket served wrong bytes")
		}
		waitIdle(t, c)
		return len(inner.takeRanges()), c.Close()
	}
	var mu sync.Mutex // the disk writer runs operations too
	seen := map[string]int{}
	for i := int64(0); ; i++ {
		if i > 500 {
			t.Fatal("the sessions never ran without a fault")
		}
		dir := filepath.Join(t.TempDir(), "cache")
		var at vfs.Op
		inj := vfs.OnIndex(i)
		efs := vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op) error {
			err := inj.MaybeError(op)
			if err != nil {
				mu.Lock()
				at = op
				mu.Unlock()
			}
			return err
		}))
		var reads []int
		for s := range 2 {
			n, err := session(efs, dir)
			if err != nil {
				if !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("op %d, session %d: failure is not the injected one: %v", i, s, err)
				}
				seen["open failed"]++
			}
			reads = append(reads, n)
		}
		after, err := session(vfs.Default, dir)
		if err != nil {
			t.Fatalf("op %d: session without faults: %v", i, err)
		}
		if !inj.Fired() {
			if reads[1] != 0 || after != 0 {
				t.Fatalf("without faults the later sessions read the store %d and %d times, want 0 (all from disk)", reads[1], after)
			}
			t.Logf("sessions ran without a fault once op %d was past their %d operations; outcomes %v", i, inj.Ops(), seen)
			if seen["open failed"] == 0 || seen["second session read the store"] == 0 {
				t.Errorf("the faults never failed an open or sent a read to the store: %v", seen)
			}
			reliability.Record(t, "fetch cache: fail each fs operation of two caching-bucket sessions over a disk tier", int(i)+1, 3*int(i)*size, 0)
			return
		}
		mu.Lock()
		kind := at.Kind
		mu.Unlock()
		seen["failed "+kind.String()]++
		if reads[1] > 0 {
			seen["second session read the store"]++
		}
	}
}
