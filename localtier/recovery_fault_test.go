package localtier

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// rfImage is a cleanly closed data dir on a MemFS (topic "t", one partition,
// 4 segments of 50 records) whose flushed segment 0 is torn after 3 whole
// batches: recovery must cut segment 0 alone. It returns the image and the
// offsets a correct recovery keeps.
func rfImage(t *testing.T) (*vfs.MemFS, []int64) {
	t.Helper()
	mem := vfs.NewMem()
	d, _, err := OpenLogDir(mem, dfDir, LogDirOptions{Now: dfClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("t", 1, map[string]string{"index.interval.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	l, _ := d.Partition("t", 0)
	b := batchOf(t, 5, 100, dfClock.t.UnixMilli(), codec.None)
	seg0 := appendFourSegments(t, l, dfClock)[0].Path
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenFile(seg0, 2 /* O_RDWR */, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(3*len(b) + 40)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	var keep []int64
	for o := int64(0); o < 200; o++ {
		if o < 15 || o >= 50 {
			keep = append(keep, o)
		}
	}
	return mem.CrashClone(), keep
}

// memTree maps every file of a MemFS under dir (but the lock) to its bytes.
func memTree(t *testing.T, fsys vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			maps.Copy(out, memTree(t, fsys, p))
		case e.Name() != lockFile:
			b, err := vfs.ReadFile(fsys, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = string(b)
		}
	}
	return out
}

// rfRead opens the image's data dir (read-only or not), reads partition 0
// and closes it.
func rfRead(fsys vfs.FS, readOnly bool) (offsets []int64, err error) {
	d, _, err := OpenLogDir(fsys, dfDir, LogDirOptions{Now: dfClock.Now, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	l, err := d.Partition("t", 0)
	if err != nil {
		return nil, err
	}
	return readOffsets(l)
}

// TestRecoveryBelowRecoveryPointInjectedErrors fails each filesystem
// operation of opening (recovering) and closing a data dir whose flushed
// segment 0 is torn, in turn. Every failure is the injected one; a restart
// on the files as they are then recovers only segment 0's tail: the later
// segments are never lost, whatever step of the repair failed. Opened
// read-only, the same sweep also checks no file ever changes.
func TestRecoveryBelowRecoveryPointInjectedErrors(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("read_only=%v", readOnly), func(t *testing.T) {
			img, keep := rfImage(t)
			before := memTree(t, img, dfDir)
			runs, checked, lost := 0, 0, 0
			for i := int64(0); ; i++ {
				mem := img.CrashClone()
				inj := vfs.OnIndex(i)
				got, err := rfRead(vfs.NewErrorFS(mem, inj), readOnly)
				if err != nil && !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("op %d: failure is not the injected one: %v", i, err)
				}
				runs++
				if err == nil && !slices.Equal(got, keep) {
					t.Fatalf("op %d: read %d records, want %d", i, len(got), len(keep))
				}
				if readOnly {
					if after := memTree(t, mem, dfDir); !maps.Equal(before, after) {
						t.Fatalf("op %d: a read-only open changed the data dir", i)
					}
				}
				// Restart on the files as they are, writable, no injection.
				again, rerr := rfRead(mem, false)
				if rerr != nil {
					t.Fatalf("op %d: restart after the injected failure: %v", i, rerr)
				}
				checked += len(keep)
				if !slices.Equal(again, keep) {
					lost += len(keep) - len(again)
					t.Fatalf("op %d (%v): after a restart %d records are readable, want %d", i, err, len(again), len(keep))
				}
				if err == nil && !inj.Fired() {
					t.Logf("open and close succeeded once op %d was past their %d operations", i, inj.Ops())
					break
				}
			}
			reliability.Record(t, fmt.Sprintf("disk: fail each fs operation of recovering a torn flushed segment (read-only %v)", readOnly), runs, checked, lost)
		})
	}
}
