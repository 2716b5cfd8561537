package producer

import (
	"errors"
	"testing"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier/record"
)

// TestProduceTimestampCheckedBeforeWriting: a record timestamp outside the
// topic's message.timestamp.*.max.ms fails the whole input before anything
// is written, naming its line, even when the good records would go to
// other partitions (separate appends).
func TestProduceTimestampCheckedBeforeWriting(t *testing.T) {
	now, clock := testNow, testClock
	d := openTopic(t, "ts", 3, map[string]string{"message.timestamp.before.max.ms": "60000"})
	in := []Input{
		{Line: 1, Record: record.Record{Timestamp: now.UnixMilli(), Key: []byte("a"), Value: []byte("1")}},
		{Line: 2, Record: record.Record{Timestamp: now.UnixMilli(), Key: []byte("b"), Value: []byte("2")}},
		{Line: 3, Record: record.Record{Timestamp: 1699999000000, Key: []byte("c"), Value: []byte("3")}},
	}
	_, err := Produce(d, "ts", Inputs(in), Options{Partition: -1, Now: clock})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Line != 3 || !errors.Is(err, kafkaerr.ErrInvalidTimestamp) {
		t.Fatalf("got %v, want an INVALID_TIMESTAMP InputError on line 3", err)
	}
	tp, _ := d.Topic("ts")
	for p, l := range tp.Partitions {
		if l.LogEndOffset() != 0 {
			t.Fatalf("partition %d got %d records", p, l.LogEndOffset())
		}
	}
	// Within the bound (one minute old), everything is appended.
	in[2].Record.Timestamp = now.UnixMilli() - 60000
	if _, err := Produce(d, "ts", Inputs(in), Options{Partition: -1, Now: clock}); err != nil {
		t.Fatal(err)
	}
}
