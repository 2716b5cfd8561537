package localtier

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A cleaner swap interrupted after the .log.swap was renamed to .log but
// before the .txnindex.swap was: Kafka's LogLoader renames every remaining
// .swap file into place (third pass of load), so the cleaned segment keeps
// its aborted transactions. Dropping the .txnindex.swap would lose them:
// READ_COMMITTED consumers (and the cleaner) would see aborted records as
// committed.
func TestReviewSwapCrashBeforeTxnIndexRenameKeepsAbortedTxns(t *testing.T) {
	for _, power := range []bool{false, true} {
		name := "process-restart"
		if power {
			name = "power-loss"
		}
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			mem := vfs.NewMem()
			var armed bool
			var crash *vfs.MemFS
			efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
				if armed && op.Kind == vfs.OpRename && strings.HasSuffix(op.Path, TxnIndexSuffix+SwapSuffix) {
					crash = mem.CrashClone()
					return vfs.ErrInjected
				}
				return nil
			}))
			l := cleanFixture(t, efs, clock)
			cfg := l.cfg
			v := l.CleanerView()
			old := v.Segments[:2]
			c, err := l.NewCleanedSegment(old[0].BaseOffset)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range old {
				if err := l.ScanSegment(s, s.BaseOffset, true, func(_ int64, b record.Batch) error { return c.Append(b) }); err != nil {
					t.Fatal(err)
				}
			}
			want := index.AbortedTxn{ProducerID: 7, FirstOffset: 2, LastOffset: 5, LastStableOffset: 2}
			if err := c.AppendAbortedTxn(want); err != nil {
				t.Fatal(err)
			}
			armed = true
			err = l.ReplaceSegments(c, old)
			armed = false
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("replace: %v, want the injected failure at the .txnindex.swap rename", err)
			}
			_ = l.Close()
			fsys := vfs.FS(mem)
			if power {
				fsys = crash
			}
			t.Logf("files after the crash: %v", listNames(t, fsys, "/d/t-0"))
			l2, rep, err := OpenLog(fsys, "/d/t-0", LogOptions{Config: cfg, RecoveryPoint: -1, Now: clock.Now})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			t.Logf("recovery: %+v", rep)
			got := l2.AbortedTxns(0, l2.LogEndOffset())
			if len(got) != 1 || got[0] != want {
				t.Fatalf("aborted transactions after the interrupted swap = %+v, want [%+v] (the cleaned segment's .txnindex.swap was dropped)", got, want)
			}
		})
	}
}
