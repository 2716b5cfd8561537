package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// A process crash (kill -9) leaves appended data in the page cache. After the
// restart, Kafka keeps the recovery point at min(checkpoint, log end) so a
// later flush fsyncs the recovered segments. Here the loader sets the
// recovery point to the log end, so Flush skips the recovered, never-synced
// segment and a power loss after Flush() returned loses data.
func TestReviewFlushAfterCrashRestartSyncsRecoveredSegments(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, mem, "/data/t-0", cfg, clock, 0)
	mustAppend(t, l, batchOf(t, 5, 10, 1_700_000_000_000, codec.None))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(t, 5, 10, 1_700_000_000_100, codec.None))
	// kill -9: l is abandoned, nothing flushed; the page cache (mem) survives.

	l2, _ := openTestLog(t, mem, "/data/t-0", cfg, clock, 0) // recovery point 0 from the checkpoint
	if rp := l2.RecoveryPoint(); rp != 0 {
		t.Errorf("recovery point after unclean restart = %d; Kafka keeps min(checkpoint, LEO) = 0", rp)
	}
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	// Power loss after Flush returned.
	crashed := mem.CrashClone()
	l3, _ := openTestLog(t, crashed, "/data/t-0", cfg, clock, l2.RecoveryPoint())
	defer l3.Close()
	if got := len(readAll(t, l3)); got != 10 {
		t.Fatalf("after Flush() and a power loss: %d records survive, want 10", got)
	}
	_ = l2.Close()
	_ = l.Close()
}
