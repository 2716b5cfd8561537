package codec

import (
	"bytes"
	"encoding/binary"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// xerialMagic starts a payload in snappy-java's stream framing, which the
// Java client writes. The header continues with two big-endian int32s, the
// format version and the oldest compatible version, both 1.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16
	// xerialBlockSize is the uncompressed size of the blocks snappy-java's
	// SnappyOutputStream writes by default (its DEFAULT_BLOCK_SIZE), which is
	// what Kafka's Java producer uses.
	xerialBlockSize = 32 << 10
)

func decompressSnappy(dst, src []byte, maxOut int) ([]byte, error) {
	if bytes.HasPrefix(src, xerialMagic) {
		return decompressXerial(dst, src, maxOut)
	}
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, corrupt(Snappy, err, "read raw snappy length")
	}
	if n > maxOut {
		return dst, tooLarge(Snappy, maxOut)
	}
	if n > snappyMaxDecodedLen(len(src)) {
		return dst, corrupt(Snappy, nil, "raw snappy block of %d bytes declares %d bytes", len(src), n)
	}
	out, err := decodeSnappyBlock(dst, src, n)
	if err != nil {
		return dst, corrupt(Snappy, err, "decode raw snappy block")
	}
	return out, nil
}

// snappyMaxDecodedLen is the most a raw snappy block of n bytes can decode
// to: no element of the snappy format yields more than 64 bytes per 3 of
// its own (a 3-byte copy of 64). The decoder needs room for the length a
// block declares before it decodes it, so a larger declaration is refused
// unallocated. (s2's repeat-offset copies, which the decoder also takes but
// no Kafka client writes, can exceed it.)
func snappyMaxDecodedLen(n int) int {
	return n / 3 * 64
}

// decodeSnappyBlock appends the n-byte decoding of one raw snappy block.
func decodeSnappyBlock(dst, block []byte, n int) ([]byte, error) {
	dst = grow(dst, n)
	at := len(dst)
	got, err := snappy.Decode(dst[at:at+n], block)
	if err != nil {
		return dst, err
	}
	if len(got) != n {
		// Decode writes in place given the room, and the length is the
		// one DecodedLen read; anything else would be a decoder bug.
		return dst, snappy.ErrCorrupt
	}
	return dst[:at+n], nil
}

// decompressXerial decodes snappy-java framing. A first pass walks the chunk
// headers and sums the decoded lengths the blocks declare, so the limit is
// enforced before anything is allocated.
func decompressXerial(dst, src []byte, maxOut int) ([]byte, error) {
	total := 0
	for rest, off := src, 0; len(rest) > 0; {
		if bytes.HasPrefix(rest, xerialMagic) {
			// snappy-java also reads streams concatenated header and all.
			if len(rest) < xerialHeaderLen {
				return dst, corrupt(Snappy, nil, "xerial header at byte %d truncated to %d bytes", off, len(rest))
			}
			rest, off = rest[xerialHeaderLen:], off+xerialHeaderLen
			continue
		}
		if len(rest) < 4 {
			return dst, corrupt(Snappy, nil, "xerial chunk length at byte %d truncated to %d bytes", off, len(rest))
		}
		size := binary.BigEndian.Uint32(rest)
		rest, off = rest[4:], off+4
		if size == 0 || uint64(size) > uint64(len(rest)) {
			return dst, corrupt(Snappy, nil, "xerial chunk at byte %d has length %d, %d bytes remain", off-4, size, len(rest))
		}
		n, err := snappy.DecodedLen(rest[:size])
		if err != nil {
			return dst, corrupt(Snappy, err, "read length of xerial chunk at byte %d", off-4)
		}
		if n > maxOut-total {
			return dst, tooLarge(Snappy, maxOut)
		}
		if n > snappyMaxDecodedLen(int(size)) {
			return dst, corrupt(Snappy, nil, "xerial chunk at byte %d of %d bytes declares %d bytes", off-4, size, n)
		}
		total += n
		rest, off = rest[size:], off+int(size)
	}
	// Room for what a payload this size usually decodes to; blocks beyond
	// it grow dst as they are decoded.
	out := grow(dst, min(total, initialGuess(len(src), maxOut)))
	for rest, off := src, 0; len(rest) > 0; {
		if bytes.HasPrefix(rest, xerialMagic) {
			rest, off = rest[xerialHeaderLen:], off+xerialHeaderLen
			continue
		}
		size := binary.BigEndian.Uint32(rest)
		block := rest[4 : 4+size]
		n, _ := snappy.DecodedLen(block) // checked by the first pass
		var err error
		if out, err = decodeSnappyBlock(out, block, n); err != nil {
			return dst, corrupt(Snappy, err, "decode xerial chunk at byte %d", off)
		}
		rest, off = rest[4+size:], off+4+int(size)
	}
	return out, nil
}

// compressSnappy writes xerial framing with 32 KiB blocks, as Kafka's Java
// producer does.
func compressSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		dst = grow(dst, 4+snappy.MaxEncodedLen(n))
		at := len(dst)
		// s2.EncodeSnappy writes a standard snappy block, about four
		// times faster than snappy.Encode (s2's "better" mode).
		block := s2.EncodeSnappy(dst[at+4:cap(dst)], src[:n])
		binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}
