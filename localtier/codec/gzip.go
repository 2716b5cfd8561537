package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipDecoder bundles a reusable gzip reader with its source.
type gzipDecoder struct {
	zr  gzip.Reader
	src bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

func decompressGzip(dst, src []byte, maxOut int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer gzipDecoders.Put(d)
	d.src.Reset(src)
	if err := d.zr.Reset(&d.src); err != nil {
		return dst, corrupt(Gzip, err, "read gzip header")
	}
	// The trailer's ISIZE is the last member's length mod 2^32, and any
	// payload can claim any: it may only shrink the first guess, never
	// make room for output nothing has produced yet.
	hint := initialGuess(len(src), maxOut)
	if len(src) >= 18 {
		if isize := int64(binary.LittleEndian.Uint32(src[len(src)-4:])); isize > 0 && isize < int64(hint) {
			hint = int(isize)
		}
	}
	out, err := readBounded(&d.zr, dst, maxOut, hint)
	if errors.Is(err, errTooLarge) {
		return dst, tooLarge(Gzip, maxOut)
	}
	if err != nil {
		return dst, corrupt(Gzip, err, "inflate")
	}
	return out, nil
}

var gzipEncoders = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression) // the level is valid
	return &gzipEncoder{zw: zw}
}}

type gzipEncoder struct {
	zw  *gzip.Writer
	out appender
}

func compressGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	e.out.b = dst
	defer func() { e.out.b = nil }()
	e.zw.Reset(&e.out)
	if _, err := e.zw.Write(src); err != nil {
		return dst, fmt.Errorf("compress gzip: %w", err)
	}
	if err := e.zw.Close(); err != nil {
		return dst, fmt.Errorf("compress gzip: %w", err)
	}
	return e.out.b, nil
}
