package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/pierrec/lz4/v4"
)

const (
	lz4FrameMagic  = 0x184D2204
	lz4LegacyMagic = 0x184C2102
	lz4FlagSize    = 1 << 3 // FLG: content size present
	lz4FlagDictID  = 1 << 0 // FLG: dictionary ID present
	// FLG: a checksum follows each block / the end mark.
	lz4FlagBlockChecksum   = 1 << 4
	lz4FlagContentChecksum = 1 << 2
	lz4FlagIndependent     = 1 << 5 // FLG: blocks are independent
)

// lz4Decoder bundles a reusable frame reader with its source. When a frame
// header carries the KAFKA-3160 checksum, the reader reads the corrected
// header from hdr and then the rest of the payload.
type lz4Decoder struct {
	zr   *lz4.Reader
	hdr  bytes.Reader
	body bytes.Reader
	src  headerThenBody
	fix  [19]byte
}

// headerThenBody reads hdr, then body (io.MultiReader without allocating).
type headerThenBody struct{ hdr, body *bytes.Reader }

func (r *headerThenBody) Read(p []byte) (int, error) {
	if r.hdr.Len() > 0 {
		return r.hdr.Read(p)
	}
	return r.body.Read(p)
}

var lz4Decoders = sync.Pool{New: func() any {
	d := &lz4Decoder{zr: lz4.NewReader(nil)}
	d.src = headerThenBody{hdr: &d.hdr, body: &d.body}
	return d
}}

func decompressLZ4(dst, src []byte, maxOut int) ([]byte, error) {
	if len(src) >= 4 && binary.LittleEndian.Uint32(src) == lz4LegacyMagic {
		// The legacy frame (8 MiB blocks) is not one Kafka writes.
		return dst, corrupt(LZ4, nil, "legacy lz4 frame")
	}
	// Kafka's KafkaLZ4BlockInputStream reads one lz4 frame: the payload
	// must start with one (not a skippable frame), and its stream ends at
	// the frame's end mark. Bytes after it (another frame, which the lz4
	// reader would go on to decode) are refused.
	if len(src) < 4 || binary.LittleEndian.Uint32(src) != lz4FrameMagic {
		return dst, corrupt(LZ4, nil, "payload does not start with an lz4 frame")
	}
	if len(src) > 4 && src[4]&lz4FlagIndependent == 0 {
		// FLG.validate: "Dependent block stream is unsupported".
		return dst, corrupt(LZ4, nil, "lz4 frame with dependent blocks")
	}
	if n := lz4FrameLen(src); n > 0 && n < len(src) {
		return dst, corrupt(LZ4, nil, "%d bytes after the lz4 frame", len(src)-n)
	}
	d := lz4Decoders.Get().(*lz4Decoder)
	defer lz4Decoders.Put(d)
	if n := kafka3160HeaderLen(src); n > 0 {
		copy(d.fix[:], src[:n])
		d.fix[n-1] = lz4HeaderChecksum(src[4 : n-1])
		d.hdr.Reset(d.fix[:n])
		d.body.Reset(src[n:])
	} else {
		d.hdr.Reset(nil)
		d.body.Reset(src)
	}
	d.zr.Reset(&d.src)
	out, err := readBounded(d.zr, dst, maxOut, initialGuess(len(src), maxOut))
	d.zr.Reset(nil) // drop the reference to src
	if errors.Is(err, errTooLarge) {
		return dst, tooLarge(LZ4, maxOut)
	}
	if err != nil {
		return dst, corrupt(LZ4, err, "decode lz4 frame")
	}
	return out, nil
}

// IsKafka3160LZ4 reports whether src is an lz4 frame whose header checksum
// is the broken one of KAFKA-3160 (computed over the magic number too).
// Decompress reads such frames, as Kafka does in magic 0 messages; Kafka
// refuses them in magic 1 messages and v2 batches, and so must the caller.
func IsKafka3160LZ4(src []byte) bool { return kafka3160HeaderLen(src) > 0 }

// lz4FrameLen returns the length of the lz4 frame src starts with (header,
// blocks with their checksums, end mark, content checksum), or 0 when src
// ends inside it.
func lz4FrameLen(src []byte) int {
	if len(src) < 7 {
		return 0
	}
	flg := src[4]
	n := 7 // magic, FLG, BD, HC
	if flg&lz4FlagSize != 0 {
		n += 8
	}
	if flg&lz4FlagDictID != 0 {
		n += 4
	}
	for {
		if n < 0 || len(src)-n < 4 {
			return 0
		}
		size := binary.LittleEndian.Uint32(src[n:]) &^ (1 << 31) // high bit: stored uncompressed
		n += 4
		if size == 0 { // end mark
			break
		}
		if uint64(size) > uint64(len(src)-n) {
			return 0
		}
		n += int(size)
		if flg&lz4FlagBlockChecksum != 0 {
			n += 4
		}
	}
	if flg&lz4FlagContentChecksum != 0 {
		n += 4
	}
	if n > len(src) {
		return 0
	}
	return n
}

// kafka3160HeaderLen returns the length of the frame header of src (magic,
// descriptor, checksum byte) if its header checksum is wrong in the way
// Kafka's Java client wrote it for magic 0 messages (KAFKA-3160): computed
// over the magic number as well as the descriptor. Otherwise it returns 0.
func kafka3160HeaderLen(src []byte) int {
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != lz4FrameMagic {
		return 0
	}
	n := 7 // magic, FLG, BD, HC
	if src[4]&lz4FlagSize != 0 {
		n += 8
	}
	if src[4]&lz4FlagDictID != 0 {
		return 0 // dictionaries are refused by the decoder anyway
	}
	if len(src) < n {
		return 0
	}
	hc := src[n-1]
	if hc == lz4HeaderChecksum(src[4:n-1]) || hc != lz4HeaderChecksum(src[:n-1]) {
		return 0
	}
	return n
}

// lz4HeaderChecksum is the LZ4 frame header checksum of b: the second byte
// of xxHash32(b, seed 0).
func lz4HeaderChecksum(b []byte) byte { return byte(xxh32Short(b) >> 8) }

const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32Short is xxHash32 with seed 0 for inputs shorter than 16 bytes, which
// is all a frame header needs.
func xxh32Short(b []byte) uint32 {
	if len(b) >= 16 {
		panic(fmt.Sprintf("codec: xxh32Short called with %d bytes", len(b)))
	}
	h := xxhPrime5 + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}

type lz4Encoder struct {
	zw  *lz4.Writer
	out appender
}

var lz4Encoders = sync.Pool{New: func() any { return &lz4Encoder{zw: lz4.NewWriter(nil)} }}

// lz4Options is the frame Kafka's Java producer writes: 64 KiB independent
// blocks, no block checksum, no content checksum, no content size.
var lz4Options = []lz4.Option{
	lz4.BlockSizeOption(lz4.Block64Kb),
	lz4.BlockChecksumOption(false),
	lz4.ChecksumOption(false),
	lz4.ConcurrencyOption(1),
	lz4.CompressionLevelOption(lz4.Fast),
}

func compressLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.b = dst
	defer func() { e.out.b = nil }()
	e.zw.Reset(&e.out)
	if err := e.zw.Apply(lz4Options...); err != nil {
		return dst, fmt.Errorf("compress lz4: configure writer: %w", err)
	}
	if _, err := e.zw.Write(src); err != nil {
		return dst, fmt.Errorf("compress lz4: %w", err)
	}
	if err := e.zw.Close(); err != nil {
		return dst, fmt.Errorf("compress lz4: %w", err)
	}
	return e.out.b, nil
}
