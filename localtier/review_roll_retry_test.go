package localtier

import (
	"fmt"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// A roll that fails after createSegment made the new segment's .log (its
// index could not be opened, or the directory sync failed) leaves that file
// on disk but not in the log: every later append rolls again, createSegment's
// O_EXCL open fails with "file exists", and the partition takes no more
// appends until it is reopened. A failed flush at the roll, by contrast,
// is retried by the next append (the old active segment stays usable).
func TestReviewRollFailingAfterCreateRetries(t *testing.T) {
	for _, fail := range []struct {
		name string
		kind vfs.OpKind
		path string
	}{
		{"flush", vfs.OpFileSync, SegmentPath("/d/t-0", 0, LogSuffix)},
		{"index create", vfs.OpCreate, SegmentPath("/d/t-0", 2, IndexSuffix)},
		{"dir sync", vfs.OpSyncDir, ""},
	} {
		t.Run(fail.name, func(t *testing.T) {
			mem := vfs.NewMem()
			armed, fired := false, false
			efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
				if !armed || fired || op.Kind != fail.kind || (fail.path != "" && op.Path != fail.path) {
					return nil
				}
				if fail.kind == vfs.OpSyncDir {
					// The roll's own directory sync, after the new .log exists.
					if _, err := mem.Stat(SegmentPath("/d/t-0", 2, LogSuffix)); err != nil {
						return nil
					}
				}
				fired = true
				return fmt.Errorf("%w: %s", vfs.ErrInjected, op)
			}))
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			cfg := testConfig(t, map[string]string{"segment.ms": "1000"})
			l, _ := openTestLog(t, efs, "/d/t-0", cfg, clock, 0)
			defer l.Close()
			ts := clock.t.UnixMilli()
			mustAppend(t, l, batchOf(t, 2, 10, ts, codec.None))
			armed = true
			if _, err := l.Append(batchOf(t, 2, 10, ts+5000, codec.None)); err == nil || !fired {
				t.Fatalf("the roll did not fail (err %v, fault fired %v)", err, fired)
			}
			if _, err := l.Append(batchOf(t, 2, 10, ts+6000, codec.None)); err != nil {
				t.Fatalf("append after a failed roll (%s): %v", fail.name, err)
			}
			if got := l.LogEndOffset(); got != 4 {
				t.Fatalf("log end %d, want 4", got)
			}
		})
	}
}
