package compactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestDiskFullDuringCleaning runs a cleaning pass with the disk full after
// N bytes of the pass's writes, for N from 0 past what the pass writes
// (the .cleaned segment, its indexes, the swap, the cleaner checkpoint).
// A pass that runs out of space must report ENOSPC (errors.Is through
// *os.PathError), never panic or claim success; the data dir must reopen
// to exactly the log before the pass or exactly the log after it, both on
// the files as they are and after a power cut; and once space is freed the
// next pass must finish the cleaning.
func TestDiskFullDuringCleaning(t *testing.T) {
	e := newEnv(t, nil)
	crashWorkload(e)
	oldLog := stringsOf(e.read())
	e.pass(false)
	newLog := stringsOf(e.read())
	if slices.Equal(oldLog, newLog) {
		t.Fatal("the pass changed nothing")
	}
	// setup builds the workload's dir over a disk with room to spare.
	setup := func() (*vfs.MemFS, *vfs.DiskFullFS, *localtier.LogDir, *env) {
		mem := vfs.NewMem()
		full := vfs.NewDiskFull(mem, -1)
		ce := &env{t: t, fs: mem, clock: &fakeClock{ms: t0}}
		d, _, err := localtier.OpenLogDir(full, "/data", localtier.LogDirOptions{Now: ce.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ce.dir = d
		if _, err := d.CreateTopic("t", 1, baseTopic); err != nil {
			t.Fatal(err)
		}
		ce.log = ce.partition("t", 0)
		crashWorkload(ce)
		return mem, full, d, ce
	}
	pass := func(d *localtier.LogDir, ce *env) error {
		_, err := RunOnce(context.Background(), d, PassOptions{Config: Config{DedupeBufferSize: 1 << 16, Now: ce.clock.Now}})
		return err
	}
	outcome := func(what string, fsys *vfs.MemFS, ce *env) string {
		d, _, err := localtier.OpenLogDir(fsys, "/data", localtier.LogDirOptions{Now: ce.clock.Now})
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		defer d.Close()
		l, err := d.Partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := readLog(t, fsys, l)
		got := stringsOf(recs)
		switch {
		case slices.Equal(got, oldLog):
			return "old"
		case slices.Equal(got, newLog):
			return "new"
		}
		t.Fatalf("%s: reopened log is neither the old nor the new one:\n%v\nold %v\nnew %v", what, got, oldLog, newLog)
		return ""
	}

	_, probe, d, ce := setup()
	before := probe.Written()
	if err := pass(d, ce); err != nil {
		t.Fatal(err)
	}
	total := probe.Written() - before
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	step := max(total/40, 1)
	runs, checked, seen := 0, 0, map[string]int{}
	for budget := int64(0); budget <= total+step; budget += step {
		mem, full, d, ce := setup()
		full.SetBudget(budget)
		err := pass(d, ce)
		what := fmt.Sprintf("budget %d of %d", budget, total)
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: failure is not ENOSPC: %v", what, err)
		}
		if err == nil && full.Refused() > 0 {
			t.Fatalf("%s: %d writes hit ENOSPC but the pass reported success", what, full.Refused())
		}
		if err == nil && budget < total {
			t.Fatalf("%s: the pass succeeded with less space than it writes", what)
		}
		full.SetBudget(-1) // the operator frees space
		if err := d.Close(); err != nil {
			t.Fatalf("%s: close: %v", what, err)
		}
		seen["power cut "+outcome(what+", power cut", mem.CrashClone(), ce)]++
		seen["restart "+outcome(what+", restart", mem, ce)]++
		checked += 2 * len(oldLog)
		// With space again, a pass on the reopened dir finishes the job.
		d2, _, err2 := localtier.OpenLogDir(mem, "/data", localtier.LogDirOptions{Now: ce.clock.Now})
		if err2 != nil {
			t.Fatal(err2)
		}
		if err := pass(d2, ce); err != nil {
			t.Fatalf("%s: pass after freeing space: %v", what, err)
		}
		if err := d2.Close(); err != nil {
			t.Fatal(err)
		}
		if o := outcome(what+", after freeing space", mem, ce); o != "new" {
			t.Fatalf("%s: after freeing space the pass left the %s log", what, o)
		}
		checked += len(newLog)
		runs++
	}
	t.Logf("%d budgets over %d bytes: %v", runs, total, seen)
	if seen["restart old"] == 0 || seen["restart new"] == 0 {
		t.Fatalf("budgets never gave both outcomes: %v", seen)
	}
	reliability.Record(t, "disk: ENOSPC during compaction (cleaned segment, swap, checkpoint)", runs, checked, 0)
}
