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
// with a raw sequential write of the same bytes to files in the same kind
// of dir. Both keep every byte they wrote until the sub-benchmark ends:
// the raw write goes on in a new file once one holds 1 GiB, as the log
// rolls to a new segment at segment.bytes (1 GiB), so the page cache and
// writeback treat both alike (a raw file truncated and rewritten instead
// would reuse its pages while the log's dirty pages grew). scripts/bench
// runs it for a fixed number of batches (-benchtime 60000x, 983 MB), under
// the kernel's background writeback threshold: for a time, the faster of
// the two reaches it first and is slowed in some runs and not in others.
func BenchmarkAppend(b *testing.B) {
	batch := benchBatch(b)
	b.Run("rawwrite", func(b *testing.B) {
		dir := b.TempDir()
		var f *os.File
		files := 0
		next := func() { // the next 1 GiB file
			if f != nil {
				_ = f.Close()
			}
			var err error
			if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("raw-%d", files))); err != nil {
				b.Fatal(err)
			}
			files++
		}
		next()
		defer func() { _ = f.Close() }()
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		var pos int64
		for b.Loop() {
			if _, err := f.WriteAt(batch, pos); err != nil {
				b.Fatal(err)
			}
			pos += int64(len(batch))
			if pos >= 1<<30 {
				next()
				pos = 0
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

// BenchmarkRead reads a 64 MiB log of 16 KiB batches from start to end
// with Log.Read at 1 MiB a read (a consumer's max.partition.fetch.bytes),
// from the page cache; b.SetBytes makes MB/s the bytes served.
func BenchmarkRead(b *testing.B) {
	batch := benchBatch(b)
	cfg := testConfig(b, nil)
	l, _, err := OpenLog(vfs.Default, filepath.Join(b.TempDir(), "bench-0"), LogOptions{Config: cfg, Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	readAll := func() int64 {
		var n int64
		for off := int64(0); off < end; {
			res, err := l.Read(off, 1<<20, true)
			if err != nil || len(res.Data) == 0 {
				b.Fatalf("read at %d: %d bytes, %v", off, len(res.Data), err)
			}
			n += int64(len(res.Data))
			off = lastNext(res.Data)
		}
		return n
	}
	b.SetBytes(readAll())
	b.ReportAllocs()
	for b.Loop() {
		readAll()
	}
}

// lastNext is the offset after the last whole batch of data.
func lastNext(data []byte) int64 {
	it := record.NewIter(data)
	next := int64(-1)
	for {
		bt, ok := it.Next()
		if !ok {
			return next
		}
		next = bt.NextOffset()
	}
}
