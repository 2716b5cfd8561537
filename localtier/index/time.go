package index

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/tiered/tiered/localtier/vfs"
)

// TimeEntrySize is the size of one .timeindex entry.
const TimeEntrySize = 12

// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: the timestamp of the
// answer from an empty time index.
const NoTimestamp int64 = -1

// TimestampOffset is one time index entry: the largest timestamp seen up to
// and including the batch whose last offset is Offset is Timestamp, so any
// record with a larger timestamp comes after Offset.
type TimestampOffset struct {
	Timestamp int64
	Offset    int64
}

// TimeIndex is a segment's .timeindex file.
type TimeIndex struct {
	t          table
	base       int64
	maxEntries int
}

// OpenTimeIndex opens the time index at path for appending, creating it if
// it does not exist, and loads its entries. maxBytes is segment.index.bytes;
// the index holds at most maxBytes/12 entries, the last slot reserved for
// MaybeAppendOnRoll.
func OpenTimeIndex(fsys vfs.FS, path string, baseOffset int64, maxBytes int) (*TimeIndex, error) {
	// Kafka accepts segment.index.bytes down to 4: a size below one entry
	// means an index that is always full, so every append rolls.
	if maxBytes < 0 {
		return nil, fmt.Errorf("open time index %s: invalid max index size %d", path, maxBytes)
	}
	x := &TimeIndex{t: table{fsys: fsys, path: path, entrySize: TimeEntrySize, lazy: true}, base: baseOffset, maxEntries: maxBytes / TimeEntrySize}
	if err := x.t.openWritable(true); err != nil {
		return nil, err
	}
	return x, nil
}

// ReadTimeIndex loads the time index at path read-only.
func ReadTimeIndex(fsys vfs.FS, path string, baseOffset int64) (*TimeIndex, error) {
	x := &TimeIndex{t: table{fsys: fsys, path: path, entrySize: TimeEntrySize}, base: baseOffset}
	if err := x.t.openReadOnly(); err != nil {
		return nil, err
	}
	x.maxEntries = x.t.n()
	return x, nil
}

// ParseTimeIndex makes a read-only time index from the bytes of a .timeindex
// file. name is used in errors.
func ParseTimeIndex(name string, data []byte, baseOffset int64) *TimeIndex {
	x := &TimeIndex{t: table{path: name, readOnly: true, entrySize: TimeEntrySize}, base: baseOffset}
	x.t.load(data)
	x.maxEntries = x.t.n()
	return x
}

func (x *TimeIndex) parse(i int) TimestampOffset {
	e := x.t.entry(i)
	return TimestampOffset{
		Timestamp: int64(binary.BigEndian.Uint64(e)),
		Offset:    x.base + int64(int32(binary.BigEndian.Uint32(e[8:]))),
	}
}

// Path is the index file's path.
func (x *TimeIndex) Path() string {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.path
}

// BaseOffset is the base offset of the segment.
func (x *TimeIndex) BaseOffset() int64 { return x.base }

// Entries is the number of entries.
func (x *TimeIndex) Entries() int {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.n()
}

// MaxEntries is the number of entries the index can hold.
func (x *TimeIndex) MaxEntries() int { return x.maxEntries }

// IsFull reports whether MaybeAppend would refuse: like Kafka, the last slot
// is kept for MaybeAppendOnRoll.
func (x *TimeIndex) IsFull() bool {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.n() >= x.maxEntries-1
}

// SizeInBytes is the number of bytes the entries take.
func (x *TimeIndex) SizeInBytes() int {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return len(x.t.buf)
}

// Entry returns the i'th entry. It panics if i is out of range.
func (x *TimeIndex) Entry(i int) TimestampOffset {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if i < 0 || i >= x.t.n() {
		panic(fmt.Sprintf("index: entry %d of time index %s, which has %d entries", i, x.t.path, x.t.n()))
	}
	return x.parse(i)
}

// All returns a copy of every entry.
func (x *TimeIndex) All() []TimestampOffset {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	out := make([]TimestampOffset, x.t.n())
	for i := range out {
		out[i] = x.parse(i)
	}
	return out
}

// LastEntry is the last entry, or {NoTimestamp, BaseOffset} when empty.
func (x *TimeIndex) LastEntry() TimestampOffset {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.lastEntry()
}

func (x *TimeIndex) lastEntry() TimestampOffset {
	if n := x.t.n(); n > 0 {
		return x.parse(n - 1)
	}
	return TimestampOffset{Timestamp: NoTimestamp, Offset: x.base}
}

// Lookup returns the entry with the largest timestamp <= target, or
// {NoTimestamp, BaseOffset} when there is none. The first record with a
// timestamp >= target is at or after the returned offset.
func (x *TimeIndex) Lookup(target int64) TimestampOffset {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	i := sort.Search(x.t.n(), func(i int) bool { return x.parse(i).Timestamp > target })
	if i == 0 {
		return TimestampOffset{Timestamp: NoTimestamp, Offset: x.base}
	}
	return x.parse(i - 1)
}

// MaybeAppend adds {timestamp, offset} if timestamp is larger than the last
// entry's, and does nothing if it is equal. An offset below the last entry's,
// or a timestamp below it, is an *InvalidAppendError; a full index (see
// IsFull) returns ErrIndexFull.
func (x *TimeIndex) MaybeAppend(timestamp, offset int64) error {
	return x.maybeAppend(timestamp, offset, false)
}

// MaybeAppendOnRoll is MaybeAppend for the final entry written when the
// segment is rolled or closed: it may use the slot IsFull keeps in reserve.
func (x *TimeIndex) MaybeAppendOnRoll(timestamp, offset int64) error {
	return x.maybeAppend(timestamp, offset, true)
}

func (x *TimeIndex) maybeAppend(timestamp, offset int64, onRoll bool) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	if err := x.t.writable(); err != nil {
		return err
	}
	n := x.t.n()
	if n >= x.maxEntries || (!onRoll && n >= x.maxEntries-1) {
		return fmt.Errorf("time index %s with %d entries: %w", x.t.path, n, ErrIndexFull)
	}
	last := x.lastEntry()
	if n > 0 && offset < last.Offset {
		return &InvalidAppendError{File: x.t.path, Field: "offset", Value: offset, Last: last.Offset}
	}
	if n > 0 && timestamp < last.Timestamp {
		return &InvalidAppendError{File: x.t.path, Field: "timestamp", Value: timestamp, Last: last.Timestamp}
	}
	if timestamp <= last.Timestamp {
		return nil
	}
	rel, err := relative(x.t.path, x.base, offset)
	if err != nil {
		return err
	}
	var e [TimeEntrySize]byte
	binary.BigEndian.PutUint64(e[:], uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], uint32(rel))
	return x.t.appendEntry(e[:])
}

// TruncateTo removes every entry whose offset is >= offset.
func (x *TimeIndex) TruncateTo(offset int64) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	keep := sort.Search(x.t.n(), func(i int) bool { return x.parse(i).Offset >= offset })
	return x.t.truncateEntries(keep)
}

// Reset removes every entry (before a rebuild).
func (x *TimeIndex) Reset() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.truncateEntries(0)
}

// Flush makes the appended entries durable.
func (x *TimeIndex) Flush() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.flush()
}

// Close trims the file to its entries and closes it. Lookups keep working on
// the entries in memory; changes return ErrClosed.
func (x *TimeIndex) Close() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.close()
}

// Rename moves the index file to newPath.
func (x *TimeIndex) Rename(newPath string) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.rename(newPath)
}

// Delete closes the index and removes its file; a missing file is not an error.
func (x *TimeIndex) Delete() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.remove()
}

// SanityCheck returns a *CorruptIndexError if the file's length is not a
// whole number of entries, or an entry is below the base offset, or offsets
// decrease, or timestamps are negative or do not strictly increase.
func (x *TimeIndex) SanityCheck() error {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if err := x.t.sizeCheck(); err != nil {
		return err
	}
	return checkTimeEntries(x.t.path, x.t.buf)
}

func checkTimeEntries(path string, b []byte) error {
	var prevTS int64
	var prevRel int32
	for i := 0; i < len(b)/TimeEntrySize; i++ {
		e := b[i*TimeEntrySize:]
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int32(binary.BigEndian.Uint32(e[8:]))
		switch {
		case rel < 0:
			return corruptf(path, "entry %d: relative offset %d is below the base offset", i, rel)
		case i > 0 && rel < prevRel:
			return corruptf(path, "entry %d: relative offset %d is below the previous %d", i, rel, prevRel)
		case ts < 0:
			return corruptf(path, "entry %d: timestamp %d is negative", i, ts)
		case i > 0 && ts <= prevTS:
			return corruptf(path, "entry %d: timestamp %d is not larger than the previous %d", i, ts, prevTS)
		}
		prevTS, prevRel = ts, rel
	}
	return nil
}

// DecodeTimeEntries decodes the bytes of a .timeindex file whose segment
// starts at base. A zero-filled tail is taken as unwritten space; any other
// problem SanityCheck would find is a *CorruptIndexError.
func DecodeTimeEntries(b []byte, base int64) ([]TimestampOffset, error) {
	x := ParseTimeIndex("", b, base)
	if err := x.SanityCheck(); err != nil {
		return nil, err
	}
	return x.All(), nil
}

// EncodeTimeEntries encodes entries as the bytes of a .timeindex file whose
// segment starts at base. Entries must be valid (see SanityCheck).
func EncodeTimeEntries(entries []TimestampOffset, base int64) ([]byte, error) {
	out := make([]byte, 0, len(entries)*TimeEntrySize)
	for i, e := range entries {
		rel, err := relative("", base, e.Offset)
		if err != nil {
			return nil, fmt.Errorf("encode time entry %d: %w", i, err)
		}
		out = binary.BigEndian.AppendUint64(out, uint64(e.Timestamp))
		out = binary.BigEndian.AppendUint32(out, uint32(rel))
	}
	if err := checkTimeEntries("", out); err != nil {
		return nil, fmt.Errorf("encode time entries: %w", err)
	}
	return out, nil
}
