package localtier

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A gzip batch within max.message.bytes, appended to a topic whose
// compression.type is uncompressed, is re-encoded far beyond the limit.
// Kafka re-checks the sizes after recompression (UnifiedLog.append:
// RecordTooLargeException when messageSizeMaybeChanged) and refuses it.
func TestReviewAppendRechecksSizeAfterRecompression(t *testing.T) {
	const now = 1_700_000_000_000
	clock := &fakeClock{t: time.UnixMilli(now)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{
		"compression.type": "uncompressed", "max.message.bytes": "20000"}), clock, 0)
	defer l.Close()
	recs := make([]record.Record, 20)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: now, Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 10000)}
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.Gzip), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 20000 {
		t.Fatalf("gzip batch of %d bytes is already over the limit", len(b))
	}
	info, err := l.Append(b)
	var ie *InvalidRecordError
	if !errors.As(err, &ie) || ie.Code != "MESSAGE_TOO_LARGE" {
		t.Fatalf("append of a %d-byte gzip batch stored as %d bytes uncompressed (max.message.bytes 20000): err = %v, want MESSAGE_TOO_LARGE", len(b), info.Bytes, err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused append wrote data: end %d", l.LogEndOffset())
	}
}
