// Package codec owns the compression codecs of Kafka record batches: the
// codec identifiers carried in bits 0-2 of a v2 batch's attributes, their
// compression.type names, and the exact payload formats Kafka clients and
// brokers write for each of them.
//
// Wire formats, as Kafka writes them:
//
//	gzip    a gzip stream (RFC 1952); several members are read as one stream.
//	snappy  xerial framing, written by the Java client:
//	          "\x82SNAPPY\x00" | version i32 | compatible version i32 |
//	          ( length i32 | raw snappy block of at most 32 KiB input )*
//	        or one raw snappy block with no header, written by librdkafka.
//	lz4     an LZ4 frame: 64 KiB blocks, independent, no block or content
//	        checksum. Frames whose header checksum was computed over the magic
//	        number too (KAFKA-3160, magic 0 messages) are accepted as well;
//	        IsKafka3160LZ4 lets callers refuse them outside magic 0.
//	        Blocks up to 4 MiB (other producers' defaults) are read; the
//	        legacy LZ4 frame, which Kafka never wrote, is refused, and so
//	        are skippable frames and bytes after the frame (Kafka reads
//	        one frame and nothing after its end mark).
//	zstd    one or more zstd frames, windows up to 128 MiB.
//
// Decompression is bounded: Decompress never produces, and never allocates
// for, more than the caller's maxOut bytes, whatever the payload claims.
package codec

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// Codec is a record batch compression codec: the value of bits 0-2 of the
// batch attributes.
type Codec int8

// The codecs Kafka defines.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

var names = [...]string{None: "none", Gzip: "gzip", Snappy: "snappy", LZ4: "lz4", Zstd: "zstd"}

// String returns the codec's compression.type name, or "codec(N)" for an
// identifier Kafka does not define.
func (c Codec) String() string {
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Valid reports whether c is one of the codecs Kafka defines.
func (c Codec) Valid() bool { return c >= None && c <= Zstd }

var (
	// ErrCorrupt is matched (with errors.Is) by every error that reports a
	// payload that cannot be decompressed.
	ErrCorrupt = errors.New("corrupt compressed payload")
	// ErrTooLarge reports a payload that decompresses to more than the
	// caller's limit.
	ErrTooLarge = errors.New("decompressed payload too large")
	// ErrUnknownCodec reports a codec identifier or name Kafka does not define.
	ErrUnknownCodec = errors.New("unknown compression codec")
)

// CorruptError describes a payload that cannot be decompressed. It matches
// ErrCorrupt with errors.Is and unwraps to the underlying decoder error, if
// any.
type CorruptError struct {
	Codec  Codec
	Reason string // what is wrong, e.g. "xerial chunk length 70 exceeds remaining 12 bytes"
	Err    error  // underlying decoder error; may be nil
}

func (e *CorruptError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("decompress %s: %s: %v", e.Codec, e.Reason, e.Err)
	}
	return fmt.Sprintf("decompress %s: %s", e.Codec, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) and errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || target == kafkaerr.ErrCorrupt
}

// Unwrap returns the underlying decoder error.
func (e *CorruptError) Unwrap() error { return e.Err }

func corrupt(c Codec, err error, format string, args ...any) error {
	return &CorruptError{Codec: c, Reason: fmt.Sprintf(format, args...), Err: err}
}

func tooLarge(c Codec, maxOut int) error {
	return fmt.Errorf("decompress %s: output exceeds %d bytes: %w", c, maxOut, ErrTooLarge)
}

// Parse returns the codec named by a Kafka compression.type value: none,
// gzip, snappy, lz4 or zstd, and "uncompressed" (the broker-side spelling of
// none). Names are case-sensitive, as in Kafka. "producer" means "keep the
// producer's codec"; it is resolved by the topic configuration, not here,
// and is refused with a message saying so.
func Parse(name string) (Codec, error) {
	switch name {
	case "none", "uncompressed":
		return None, nil
	case "gzip":
		return Gzip, nil
	case "snappy":
		return Snappy, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return Zstd, nil
	case "producer":
		return None, fmt.Errorf("parse compression type %q: it keeps the producer's codec and must be resolved per batch, not parsed as a codec: %w", name, ErrUnknownCodec)
	}
	return None, fmt.Errorf("parse compression type %q: want one of none, gzip, snappy, lz4, zstd: %w", name, ErrUnknownCodec)
}

// Decompress appends the decompressed form of src to dst and returns it.
// It refuses to produce more than maxOut bytes (a negative maxOut counts as
// 0), returning an error wrapping ErrTooLarge, and it never allocates much
// more than the output it has produced, so a hostile payload cannot make it
// allocate without bound. Payloads that cannot be decoded give a
// *CorruptError (errors.Is(err, ErrCorrupt)). On error the returned slice is
// dst, unchanged in length.
//
// A maxOut above math.MaxInt32 counts as math.MaxInt32: Kafka sizes are
// int32s. For None, src is appended as is (still subject to maxOut).
func Decompress(c Codec, dst, src []byte, maxOut int) ([]byte, error) {
	maxOut = min(max(maxOut, 0), math.MaxInt32)
	if c == None {
		if len(src) > maxOut {
			return dst, tooLarge(c, maxOut)
		}
		return append(dst, src...), nil
	}
	if !c.Valid() {
		return dst, corrupt(c, ErrUnknownCodec, "attributes name codec %d", int8(c))
	}
	if len(src) == 0 {
		return dst, corrupt(c, nil, "empty payload")
	}
	var (
		out []byte
		err error
	)
	switch c {
	case Gzip:
		out, err = decompressGzip(dst, src, maxOut)
	case Snappy:
		out, err = decompressSnappy(dst, src, maxOut)
	case LZ4:
		out, err = decompressLZ4(dst, src, maxOut)
	case Zstd:
		out, err = decompressZstd(dst, src, maxOut)
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Compress appends the compressed form of src to dst, in the format Kafka's
// producers write for c (see the package comment), and returns it. For None,
// src is appended as is.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return compressGzip(dst, src)
	case Snappy:
		return compressSnappy(dst, src), nil
	case LZ4:
		return compressLZ4(dst, src)
	case Zstd:
		return compressZstd(dst, src), nil
	}
	return dst, fmt.Errorf("compress with codec %d: %w", int8(c), ErrUnknownCodec)
}

// initialGuess is how much output room a stream decoder starts with when the
// payload does not declare its decompressed size.
func initialGuess(srcLen, maxOut int) int {
	return min(maxOut, max(4<<10, 4*srcLen))
}

// readBounded appends everything r produces to dst, growing dst as needed,
// and fails with errTooLarge once more than maxOut bytes have been produced.
// It never asks for room beyond len(dst)+maxOut. hint is the expected output
// size.
func readBounded(r io.Reader, dst []byte, maxOut, hint int) ([]byte, error) {
	start := len(dst)
	limit := start + maxOut
	if hint = min(hint, maxOut); cap(dst)-len(dst) < hint {
		dst = grow(dst, hint)
	}
	var probe [1]byte
	for empty := 0; empty < 100; {
		buf := probe[:]
		if len(dst) < limit {
			if len(dst) == cap(dst) {
				dst = grow(dst, min(limit-len(dst), max(cap(dst)-start, 4<<10)))
			}
			buf = dst[len(dst):min(cap(dst), limit)]
		}
		// At the limit, buf is the one-byte probe: any further byte
		// means the payload is too large.
		n, err := r.Read(buf)
		if n > 0 && len(dst) == limit {
			return dst, errTooLarge
		}
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return dst, io.ErrNoProgress
}

// errTooLarge is readBounded's internal signal; callers translate it.
var errTooLarge = errors.New("output limit reached")

// grow returns dst with room for at least n more bytes, growing
// geometrically so repeated calls stay linear.
func grow(dst []byte, n int) []byte {
	return slices.Grow(dst, n)
}

// appender is an io.Writer that appends to a byte slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}
