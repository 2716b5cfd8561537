package localtier

import (
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// An append larger than segment.bytes cannot fit in any segment. Kafka
// refuses it (UnifiedLog.append: RecordBatchTooLargeException, "Message
// batch size is ... bytes in append to partition ... which exceeds the
// maximum configured segment size"), even when max.message.bytes allows
// the batch. (Kafka's error for it is RECORD_LIST_TOO_LARGE.)
func TestReviewAppendRefusesBatchOverSegmentBytes(t *testing.T) {
	const now = 1_700_000_000_000
	clock := &fakeClock{t: time.UnixMilli(now)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{
		"segment.bytes": "1048576", "max.message.bytes": "4000000"}), clock, 0)
	defer l.Close()
	b := batchOf(t, 4, 500_000, now, codec.None)
	_, err := l.Append(b)
	var ie *InvalidRecordError
	if !errors.As(err, &ie) || ie.Code != "RECORD_LIST_TOO_LARGE" {
		t.Fatalf("append of %d bytes with segment.bytes 1048576: err = %v, want RECORD_LIST_TOO_LARGE", len(b), err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused append wrote data: end %d", l.LogEndOffset())
	}
}
