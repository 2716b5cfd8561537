package index

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/tiered/tiered/localtier/vfs"
)

// OffsetEntrySize is the size of one .index entry.
const OffsetEntrySize = 8

// Entry is one offset index entry: the batch holding Offset starts at byte
// Position of the segment's log file.
type Entry struct {
	Offset   int64
	Position int32
}

// OffsetIndex is a segment's .index file.
type OffsetIndex struct {
	t          table
	base       int64
	maxEntries int
}

// OpenOffsetIndex opens the offset index at path for appending, creating it
// if it does not exist, and loads its entries. maxBytes is
// segment.index.bytes; the index holds at most maxBytes/8 entries.
func OpenOffsetIndex(fsys vfs.FS, path string, baseOffset int64, maxBytes int) (*OffsetIndex, error) {
	// Kafka accepts segment.index.bytes down to 4: a size below one entry
	// means an index that is always full, so every append rolls.
	if maxBytes < 0 {
		return nil, fmt.Errorf("open offset index %s: invalid max index size %d", path, maxBytes)
	}
	x := &OffsetIndex{t: table{fsys: fsys, path: path, entrySize: OffsetEntrySize, lazy: true}, base: baseOffset, maxEntries: maxBytes / OffsetEntrySize}
	if err := x.t.openWritable(true); err != nil {
		return nil, err
	}
	return x, nil
}

// ReadOffsetIndex loads the offset index at path read-only: the file is read
// once and never written (use it on a broker's log directory).
func ReadOffsetIndex(fsys vfs.FS, path string, baseOffset int64) (*OffsetIndex, error) {
	x := &OffsetIndex{t: table{fsys: fsys, path: path, entrySize: OffsetEntrySize}, base: baseOffset}
	if err := x.t.openReadOnly(); err != nil {
		return nil, err
	}
	x.maxEntries = x.t.n()
	return x, nil
}

// ParseOffsetIndex makes a read-only offset index from the bytes of an index
// file (for example one fetched from the object store). name is used in errors.
func ParseOffsetIndex(name string, data []byte, baseOffset int64) *OffsetIndex {
	x := &OffsetIndex{t: table{path: name, readOnly: true, entrySize: OffsetEntrySize}, base: baseOffset}
	x.t.load(data)
	x.maxEntries = x.t.n()
	return x
}

func (x *OffsetIndex) parse(i int) Entry {
	e := x.t.entry(i)
	return Entry{
		Offset:   x.base + int64(int32(binary.BigEndian.Uint32(e))),
		Position: int32(binary.BigEndian.Uint32(e[4:])),
	}
}

// Path is the index file's path.
func (x *OffsetIndex) Path() string {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.path
}

// BaseOffset is the base offset of the segment.
func (x *OffsetIndex) BaseOffset() int64 { return x.base }

// Entries is the number of entries.
func (x *OffsetIndex) Entries() int {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.n()
}

// MaxEntries is the number of entries the index can hold.
func (x *OffsetIndex) MaxEntries() int { return x.maxEntries }

// IsFull reports whether no more entries fit.
func (x *OffsetIndex) IsFull() bool {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.n() >= x.maxEntries
}

// SizeInBytes is the number of bytes the entries take.
func (x *OffsetIndex) SizeInBytes() int {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return len(x.t.buf)
}

// Entry returns the i'th entry. It panics if i is out of range.
func (x *OffsetIndex) Entry(i int) Entry {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if i < 0 || i >= x.t.n() {
		panic(fmt.Sprintf("index: entry %d of offset index %s, which has %d entries", i, x.t.path, x.t.n()))
	}
	return x.parse(i)
}

// All returns a copy of every entry.
func (x *OffsetIndex) All() []Entry {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	out := make([]Entry, x.t.n())
	for i := range out {
		out[i] = x.parse(i)
	}
	return out
}

// LastOffset is the offset of the last entry, or the base offset when empty.
func (x *OffsetIndex) LastOffset() int64 {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.lastOffset()
}

func (x *OffsetIndex) lastOffset() int64 {
	if n := x.t.n(); n > 0 {
		return x.parse(n - 1).Offset
	}
	return x.base
}

// Lookup returns the entry with the largest offset <= target, or
// {BaseOffset, 0} when there is none.
func (x *OffsetIndex) Lookup(target int64) Entry {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	// first slot whose offset is > target
	i := sort.Search(x.t.n(), func(i int) bool { return x.parse(i).Offset > target })
	if i == 0 {
		return Entry{Offset: x.base}
	}
	return x.parse(i - 1)
}

// Append adds an entry. offset must be larger than the last entry's offset
// (*InvalidAppendError otherwise) and within the int32 range above the base
// offset (ErrOffsetOverflow); a full index returns ErrIndexFull.
func (x *OffsetIndex) Append(offset int64, position int32) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	if err := x.t.writable(); err != nil {
		return err
	}
	n := x.t.n()
	if n >= x.maxEntries {
		return fmt.Errorf("offset index %s with %d entries: %w", x.t.path, n, ErrIndexFull)
	}
	if n > 0 && offset <= x.lastOffset() {
		return &InvalidAppendError{File: x.t.path, Field: "offset", Value: offset, Last: x.lastOffset()}
	}
	rel, err := relative(x.t.path, x.base, offset)
	if err != nil {
		return err
	}
	var e [OffsetEntrySize]byte
	binary.BigEndian.PutUint32(e[:], uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(position))
	return x.t.appendEntry(e[:])
}

// TruncateTo removes every entry whose offset is >= offset.
func (x *OffsetIndex) TruncateTo(offset int64) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	keep := sort.Search(x.t.n(), func(i int) bool { return x.parse(i).Offset >= offset })
	return x.t.truncateEntries(keep)
}

// Reset removes every entry (before a rebuild).
func (x *OffsetIndex) Reset() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.truncateEntries(0)
}

// Flush makes the appended entries durable.
func (x *OffsetIndex) Flush() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.flush()
}

// Close trims the file to its entries and closes it. Lookups keep working on
// the entries in memory; changes return ErrClosed.
func (x *OffsetIndex) Close() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.close()
}

// Rename moves the index file to newPath (for .deleted, .cleaned, .swap).
func (x *OffsetIndex) Rename(newPath string) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.rename(newPath)
}

// Delete closes the index and removes its file; a missing file is not an error.
func (x *OffsetIndex) Delete() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.remove()
}

// SanityCheck returns a *CorruptIndexError if the file's length is not a
// whole number of entries, or an entry is below the base offset, or offsets
// do not strictly increase, or positions are negative or decrease.
func (x *OffsetIndex) SanityCheck() error {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if err := x.t.sizeCheck(); err != nil {
		return err
	}
	return checkOffsetEntries(x.t.path, x.t.buf)
}

func checkOffsetEntries(path string, b []byte) error {
	var prevRel, prevPos int32
	for i := 0; i < len(b)/OffsetEntrySize; i++ {
		e := b[i*OffsetEntrySize:]
		rel := int32(binary.BigEndian.Uint32(e))
		pos := int32(binary.BigEndian.Uint32(e[4:]))
		switch {
		case rel < 0:
			return corruptf(path, "entry %d: relative offset %d is below the base offset", i, rel)
		case i > 0 && rel <= prevRel:
			return corruptf(path, "entry %d: relative offset %d is not larger than the previous %d", i, rel, prevRel)
		case pos < 0:
			return corruptf(path, "entry %d: position %d is negative", i, pos)
		case i > 0 && pos < prevPos:
			return corruptf(path, "entry %d: position %d is below the previous %d", i, pos, prevPos)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// DecodeOffsetEntries decodes the bytes of a .index file whose segment starts
// at base. A zero-filled tail is taken as unwritten space; any other problem
// SanityCheck would find is a *CorruptIndexError.
func DecodeOffsetEntries(b []byte, base int64) ([]Entry, error) {
	x := ParseOffsetIndex("", b, base)
	if err := x.SanityCheck(); err != nil {
		return nil, err
	}
	return x.All(), nil
}

// EncodeOffsetEntries encodes entries as the bytes of a .index file whose
// segment starts at base. Entries must be valid (see SanityCheck).
func EncodeOffsetEntries(entries []Entry, base int64) ([]byte, error) {
	out := make([]byte, 0, len(entries)*OffsetEntrySize)
	for i, e := range entries {
		rel, err := relative("", base, e.Offset)
		if err != nil {
			return nil, fmt.Errorf("encode offset entry %d: %w", i, err)
		}
		out = binary.BigEndian.AppendUint32(out, uint32(rel))
		out = binary.BigEndian.AppendUint32(out, uint32(e.Position))
	}
	if err := checkOffsetEntries("", out); err != nil {
		return nil, fmt.Errorf("encode offset entries: %w", err)
	}
	return out, nil
}
