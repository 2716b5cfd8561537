package localtier

import (
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A multi-batch append that fills the index part way: Segment.append has
// already written every batch when the index refuses an entry, so the
// failed append leaves bytes in the log whose offsets the next append
// assigns again.
func TestReviewIndexFullMidAppend(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"segment.index.bytes": "24", "index.interval.bytes": "0"})
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	defer l.Close()
	var data []byte
	for i := 0; i < 4; i++ {
		data = append(data, batchOf(t, 1, 10, 1_700_000_000_000+int64(i), codec.None)...)
	}
	_, err := l.Append(data)
	t.Logf("append of 4 batches: %v", err)
	if err == nil {
		if got := len(readAll(t, l)); got != 4 {
			t.Fatalf("%d records, want 4", got)
		}
		return
	}
	if _, err := l.Append(batchOf(t, 1, 10, 1_700_000_000_010, codec.None)); err != nil {
		t.Fatal(err)
	}
	var prev int64 = -1
	for _, s := range l.Segments() {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIter(data)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			t.Logf("segment %d: batch [%d, %d]", s.BaseOffset, b.BaseOffset(), b.LastOffset())
			if b.BaseOffset() <= prev {
				t.Errorf("batch at offset %d after offset %d: offsets go backwards on disk", b.BaseOffset(), prev)
			}
			prev = b.LastOffset()
		}
	}
}
