package localtier

import (
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// Kafka's LogValidator.validateBatch refuses a batch that has a producer id
// but a negative base sequence ("Invalid sequence number").
func TestReviewAppendRefusesProducerIDWithoutSequence(t *testing.T) {
	const now = 1_700_000_000_000
	clock := &fakeClock{t: time.UnixMilli(now)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, nil), clock, 0)
	defer l.Close()
	spec := record.NewBatchSpec(0, codec.None)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 7, 0, -5
	var e record.Encoder
	b, err := e.AppendBatch(nil, spec, []record.Record{{Offset: 0, Timestamp: now, Key: []byte("a"), Value: []byte("1")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Append(b)
	var ie *InvalidRecordError
	if !errors.As(err, &ie) || ie.Code != "INVALID_RECORD" {
		t.Fatalf("append of a batch with producer id 7 and base sequence -5: err = %v, want INVALID_RECORD", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused append wrote data: end %d", l.LogEndOffset())
	}
}
