package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A producer's batch header claims a maxTimestamp far past its records'
// timestamps. Kafka's LogValidator does not trust it: on a CreateTime topic
// it stores the largest record timestamp (batch.setMaxTimestamp), so the
// time index and time-based retention follow the records, which passed
// message.timestamp.after.max.ms.
func TestReviewAppendRecomputesMaxTimestamp(t *testing.T) {
	const now = 1_700_000_000_000
	clock := &fakeClock{t: time.UnixMilli(now)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, nil), clock, 0)
	defer l.Close()
	spec := record.NewBatchSpec(0, codec.None)
	spec.MaxTimestamp = now + 100*365*24*3600*1000 // a century ahead
	var e record.Encoder
	b, err := e.AppendBatch(nil, spec, []record.Record{
		{Offset: 0, Timestamp: now - 5, Key: []byte("a"), Value: []byte("1")},
		{Offset: 1, Timestamp: now - 2, Key: []byte("b"), Value: []byte("2")},
	})
	if err != nil {
		t.Fatal(err)
	}
	info := mustAppend(t, l, b)
	if info.MaxTimestamp != now-2 {
		t.Errorf("append info max timestamp %d, want %d", info.MaxTimestamp, int64(now-2))
	}
	res, err := l.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	stored := record.Batch(res.Data)
	if stored.MaxTimestamp() != now-2 || stored.LogAppendTime() {
		t.Errorf("stored batch max timestamp %d (log append time %v), want %d, create time", stored.MaxTimestamp(), stored.LogAppendTime(), int64(now-2))
	}
	if err := stored.VerifyCRC(); err != nil {
		t.Errorf("stored batch: %v", err)
	}
}
