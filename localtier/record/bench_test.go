package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/localtier/codec"
)

// benchBuffer is 1 MiB of 16 KiB batches of 1 KiB records.
func benchBuffer(b *testing.B, valueSize int) ([]byte, int) {
	var e Encoder
	var buf []byte
	n := 0
	val := bytes.Repeat([]byte("v"), valueSize)
	for off := int64(0); len(buf) < 1<<20; {
		var recs []Record
		size := 0
		for {
			r := Record{Offset: off, Timestamp: 1_700_000_000_000 + off, Key: []byte(fmt.Sprintf("key-%08d", off)), Value: val,
				Headers: []Header{{Key: []byte("h"), Value: []byte("1")}}}
			s := EncodedRecordSize(0, 0, r.Key, r.Value, r.Headers)
			if size+s > 16384-HeaderSize && len(recs) > 0 {
				break
			}
			size += s
			recs = append(recs, r)
			off++
		}
		var err error
		if buf, err = e.AppendBatch(buf, NewBatchSpec(recs[0].Offset, codec.None), recs); err != nil {
			b.Fatal(err)
		}
		n += len(recs)
	}
	return buf, n
}

// BenchmarkIterate compares batch iteration with CRC verification against a
// plain CRC-32C over the same bytes.
func BenchmarkIterate(b *testing.B) {
	buf, _ := benchBuffer(b, 1024)
	b.Run("crc32c", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		var sink uint32
		for b.Loop() {
			sink += crc32.Checksum(buf, castagnoli)
		}
		_ = sink
	})
	b.Run("iter_verify", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			it := NewIter(buf)
			it.Verify = true
			for {
				if _, ok := it.Next(); !ok {
					break
				}
			}
			if it.Err() != nil {
				b.Fatal(it.Err())
			}
		}
	})
}

// BenchmarkCheckBatches measures the check every read runs on the batches
// it serves (CheckBatches over 1 MiB of 16 KiB batches, split in 64 KiB
// parts as a cache's chunks are): the offsets and headers alone (the remote
// path, whose CRCs were checked while the window was cut) and with the CRCs
// (the local path), against the plain CRC-32C of BenchmarkIterate.
func BenchmarkCheckBatches(b *testing.B) {
	buf, n := benchBuffer(b, 1024)
	var parts [][]byte
	for it, start := NewIter(buf), 0; ; {
		if _, ok := it.Next(); !ok {
			parts = append(parts, buf[start:it.Pos()])
			break
		}
		if it.Pos()-start >= 64<<10 {
			parts = append(parts, buf[start:it.Pos()])
			start = it.Pos()
		}
	}
	for _, verify := range []bool{false, true} {
		name := "offsets"
		if verify {
			name = "offsets_crc"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				c := NewChain(0, int64(n))
				keep, err := CheckBatches(parts, &c, verify, nil)
				if err != nil || keep != len(buf) {
					b.Fatalf("kept %d of %d: %v", keep, len(buf), err)
				}
			}
		})
	}
}

// BenchmarkDecode compares our record decoding with franz-go's kmsg on the
// same uncompressed batches (small records: decoding, not copying, dominates).
func BenchmarkDecode(b *testing.B) {
	buf, n := benchBuffer(b, 100)
	b.Run("kmsg", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			got := 0
			it := NewIter(buf)
			for {
				bt, ok := it.Next()
				if !ok {
					break
				}
				var kb kmsg.RecordBatch
				if err := kb.UnsafeReadFrom(bt); err != nil {
					b.Fatal(err)
				}
				raw := kb.Records
				for i := int32(0); i < kb.NumRecords; i++ {
					var kr kmsg.Record
					if err := kr.UnsafeReadFrom(raw); err != nil {
						b.Fatal(err)
					}
					raw = raw[varintLen(int64(kr.Length))+int(kr.Length):]
					got++
				}
			}
			if got != n {
				b.Fatalf("kmsg decoded %d of %d", got, n)
			}
		}
	})
	b.Run("tiered", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		var d Decoder
		for b.Loop() {
			got := 0
			it := NewIter(buf)
			for {
				bt, ok := it.Next()
				if !ok {
					break
				}
				recs, err := d.Records(bt)
				if err != nil {
					b.Fatal(err)
				}
				got += len(recs)
			}
			if got != n {
				b.Fatalf("decoded %d of %d", got, n)
			}
		}
	})
}
