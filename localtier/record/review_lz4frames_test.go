package record

import (
	"encoding/binary"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
)

// Kafka reads an lz4 batch payload with KafkaLZ4BlockInputStream: it must
// start with an lz4 frame (no skippable frame), and the stream ends at that
// frame's end mark; nothing after it is read. A payload of two frames whose
// header counts the records of both, or one behind a skippable frame, is
// refused by Kafka's LogValidator and unreadable by a Java consumer; the
// decoder read both frames and skipped skippable ones.
func TestReviewLZ4OnlyFirstFrame(t *testing.T) {
	recs := []Record{
		{Offset: 0, Timestamp: 5, Key: []byte("a"), Value: []byte("1")},
		{Offset: 1, Timestamp: 5, Key: []byte("b"), Value: []byte("2")},
		{Offset: 2, Timestamp: 5, Key: []byte("c"), Value: []byte("3")},
	}
	var e Encoder
	raw := func(rs []Record) []byte {
		b, err := e.AppendBatch(nil, NewBatchSpec(0, codec.None), rs)
		if err != nil {
			t.Fatal(err)
		}
		return b[HeaderSize:]
	}
	frame := func(p []byte) []byte {
		c, err := codec.Compress(codec.LZ4, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	batch := func(payload []byte) Batch {
		b, err := e.AppendBatch(nil, NewBatchSpec(0, codec.LZ4), recs)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b[:HeaderSize], payload...)
		binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
		Batch(b).UpdateCRC()
		return Batch(b)
	}
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'j', 'u', 'n', 'k'}
	var d Decoder
	if got, err := d.Records(batch(frame(raw(recs)))); err != nil || len(got) != 3 {
		t.Fatalf("control: %d records, %v", len(got), err)
	}
	for name, payload := range map[string][]byte{
		"two frames":           append(frame(raw(recs[:2])), frame(raw(recs[2:]))...),
		"skippable then frame": append(append([]byte(nil), skippable...), frame(raw(recs))...),
	} {
		if got, err := d.Records(batch(payload)); err == nil {
			t.Errorf("%s: decoded %d records, want an error", name, len(got))
		}
	}
}
