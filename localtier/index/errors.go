package index

import (
	"errors"
	"fmt"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

var (
	// ErrIndexFull is returned by an append to an index that holds its maximum
	// number of entries (segment.index.bytes / entry size). The segment must roll.
	ErrIndexFull = errors.New("index is full")
	// ErrReadOnly is returned by a mutating call on an index opened read-only.
	ErrReadOnly = errors.New("index is read-only")
	// ErrOffsetOverflow is returned when offset - base offset does not fit
	// the int32 relative offset of an index entry (or is negative).
	ErrOffsetOverflow = errors.New("offset overflows the index's relative offset")
	// ErrClosed is returned by a mutating call on an index after Close or Delete.
	ErrClosed = errors.New("index is closed")
)

// CorruptIndexError reports an index whose content cannot be right. The index
// should be rebuilt from the log.
type CorruptIndexError struct {
	File   string // path of the index file; empty when decoding bytes
	Reason string
}

func (e *CorruptIndexError) Error() string {
	if e.File == "" {
		return "corrupt index: " + e.Reason
	}
	return fmt.Sprintf("corrupt index file %s: %s", e.File, e.Reason)
}

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptIndexError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

// InvalidAppendError reports an append that would break the index's
// ordering: Field ("offset", "timestamp" or "last offset") had Value, which is
// not larger than the Last one appended. Kafka throws InvalidOffsetException
// (or IllegalStateException for timestamps) here.
type InvalidAppendError struct {
	File  string
	Field string
	Value int64
	Last  int64
}

func (e *InvalidAppendError) Error() string {
	return fmt.Sprintf("index %s: attempt to append %s %d, no larger than the last %s appended (%d)",
		e.File, e.Field, e.Value, e.Field, e.Last)
}

func corruptf(file, format string, args ...any) *CorruptIndexError {
	return &CorruptIndexError{File: file, Reason: fmt.Sprintf(format, args...)}
}
