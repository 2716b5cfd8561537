package localtier

import (
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestInjectedErrors runs a workload (open, appends across rolls, flush,
// close, reopen) failing filesystem operation i for i = 0, 1, 2, ... until
// it succeeds. Every failure must be the injected one, and after each
// failure the log reopened on the same files must hold exactly a prefix of
// the appends, every acknowledged one included.
func TestInjectedErrors(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "3000", "index.interval.bytes": "500"})
	const appends = 12
	checked := 0
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		inj := vfs.OnIndex(i)
		efs := vfs.NewErrorFS(mem, inj)
		acked := 0
		err := func() (err error) {
			l, _, err := OpenLog(efs, "/d/t-0", LogOptions{Config: cfg, RecoveryPoint: -1, Now: clock.Now})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, l.Close()) }()
			for k := 0; k < appends; k++ {
				if _, err := l.Append(batchOf(t, 3, 100, 1_700_000_000_000+int64(k), codec.None)); err != nil {
					return err
				}
				acked++
			}
			return l.Flush()
		}()
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		// Reopen on the files as they are (a process restart, no power loss).
		l, _, rerr := OpenLog(mem, "/d/t-0", LogOptions{Config: cfg, RecoveryPoint: -1, Now: clock.Now})
		if rerr != nil {
			if acked == 0 {
				continue // the directory was never made
			}
			t.Fatalf("op %d: reopen after injected failure: %v", i, rerr)
		}
		end := l.LogEndOffset()
		recs := readAll(t, l)
		checked += acked * 3
		if cerr := l.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if end < int64(acked*3) || end > appends*3 || int64(len(recs)) != end {
			t.Fatalf("op %d: %d appends acked, log end %d, %d records readable", i, acked, end, len(recs))
		}
		for k, r := range recs {
			if r.Offset != int64(k) {
				t.Fatalf("op %d: record %d has offset %d", i, k, r.Offset)
			}
		}
		if err == nil {
			if inj.Fired() {
				t.Fatalf("op %d was injected but the workload reported success: an error was swallowed", i)
			}
			t.Logf("workload succeeded once op %d was past its %d operations", i, inj.Ops())
			reliability.Record(t, "disk: fail each fs operation of one log (append, roll, flush, close)", int(i)+1, checked, 0)
			return
		}
	}
}
