package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// Three records produced in the same millisecond, one batch, then the
// segment is rolled (the roll writes time index entry {ts, lastOffset}).
// Kafka's ListOffsets(ts) answers the FIRST record with timestamp >= ts:
// offset 0. Searching from the time-index entry's offset skips it.
func TestReviewOffsetForTimestampSameMillisecondBatch(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	l, _ := openTestLog(t, vfs.Default, dir, testConfig(t, nil), clock, 0)
	defer l.Close()
	const ts = 1_700_000_000_000
	recs := []record.Record{
		{Offset: 0, Timestamp: ts, Key: []byte("a"), Value: []byte("1")},
		{Offset: 1, Timestamp: ts, Key: []byte("b"), Value: []byte("2")},
		{Offset: 2, Timestamp: ts, Key: []byte("c"), Value: []byte("3")},
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, b)
	off, _, ok, err := l.OffsetForTimestamp(ts)
	if err != nil || !ok || off != 0 {
		t.Fatalf("before roll: OffsetForTimestamp(%d) = %d, %v, %v; want 0", ts, off, ok, err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	off, _, ok, err = l.OffsetForTimestamp(ts)
	if err != nil || !ok || off != 0 {
		t.Fatalf("after roll: OffsetForTimestamp(%d) = %d, %v, %v; want 0", ts, off, ok, err)
	}
}
