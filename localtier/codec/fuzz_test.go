package codec

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// FuzzDecompress feeds arbitrary payloads to every codec's decoder. It must
// not panic, must honour maxOut, must report failures as ErrCorrupt or
// ErrTooLarge without touching dst, and must not allocate for lengths a
// payload merely claims.
func FuzzDecompress(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(uint8(fx.codec), fx.payload, uint32(1<<20))
	}
	for _, c := range allCodecs {
		for _, n := range []int{0, 1, 300, 70 << 10} {
			comp, err := Compress(c, nil, recordLike(n, 2))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(c), comp, uint32(n))
			f.Add(uint8(c), comp, uint32(n/2))
		}
	}
	f.Add(uint8(Snappy), snappy.Encode(nil, recordLike(1000, 3)), uint32(4096))
	lz, _ := Compress(LZ4, nil, recordLike(1000, 4))
	lz[6] = lz4HeaderChecksum(lz[:6]) // KAFKA-3160 header
	f.Add(uint8(LZ4), lz, uint32(4096))

	f.Fuzz(func(t *testing.T, codec uint8, src []byte, limit uint32) {
		c := Codec(codec % 6) // 5 is not a codec
		maxOut := int(limit % (8 << 20))
		prefix := []byte{1, 2, 3}
		dst := make([]byte, len(prefix), len(prefix)+16)
		copy(dst, prefix)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := Decompress(c, dst, src, maxOut)
		runtime.ReadMemStats(&after)
		// Output growth is at most about twice the output; the constant
		// covers decoder state (an lz4 frame may declare 4 MiB blocks).
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(3*maxOut+3*len(src)+12<<20) {
			t.Fatalf("%s: allocated %d bytes for a %d-byte payload with limit %d", c, alloc, len(src), maxOut)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: error %v is neither ErrCorrupt nor ErrTooLarge", c, err)
			}
			if len(out) != len(prefix) || !bytes.Equal(out, prefix) {
				t.Fatalf("%s: dst changed on error", c)
			}
			return
		}
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatalf("%s: prefix overwritten", c)
		}
		produced := len(out) - len(prefix)
		if produced > maxOut {
			t.Fatalf("%s: produced %d bytes, limit %d", c, produced, maxOut)
		}
		// The limit is exact: the same payload fits in its own size and
		// not in one byte less.
		again, err := Decompress(c, nil, src, produced)
		if err != nil || !bytes.Equal(again, out[len(prefix):]) {
			t.Fatalf("%s: decoding again with limit %d: %v", c, produced, err)
		}
		if produced > 0 {
			if _, err := Decompress(c, nil, src, produced-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: limit %d for %d bytes: err = %v, want ErrTooLarge", c, produced-1, produced, err)
			}
		}
	})
}

// FuzzRoundTrip checks that every codec gives back what it compressed.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("hello kafka"))
	f.Add(recordLike(40<<10, 5))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, c := range allCodecs {
			comp, err := Compress(c, nil, src)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			out, err := Decompress(c, nil, comp, len(src))
			if err != nil || !bytes.Equal(out, src) {
				t.Fatalf("%s: round trip: %v", c, err)
			}
		}
	})
}
