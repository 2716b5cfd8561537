package record

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
)

// A small zstd batch whose payload decompresses to 8 MiB of zeros (not one
// valid record: the first length is 0) and whose header claims 2^31-1
// records. Decoding must fail at record 0 without allocating much more than
// the decompressed payload; it used to size the record slice by
// min(count, payload/7) up front: 1.2M Records of 96 bytes, about 115 MB,
// fourteen times the decompression limit.
func TestReviewHostileCountCompressedNoPrealloc(t *testing.T) {
	const maxOut = 8 << 20
	b := hostileCountBatch(t, maxOut)
	t.Logf("hostile batch: %d bytes", len(b))

	d := Decoder{MaxUncompressed: maxOut}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := d.Records(Batch(b))
	runtime.ReadMemStats(&after)
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CorruptError", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 3*maxOut {
		t.Fatalf("decoding a %d-byte batch that fails at its first record allocated %d bytes (decompression limit %d)", len(b), grew, maxOut)
	}
}

// hostileCountBatch is a zstd batch of n zeros claiming 2^31-1 records.
func hostileCountBatch(tb testing.TB, n int) []byte {
	var e Encoder
	b, err := e.AppendBatch(nil, NewBatchSpec(0, codec.Zstd), []Record{{Offset: 0, Timestamp: 1, Key: []byte("k")}})
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := codec.Compress(codec.Zstd, nil, make([]byte, n))
	if err != nil {
		tb.Fatal(err)
	}
	b = append(b[:HeaderSize], payload...)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], math.MaxInt32-1)
	binary.BigEndian.PutUint32(b[offRecordCount:], math.MaxInt32)
	Batch(b).UpdateCRC()
	return b
}
