package record

import (
	"errors"
	"fmt"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// CorruptError reports a batch that fails framing, checksum or record
// decoding. File and Pos say where; callers that know the file fill File and
// add the buffer's file position to Pos (see WithFile).
type CorruptError struct {
	File     string // file holding the batch, "" when unknown
	Pos      int64  // byte position of the batch start
	Offset   int64  // base offset field of the batch, -1 if unreadable
	Reason   string // what is wrong
	Stored   uint32 // stored checksum, for checksum mismatches
	Computed uint32 // computed checksum, for checksum mismatches
	Err      error  // underlying cause, if any
}

func (e *CorruptError) Error() string {
	where := "buffer"
	if e.File != "" {
		where = e.File
	}
	msg := fmt.Sprintf("corrupt record batch in %s at position %d", where, e.Pos)
	if e.Offset >= 0 {
		msg += fmt.Sprintf(" (base offset %d)", e.Offset)
	}
	msg += ": " + e.Reason
	if e.Reason == "checksum mismatch" {
		msg += fmt.Sprintf(" (stored %08x, computed %08x)", e.Stored, e.Computed)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.Err }

// WithFile returns err with file set and pos added to its position when err
// is a *CorruptError; other errors are returned unchanged.
func WithFile(err error, file string, pos int64) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		c := *ce
		c.File = file
		c.Pos += pos
		return &c
	}
	return err
}

// IsCorrupt reports whether err is (or wraps) a *CorruptError.
func IsCorrupt(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce)
}

// MinLength returns the smallest legal length field for a magic (0 to 2).
func MinLength(magic int8) int32 {
	switch magic {
	case 0:
		return legacyMinSize0
	case 1:
		return legacyMinSize1
	default:
		return HeaderSize - LogOverhead
	}
}

// Iter walks the batches in a buffer without allocating. The zero value is
// not usable; make one with NewIter. After Next returns false, Err reports a
// framing or checksum problem and Truncated reports an incomplete trailing
// batch (normal at the end of a fetch response or of a byte-limited read).
type Iter struct {
	buf []byte
	pos int
	// Verify makes Next check each batch's CRC and stop with a
	// *CorruptError on mismatch.
	Verify bool
	// Chain, when set, makes Next check each batch's offsets with it (see
	// Chain) and stop with a *CorruptError when they do not follow.
	Chain     *Chain
	err       error
	truncated bool
}

// NewIter returns an iterator over buf, which holds whole batches back to back.
func NewIter(buf []byte) Iter { return Iter{buf: buf} }

// Next returns the next batch. It returns false at the end of the buffer,
// at an incomplete trailing batch, or on corruption.
func (it *Iter) Next() (Batch, bool) {
	if it.err != nil || it.pos >= len(it.buf) {
		return nil, false
	}
	rest := it.buf[it.pos:]
	if len(rest) < offMagic+1 {
		it.truncated = true
		return nil, false
	}
	b := Batch(rest)
	magic := b.Magic()
	length := b.Length()
	if magic < 0 || magic > CurrentMagic {
		it.fail(b, fmt.Sprintf("unknown magic %d", magic))
		return nil, false
	}
	if length < MinLength(magic) {
		it.fail(b, fmt.Sprintf("batch length %d below the minimum %d for magic %d", length, MinLength(magic), magic))
		return nil, false
	}
	size := int64(length) + LogOverhead
	if size > int64(len(rest)) {
		it.truncated = true
		return nil, false
	}
	b = b[:size]
	if err := CheckHeader(b); err != nil {
		it.setErr(err)
		return nil, false
	}
	if it.Verify {
		if err := b.VerifyCRC(); err != nil {
			it.setErr(err)
			return nil, false
		}
	}
	if it.Chain != nil {
		if err := it.Chain.Check(b); err != nil {
			it.setErr(err)
			return nil, false
		}
	}
	it.pos += int(size)
	return b, true
}

// setErr stops the iteration with err, a *CorruptError placed at the
// batch being read.
func (it *Iter) setErr(err error) {
	err.(*CorruptError).Pos = int64(it.pos)
	it.err = err
}

func (it *Iter) fail(b Batch, reason string) {
	it.err = &CorruptError{Pos: int64(it.pos), Offset: b.BaseOffset(), Reason: reason}
}

// Err is the framing or checksum error that stopped iteration, if any.
func (it *Iter) Err() error { return it.err }

// Truncated reports that iteration stopped at an incomplete trailing batch.
func (it *Iter) Truncated() bool { return it.truncated }

// Pos is the buffer position of the next batch: after a clean stop, the
// number of bytes of whole, valid batches.
func (it *Iter) Pos() int { return it.pos }
