package localtier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// fileBatch is one batch as it lies in a segment file.
type fileBatch struct {
	path  string
	pos   int64
	bytes []byte
	first bool // the segment's first batch
}

// layout lists the batches of every segment of l, in log order.
func layout(t *testing.T, l *Log) []fileBatch {
	t.Helper()
	var out []fileBatch
	for _, s := range l.Segments() {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIter(data)
		for {
			pos := it.Pos()
			b, ok := it.Next()
			if !ok {
				break
			}
			out = append(out, fileBatch{path: s.Path, pos: int64(pos), bytes: append([]byte(nil), b...), first: pos == 0})
		}
	}
	return out
}

// TestReadChecksEveryBatch corrupts one batch of a closed log behind its
// back (a flipped bit in the base offset, which the CRC does not cover, or
// in the checksummed bytes) and reads the log from every batch with several
// limits: no read returns a batch that differs from what was written, the
// reads reaching the bad batch fail with a *record.CorruptError naming its
// file and position, and the batches before it are still served.
func TestReadChecksEveryBatch(t *testing.T) {
	tests := []struct {
		name string
		pick func(bs []fileBatch) int // which batch to corrupt
		flip func(b []byte)
	}{
		// Batch 13 has base offset 130 (0b10000010): bit 7 down gives 2.
		{"base offset bit down", func([]fileBatch) int { return 13 }, func(b []byte) { b[7] ^= 0x80 }},
		{"base offset lowest bit down", func([]fileBatch) int { return 13 }, lowestBitDown},
		// Bit 9 up: 130 + 512, past every offset of the segment.
		{"base offset bit up", func([]fileBatch) int { return 13 }, func(b []byte) { b[6] ^= 0x02 }},
		// Bit 3 up: 130 + 8, inside the batch before the next one.
		{"base offset low bit up", func([]fileBatch) int { return 13 }, func(b []byte) { b[7] ^= 0x08 }},
		{"first batch of a segment below its base", func(bs []fileBatch) int {
			for i, b := range bs {
				if b.first && i > 0 {
					return i
				}
			}
			return -1
		}, lowestBitDown},
		{"first batch of a segment up", func(bs []fileBatch) int {
			for i, b := range bs {
				if b.first && i > 0 {
					return i
				}
			}
			return -1
		}, func(b []byte) { b[7] ^= 0x01 }},
		// Down only: the last batch's offsets are where the log end comes
		// from, so one moved up reads as a gap compaction could leave.
		{"last batch of the log", func(bs []fileBatch) int { return len(bs) - 1 }, lowestBitDown},
		{"checksummed byte", func([]fileBatch) int { return 13 }, func(b []byte) { b[len(b)-1] ^= 0xff }},
		{"batch length", func([]fileBatch) int { return 13 }, func(b []byte) { b[11] ^= 0x04 }},
		{"magic", func([]fileBatch) int { return 13 }, func(b []byte) { b[16] = 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
			cfg := testConfig(t, map[string]string{"internal.segment.bytes": "20000", "index.interval.bytes": "4096"})
			l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
			for i := 0; i < 40; i++ {
				mustAppend(t, l, batchOf(t, 10, 200, 1_700_000_000_000+int64(i*10), codec.None))
			}
			bs := layout(t, l)
			end := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			k := tc.pick(bs)
			if k < 0 {
				t.Fatal("no batch to corrupt")
			}
			bad := bs[k]
			mod := append([]byte(nil), bad.bytes...)
			tc.flip(mod)
			f, err := os.OpenFile(bad.path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(mod, bad.pos); err != nil {
				t.Fatal(err)
			}
			f.Close()

			l, _ = openTestLog(t, vfs.Default, dir, cfg, clock, end)
			defer l.Close()
			want := map[int64][]byte{} // base offset -> the batch as written
			for _, b := range bs {
				want[record.Batch(b.bytes).BaseOffset()] = b.bytes
			}
			badBase := record.Batch(bad.bytes).BaseOffset()
			servedBefore := false
			for _, b := range bs {
				from := record.Batch(b.bytes).BaseOffset()
				for _, maxBytes := range []int{1, 5000, 1 << 20} {
					res, err := l.Read(from, maxBytes, true)
					if err != nil {
						var ce *record.CorruptError
						if !errors.As(err, &ce) {
							t.Fatalf("read %d max %d: %v, want a *record.CorruptError", from, maxBytes, err)
						}
						// Two batches that do not follow one another: the
						// error may name either.
						near := ce.Pos == bad.pos || (k+1 < len(bs) && ce.Pos == bs[k+1].pos)
						if ce.File != bad.path && (k+1 >= len(bs) || ce.File != bs[k+1].path) || !near {
							t.Fatalf("read %d max %d: %v names %s at %d, want %s at %d", from, maxBytes, err, ce.File, ce.Pos, bad.path, bad.pos)
						}
						continue
					}
					it := record.NewIter(res.Data)
					for {
						got, ok := it.Next()
						if !ok {
							break
						}
						if !bytes.Equal(got, want[got.BaseOffset()]) {
							t.Fatalf("read %d max %d served a batch at offset %d that was not written so", from, maxBytes, got.BaseOffset())
						}
						if got.BaseOffset() == badBase-10 {
							servedBefore = true
						}
					}
					if it.Pos() != len(res.Data) {
						t.Fatalf("read %d max %d: %d bytes, %d of whole batches", from, maxBytes, len(res.Data), it.Pos())
					}
				}
				if from == badBase {
					if _, err := l.Read(from, 1<<20, true); !record.IsCorrupt(err) {
						t.Fatalf("read at the corrupt batch %d: %v, want corrupt", from, err)
					}
				}
			}
			if k > 0 && !servedBefore {
				t.Fatalf("the batch before the corrupt one (offset %d) was never served", badBase-10)
			}
		})
	}
}

// lowestBitDown clears the lowest set bit of a batch's base offset.
func lowestBitDown(b []byte) {
	base := binary.BigEndian.Uint64(b)
	binary.BigEndian.PutUint64(b, base&(base-1))
}
