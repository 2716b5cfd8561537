package codec

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// TestDeclaredSizeAllocation: a payload of a few bytes that claims a large
// decompressed size (gzip's ISIZE trailer, a zstd frame content size, a
// snappy block's length) must not make Decompress allocate that size before
// decoding anything: with a 64 MiB limit, each hostile batch cost 48 MiB
// and concurrent ones multiplied it.
func TestDeclaredSizeAllocation(t *testing.T) {
	const (
		maxOut   = 64 << 20
		declared = 48 << 20
	)
	gz, err := Compress(Gzip, nil, []byte("hello, hostile world"))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(gz[len(gz)-4:], declared) // ISIZE

	// A single-segment zstd frame declaring declared bytes, then one raw
	// last block of one byte.
	zs := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0}
	zs = binary.LittleEndian.AppendUint32(zs, declared)
	zs = append(zs, 1<<3|1, 0, 0, 'x')

	// Raw snappy: the length varint, then a one-byte literal.
	raw := binary.AppendUvarint(nil, declared)
	raw = append(raw, 0<<2, 'x')

	// Xerial framing around the same block.
	xer := append([]byte(nil), xerialMagic...)
	xer = binary.BigEndian.AppendUint32(xer, 1)
	xer = binary.BigEndian.AppendUint32(xer, 1)
	xer = binary.BigEndian.AppendUint32(xer, uint32(len(raw)))
	xer = append(xer, raw...)

	for _, p := range []struct {
		name string
		c    Codec
		data []byte
	}{{"gzip isize", Gzip, gz}, {"zstd content size", Zstd, zs}, {"raw snappy length", Snappy, raw}, {"xerial chunk length", Snappy, xer}} {
		t.Run(p.name, func(t *testing.T) {
			small, _ := Compress(p.c, nil, []byte("warm"))
			if _, err := Decompress(p.c, nil, small, 10); err != nil {
				t.Fatal(err)
			}
			if p.c == Snappy {
				Decompress(p.c, nil, snappy.Encode(nil, []byte("warm")), 10)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decompress(p.c, nil, p.data, maxOut)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want ErrCorrupt", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte payload declaring %d bytes: allocated %d bytes", len(p.data), declared, alloc)
			if alloc > 1<<20 && !raceEnabled {
				t.Errorf("allocated %d bytes for a %d-byte payload (it produces at most a few bytes)", alloc, len(p.data))
			}
		})
	}
}
