package codec

import (
	"errors"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdMaxWindow is the largest window a frame may declare. Decoding with
// DecodeAll keeps no window buffer of its own (the output is the history),
// so this costs no memory; it only refuses frames no Kafka producer writes.
// 128 MiB is the window of zstd's strongest level (22), which
// compression.zstd.level allows.
const zstdMaxWindow = 128 << 20

var zstdDecoders = sync.Pool{New: func() any {
	// Concurrency 1 and DecodeAll only: the decoder starts no goroutines,
	// so a pooled decoder the GC drops leaks nothing.
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
	)
	if err != nil {
		panic("codec: zstd decoder options: " + err.Error())
	}
	return d
}}

// zstdBlockSlack is room for one more block than the limit: a zstd block
// produces at most 128 KiB, plus the decoder's copy overrun.
const zstdBlockSlack = 128<<10 + 64

// decompressZstd decodes with DecodeAll under a capacity limit: the decoder
// refuses to write past cap(dst). When the frame declares its content size
// the room is exactly that; otherwise decoding starts with a guess and
// restarts with four times the room until it fits, so the work is at most
// 4/3 of one decode into the final size. The last attempt has room for
// maxOut plus one block: a payload within the limit then always fits, and
// one beyond it shows by producing more than maxOut bytes. (The decoder
// reports a full buffer with an untyped error, so it cannot tell us.)
func decompressZstd(dst, src []byte, maxOut int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return dst, corrupt(Zstd, err, "read frame header")
	}
	final := maxOut + zstdBlockSlack
	room := min(final, initialGuess(len(src), maxOut))
	if h.HasFCS {
		if h.FrameContentSize > uint64(maxOut) {
			return dst, tooLarge(Zstd, maxOut)
		}
		// DecodeAll decodes a frame that declares its size only into room
		// for all of it. A frame cannot produce more than one block
		// (128 KiB) per 4 of its bytes, so a declaration beyond that is a
		// lie, refused before it costs an allocation.
		if h.FrameContentSize > uint64(len(src)/4)*(128<<10) {
			return dst, corrupt(Zstd, nil, "frame declares %d bytes, more than its %d bytes can decode to", h.FrameContentSize, len(src))
		}
		room = int(h.FrameContentSize)
	}
	d := zstdDecoders.Get().(*zstd.Decoder)
	defer zstdDecoders.Put(d)
	for {
		buf := grow(dst, room)
		out, err := d.DecodeAll(src, buf[:len(dst):len(dst)+room])
		produced := 0
		if out != nil {
			produced = len(out) - len(dst)
		}
		if produced > maxOut {
			return dst, tooLarge(Zstd, maxOut)
		}
		if err == nil {
			return out, nil
		}
		full := errors.Is(err, zstd.ErrDecoderSizeExceeded) || produced+zstdBlockSlack > room
		switch {
		case full && room >= final:
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return dst, tooLarge(Zstd, maxOut)
			}
			return dst, corrupt(Zstd, err, "decode frame")
		case full:
			room = min(final, max(room*4, room+zstdBlockSlack))
		default:
			return dst, corrupt(Zstd, err, "decode frame")
		}
	}
}

var zstdEncoders = sync.Pool{New: func() any {
	// Concurrency 1 and EncodeAll only: no goroutines.
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedDefault), // zstd level 3, Kafka's default
		zstd.WithZeroFrames(true),                // empty input still makes a frame
	)
	if err != nil {
		panic("codec: zstd encoder options: " + err.Error())
	}
	return e
}}

func compressZstd(dst, src []byte) []byte {
	e := zstdEncoders.Get().(*zstd.Encoder)
	defer zstdEncoders.Put(e)
	return e.EncodeAll(src, dst)
}
