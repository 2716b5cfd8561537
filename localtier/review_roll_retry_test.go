package localtier

import (
	"errors"
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
// is final (TestFailedFsyncFencesTheLog): the log refuses appends until it
// is reopened.
func TestReviewRollFailingAfterCreateRetries(t *testing.T) {
	for _, fail := range []struct {
		name string
		kind vfs.OpKind
		path string
	}{
		{"index create", vfs.OpCreate, SegmentPath("/d/t-0", 2, IndexSuffix)},
		{"dir sync", vfs.OpSyncDir, ""},
	} {
		t.Run(fail.name, func(t *testing.T) {
			mem := vfs.NewMem()
			efs, arm, fired := failOnce(mem, func(op vfs.Op) bool {
				if op.Kind != fail.kind || (fail.path != "" && op.Path != fail.path) {
					return false
				}
				// The roll's own directory sync comes after the new .log exists.
				_, err := mem.Stat(SegmentPath("/d/t-0", 2, LogSuffix))
				return fail.kind != vfs.OpSyncDir || err == nil
			})
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			cfg := testConfig(t, map[string]string{"segment.ms": "1000"})
			l, _ := openTestLog(t, efs, "/d/t-0", cfg, clock, 0)
			defer l.Close()
			ts := clock.t.UnixMilli()
			mustAppend(t, l, batchOf(t, 2, 10, ts, codec.None))
			arm()
			if _, err := l.Append(batchOf(t, 2, 10, ts+5000, codec.None)); err == nil || !*fired {
				t.Fatalf("the roll did not fail (err %v, fault fired %v)", err, *fired)
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

// TestFailedFsyncFencesTheLog: after an fsync of the log fails, whether at
// a roll or a flush, the log takes no more appends or flushes, even once
// fsyncs succeed again: Linux may have dropped the pages it could not
// write and marked them clean, so a retried fsync would succeed without
// them and move the recovery point past lost data. Reopening recovers
// from what the disk holds and the log takes appends again.
func TestFailedFsyncFencesTheLog(t *testing.T) {
	for _, at := range []string{"roll", "flush"} {
		t.Run(at, func(t *testing.T) {
			mem := vfs.NewMem()
			efs, arm, fired := failOnce(mem, func(op vfs.Op) bool {
				return op.Kind == vfs.OpFileSync && op.Path == SegmentPath("/d/t-0", 0, LogSuffix)
			})
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			cfg := testConfig(t, map[string]string{"segment.ms": "1000"})
			l, _ := openTestLog(t, efs, "/d/t-0", cfg, clock, 0)
			ts := clock.t.UnixMilli()
			mustAppend(t, l, batchOf(t, 2, 10, ts, codec.None))
			arm()
			var err error
			if at == "roll" {
				_, err = l.Append(batchOf(t, 2, 10, ts+5000, codec.None))
			} else {
				err = l.Flush()
			}
			var ffe *FlushFailedError
			if !errors.As(err, &ffe) || !*fired {
				t.Fatalf("the failed fsync gave %v (fault fired %v), want a *FlushFailedError", err, *fired)
			}
			if _, err := l.Append(batchOf(t, 2, 10, ts+6000, codec.None)); !errors.As(err, &ffe) {
				t.Fatalf("append after a failed fsync: %v, want a *FlushFailedError", err)
			}
			if err := l.Flush(); !errors.As(err, &ffe) {
				t.Fatalf("flush after a failed fsync: %v, want a *FlushFailedError", err)
			}
			if got := l.RecoveryPoint(); got != 0 {
				t.Fatalf("recovery point %d after a failed fsync, want 0", got)
			}
			_ = l.Close()
			l2, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
			defer l2.Close()
			if _, err := l2.Append(batchOf(t, 2, 10, ts+7000, codec.None)); err != nil {
				t.Fatalf("append after reopening: %v", err)
			}
		})
	}
}

// failOnce wraps mem so that, once armed, the first operation match
// accepts fails with vfs.ErrInjected; fired says whether it has.
func failOnce(mem vfs.FS, match func(vfs.Op) bool) (efs vfs.FS, arm func(), fired *bool) {
	armed := false
	fired = new(bool)
	efs = vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if !armed || *fired || !match(op) {
			return nil
		}
		*fired = true
		return fmt.Errorf("%w: %s", vfs.ErrInjected, op)
	}))
	return efs, func() { armed = true }, fired
}
