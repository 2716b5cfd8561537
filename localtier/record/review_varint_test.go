package record

import (
	"encoding/binary"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
)

// padded encodes v as a zig-zag varint padded to n bytes (n >= 5).
func padded(v int64, n int) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	out := make([]byte, n)
	for i := 0; i < n-1; i++ {
		out[i] = byte(u>>(7*i))&0x7f | 0x80
	}
	out[n-1] = byte(u >> (7 * (n - 1)))
	return out
}

// Kafka reads a record's length, offset delta, key and value lengths,
// header count and header lengths as 32-bit varints of at most 5 bytes
// (ByteUtils.readVarint: "Varint is too long"), so its LogValidator refuses
// a record holding a longer one and a Java consumer cannot read it. The
// decoder took any varint up to 10 bytes.
func TestReviewRecordVarintTooLong(t *testing.T) {
	fields := []string{"length", "offset delta", "key length", "value length", "header count", "header key length", "header value length"}
	for i, name := range fields {
		t.Run(name, func(t *testing.T) {
			record := func(width int) []byte {
				vi := func(field int, v int64) []byte {
					if i == field {
						return padded(v, width)
					}
					return binary.AppendVarint(nil, v)
				}
				// attributes, timestamp delta 0, offset delta 0, key
				// "k", value null, one header "h" with a null value.
				body := []byte{0, 0}
				body = append(body, vi(1, 0)...)
				body = append(append(body, vi(2, 1)...), 'k')
				body = append(body, vi(3, -1)...)
				body = append(body, vi(4, 1)...)
				body = append(append(body, vi(5, 1)...), 'h')
				body = append(body, vi(6, -1)...)
				return append(vi(0, int64(len(body))), body...)
			}
			var d Decoder
			// 5 bytes, even when not minimal, is within Kafka's limit.
			if _, err := d.Records(batchWithPayload(t, record(5))); err != nil {
				t.Fatalf("record with a 5-byte %s varint: %v", name, err)
			}
			if recs, err := d.Records(batchWithPayload(t, record(6))); err == nil {
				t.Fatalf("record with a 6-byte %s varint decoded: %+v", name, recs)
			}
		})
	}
}

// batchWithPayload is an uncompressed one-record batch holding payload.
func batchWithPayload(t *testing.T, payload []byte) Batch {
	var e Encoder
	b, err := e.AppendBatch(nil, NewBatchSpec(0, codec.None), []Record{{Offset: 0, Timestamp: 0, Key: []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:HeaderSize], payload...)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	Batch(b).UpdateCRC()
	return Batch(b)
}
