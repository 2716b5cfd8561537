package localtier

import (
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/vfs"
)

// An offset or time index too large to load (a damaged file: 3 GiB, sparse
// here) is rebuilt from the log. The .txnindex, which cannot be rebuilt from
// the segment alone, must not go with it.
func TestReviewOversizedTimeIndexKeepsTxnIndex(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1000)}
	cfg := testConfig(t, nil)
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	first, marker := appendAbortedTxnOf7(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(SegmentPath(dir, 0, TimeIndexSuffix), 3<<30); err != nil {
		t.Fatal(err)
	}
	l2, _ := openTestLog(t, vfs.Default, dir, cfg, clock, marker+1)
	defer l2.Close()
	got := l2.AbortedTxns(0, l2.LogEndOffset())
	if len(got) != 1 || got[0].FirstOffset != first || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions after rebuilding a damaged .timeindex = %+v, want one [%d, %d]", got, first, marker)
	}
}
