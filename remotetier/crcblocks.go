package remotetier

import (
	"hash/crc32"
	"io"
	"sync"
)

// crcBlockSize is the granularity of crcBlocks: object-store part sizes are
// whole MiB, so every part of a segment is a run of whole blocks (the last
// one possibly cut at the end of the segment).
const crcBlockSize = 1 << 20

// crcBlocks is an io.Writer recording the CRC-32C (Castagnoli) of every
// crcBlockSize block of what is written to it. The uploader's check pass
// writes the segment through it once; the checksum of the whole segment
// (for the manifest) and of every block-aligned range (for the object
// store's x-amz-checksum-crc32c of each part) then come without reading
// the segment again.
type crcBlocks struct {
	sums []uint32 // full blocks
	cur  uint32   // the block being filled
	fill int64    // bytes in cur
	n    int64    // bytes written
}

func (c *crcBlocks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(int64(len(p)), crcBlockSize-c.fill)
		c.cur = crc32.Update(c.cur, castagnoli, p[:k])
		c.fill += k
		c.n += k
		p = p[k:]
		if c.fill == crcBlockSize {
			c.sums = append(c.sums, c.cur)
			c.cur, c.fill = 0, 0
		}
	}
	return n, nil
}

// sum returns the CRC-32C of the n bytes at off. It knows only ranges that
// start on a block boundary and end on one or at the end of what was
// written; ok is false for any other.
func (c *crcBlocks) sum(off, n int64) (sum uint32, ok bool) {
	end := off + n
	if off < 0 || n < 0 || end > c.n || off%crcBlockSize != 0 || end%crcBlockSize != 0 && end != c.n {
		return 0, false
	}
	shift := blockShift()
	for b := off; b < end; b += crcBlockSize {
		i := b / crcBlockSize
		if i < int64(len(c.sums)) && end-b >= crcBlockSize {
			// A whole block: the common case, by the precomputed operator.
			sum = gf2Times(shift, sum) ^ c.sums[i]
			continue
		}
		sum = crc32cCombine(sum, c.cur, end-b) // the partial last block
	}
	return sum, true
}

// blockShift returns the operator that carries a CRC-32C through
// crcBlockSize zero bytes, computed once: combining whole blocks then costs
// one matrix-vector product each instead of some forty matrix squarings.
var blockShift = sync.OnceValue(func() *[32]uint32 {
	var op [32]uint32
	for i := range op {
		op[i] = crc32cCombine(1<<i, 0, crcBlockSize)
	}
	return &op
})

// crc32cCombine returns the CRC-32C of A‖B from crc(A), crc(B) and len(B):
// crc(A) is carried through len(B) zero bytes by repeated squaring of the
// CRC's shift operator over GF(2) (the method of zlib's crc32_combine),
// then crc(B) is added.
func crc32cCombine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	odd[0] = 0x82F63B78 // the reflected Castagnoli polynomial: one zero bit
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four zero bits
	for {
		gf2Square(&even, &odd) // a byte, then 4, 16, ... bytes
		if lenB&1 != 0 {
			crcA = gf2Times(&even, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
		gf2Square(&odd, &even)
		if lenB&1 != 0 {
			crcA = gf2Times(&odd, crcA)
		}
		if lenB >>= 1; lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for i := range mat {
		square[i] = gf2Times(mat, mat[i])
	}
}

// checkedSection is the .log body handed to the object store: the bytes
// the check pass read, by position, with their block checksums
// (objstore.CRC32CRanger), so the S3 backend does not read them a second
// time to checksum each request. Should the file change between the two
// passes, the store rejects the body that no longer matches.
type checkedSection struct {
	*io.SectionReader
	sums *crcBlocks
}

// CRC32CRange implements objstore.CRC32CRanger.
func (s checkedSection) CRC32CRange(off, n int64) (uint32, bool) { return s.sums.sum(off, n) }
