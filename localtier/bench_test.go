package localtier

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// benchBatch is a producer batch of 1 KiB records filling 16 KiB, as a
// producer with batch.size=16384 sends them.
func benchBatch(b *testing.B) []byte {
	var recs []record.Record
	size := 0
	val := bytes.Repeat([]byte("x"), 1024)
	for i := 0; ; i++ {
		r := record.Record{Offset: int64(i), Timestamp: 1_700_000_000_000, Key: []byte(fmt.Sprintf("key-%06d", i)), Value: val}
		n := record.EncodedRecordSize(0, int32(i), r.Key, r.Value, nil)
		if size+n > 16384-record.HeaderSize {
			break
		}
		size += n
		recs = append(recs, r)
	}
	var e record.Encoder
	buf, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

// BenchmarkAppend compares Log.Append of 16 KiB batches of 1 KiB records
// with a raw sequential write of the same bytes to a file in the same dir.
func BenchmarkAppend(b *testing.B) {
	batch := benchBatch(b)
	b.Run("rawwrite", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		var pos int64
		for b.Loop() {
			if _, err := f.WriteAt(batch, pos); err != nil {
				b.Fatal(err)
			}
			pos += int64(len(batch))
			if pos >= 1<<30 {
				pos = 0
				_ = f.Truncate(0)
			}
		}
	})
	b.Run("log", func(b *testing.B) {
		cfg := testConfig(b, nil)
		l, _, err := OpenLog(vfs.Default, filepath.Join(b.TempDir(), "bench-0"), LogOptions{Config: cfg, Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
