package manifest

import (
	"errors"
	"fmt"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

var (
	// ErrOffsetOutOfRange is matched (errors.Is) by *OffsetOutOfRangeError.
	ErrOffsetOutOfRange = kafkaerr.ErrOffsetOutOfRange
	// ErrTimestampNotFound is returned when no committed segment has a
	// timestamp at or after the one asked for.
	ErrTimestampNotFound = errors.New("no segment has a timestamp at or after the one requested")
)

// CorruptManifestError reports a manifest (root or sub-manifest) whose bytes
// or content cannot be right. Key is the object key, empty for an in-memory
// value checked by Validate. A corrupt manifest must be reported, never
// overwritten blindly.
type CorruptManifestError struct {
	Key    string
	Reason string
}

func (e *CorruptManifestError) Error() string {
	if e.Key == "" {
		return "invalid manifest: " + e.Reason
	}
	return fmt.Sprintf("corrupt manifest %s: %s", e.Key, e.Reason)
}

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptManifestError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

// UnsupportedVersionError reports a manifest written in a format version this
// build does not know. It is refused rather than misread, and must not be
// overwritten: a newer tiered wrote it.
type UnsupportedVersionError struct {
	Key     string
	Version int64
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("manifest %s has format version %d; this build reads only version %d (upgrade tiered)",
		e.Key, e.Version, Version)
}

// KeyError reports an object key that is not one of this layout's keys, or
// not one for the partition it was expected to belong to.
type KeyError struct {
	Key    string
	Reason string
}

func (e *KeyError) Error() string { return fmt.Sprintf("object key %q: %s", e.Key, e.Reason) }

// OffsetOutOfRangeError reports an offset outside [Start, Next) of a
// manifest: below its log start offset, or at or past its first offset not
// yet committed.
type OffsetOutOfRangeError struct {
	Offset, Start, Next int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d out of range: committed offsets are [%d, %d)", e.Offset, e.Start, e.Next)
}

// Is makes errors.Is(err, ErrOffsetOutOfRange) true.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// ConflictError reports a commit that would give one offset to two segments,
// or cut a committed segment: a segment [Base, Last] that overlaps committed
// offsets outside an explicit replace, or a replace whose range boundary
// falls inside a committed segment.
type ConflictError struct {
	Base, Last int64
	Reason     string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("segment [%d, %d] conflicts with the manifest: %s", e.Base, e.Last, e.Reason)
}

func invalidf(format string, args ...any) *CorruptManifestError {
	return &CorruptManifestError{Reason: fmt.Sprintf(format, args...)}
}

func keyErrorf(key, format string, args ...any) *KeyError {
	return &KeyError{Key: key, Reason: fmt.Sprintf(format, args...)}
}
