package remotetier

import (
	"bytes"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

func TestCRC32CCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, split := range []int{0, 1, 7, 4096, 1 << 20, len(data) - 1, len(data)} {
		a, b := data[:split], data[split:]
		got := crc32cCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
		if want := crc32.Checksum(data, castagnoli); got != want {
			t.Errorf("split at %d: combined %08x, want %08x", split, got, want)
		}
	}
}

// TestCRCBlocks writes a stream through crcBlocks in odd-sized writes and
// checks every range it claims to know against a direct checksum, and that
// it refuses the unaligned ones.
func TestCRCBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{0, 100, crcBlockSize, 5*crcBlockSize + 777, 4 * crcBlockSize} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var c crcBlocks
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(300_000))
			if n, err := c.Write(rest[:k]); n != k || err != nil {
				t.Fatalf("write: %d, %v", n, err)
			}
			rest = rest[k:]
		}
		n := int64(size)
		for _, r := range [][2]int64{{0, n}, {0, min(n, crcBlockSize)}, {crcBlockSize, n - crcBlockSize}, {2 * crcBlockSize, min(n-2*crcBlockSize, 2*crcBlockSize)}, {0, 0}} {
			off, l := r[0], r[1]
			if off > n || l < 0 || off+l > n {
				continue
			}
			got, ok := c.sum(off, l)
			if !ok {
				t.Errorf("size %d: range %d+%d refused", size, off, l)
				continue
			}
			if want := crc32.Checksum(data[off:off+l], castagnoli); got != want {
				t.Errorf("size %d: range %d+%d: %08x, want %08x", size, off, l, got, want)
			}
		}
		refused := [][2]int64{{0, n + 1}, {-1, 1}}
		if n >= 2 {
			refused = append(refused, [2]int64{1, 1}) // not on a block boundary
		}
		if n > crcBlockSize {
			refused = append(refused, [2]int64{0, crcBlockSize - 1}) // ends inside a block
		}
		for _, r := range refused {
			if _, ok := c.sum(r[0], r[1]); ok {
				t.Errorf("size %d: range %d+%d accepted", size, r[0], r[1])
			}
		}
	}
}

// TestCheckedSectionIsRanger: the uploader's .log body offers its checksums
// to the object store and reads like the section it wraps.
func TestCheckedSectionIsRanger(t *testing.T) {
	data := bytes.Repeat([]byte("segment bytes "), 100_000)
	var c crcBlocks
	c.Write(data)
	var r io.Reader = checkedSection{SectionReader: io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), sums: &c}
	cr, ok := r.(objstore.CRC32CRanger)
	if !ok {
		t.Fatal("checkedSection is not an objstore.CRC32CRanger")
	}
	if _, ok := r.(io.ReaderAt); !ok {
		t.Fatal("checkedSection lost io.ReaderAt")
	}
	if sum, ok := cr.CRC32CRange(0, int64(len(data))); !ok || sum != crc32.Checksum(data, castagnoli) {
		t.Fatalf("whole range: %08x %v", sum, ok)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
}
