package compactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// crashWorkload builds a compacted log of several segments (with
// tombstones, compressed batches and an aborted transaction), flushed.
func crashWorkload(e *env) {
	for s := range 4 {
		for i := range 6 {
			e.produceTo(e.log, codec.Codec(i%3), -1, false, kv(fmt.Sprintf("k%d", (s*6+i)%7), fmt.Sprint(s, i)), tomb(fmt.Sprintf("k%d", i%3+7)))
		}
		e.roll()
	}
	e.produceTo(e.log, codec.None, 5, true, kv("k1", "aborted"))
	if _, err := e.log.AppendEndTxnMarker(5, 0, false, 0); err != nil {
		e.t.Fatal(err)
	}
	e.roll()
	e.produce(kv("active", "1"))
	if err := e.dir.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// TestCrashAtEveryStep fails each filesystem operation of a cleaning pass
// in turn, and separately cuts power at it (CrashClone keeps only what was
// synced). Reopening the data dir must give exactly the log before the pass
// or exactly the log after it.
func TestCrashAtEveryStep(t *testing.T) {
	e := newEnv(t, nil)
	crashWorkload(e)
	oldLog := stringsOf(e.read())
	e.pass(false)
	newLog := stringsOf(e.read())
	if slices.Equal(oldLog, newLog) {
		t.Fatal("the pass changed nothing")
	}
	outcome := func(fsys *vfs.MemFS) string {
		d, _, err := localtier.OpenLogDir(fsys, "/data", localtier.LogDirOptions{Now: e.clock.Now})
		if err != nil {
			t.Fatalf("reopen: %v", err)
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
		t.Fatalf("reopened log is neither the old nor the new one:\n%v\nold %v\nnew %v", got, oldLog, newLog)
		return ""
	}
	seen := map[string]int{}
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		var armed bool
		var n int64
		var crash *vfs.MemFS
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if !armed {
				return nil
			}
			n++
			if n-1 == i {
				crash = mem.CrashClone()
				return vfs.ErrInjected
			}
			return nil
		}))
		ce := &env{t: t, fs: mem, clock: &fakeClock{ms: t0}}
		d, _, err := localtier.OpenLogDir(efs, "/data", localtier.LogDirOptions{Now: ce.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ce.dir = d
		if _, err := d.CreateTopic("t", 1, baseTopic); err != nil {
			t.Fatal(err)
		}
		ce.log = ce.partition("t", 0)
		crashWorkload(ce)
		armed = true
		_, err = RunOnce(context.Background(), d, PassOptions{Config: Config{DedupeBufferSize: 1 << 16, Now: ce.clock.Now}})
		armed = false
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		_ = d.Close()
		if err == nil {
			if crash != nil {
				t.Fatalf("op %d was injected but the pass reported success", i)
			}
			if o := outcome(mem); o != "new" {
				t.Fatalf("a successful pass reopens to the %s log", o)
			}
			t.Logf("pass succeeded once op %d was past its %d operations; outcomes %v", i, n, seen)
			if seen["old"] == 0 || seen["new"] == 0 {
				t.Fatalf("crash points never gave both outcomes: %v", seen)
			}
			outcomes := 0
			for _, n := range seen {
				outcomes += n
			}
			reliability.Record(t, "compaction: fail or cut power at each fs operation of a pass", int(i)+1, outcomes*len(oldLog), 0)
			return
		}
		seen["restart "+outcome(mem)]++
		seen[outcome(crash)]++
	}
}
