package kafkasrv

import (
	"bytes"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// TestCutViewAcrossParts: cutting whole batches split across parts at any
// byte, for any limit, keeps exactly what cutAt keeps of the same bytes in
// one slice, and the same next offset.
func TestCutViewAcrossParts(t *testing.T) {
	var enc record.Encoder
	var data []byte
	for _, base := range []int64{0, 5, 10} {
		recs := make([]record.Record, 5)
		for i := range recs {
			recs[i] = record.Record{Offset: base + int64(i), Timestamp: 1000 + base + int64(i), Value: bytes.Repeat([]byte{byte(base)}, 40)}
		}
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(base, codec.None), recs)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b...)
	}
	for limit := int64(0); limit <= 16; limit++ {
		want, wantNext := cutAt(data, limit)
		for i := 1; i < len(data); i += 7 {
			for j := i; j < len(data); j += 31 {
				v := fetchcache.View{Parts: [][]byte{data[:i], data[i:j], data[j:]}, Len: len(data)}
				got, next := cutView(v, limit)
				if !bytes.Equal(got.Bytes(), want) || got.Len != len(want) || next != wantNext {
					t.Fatalf("limit %d, parts cut at %d and %d: kept %d bytes (next %d), want %d (next %d)", limit, i, j, got.Len, next, len(want), wantNext)
				}
			}
		}
	}
}
