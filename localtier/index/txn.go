package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/tiered/tiered/localtier/vfs"
)

// TxnEntrySize is the size of one .txnindex entry.
const TxnEntrySize = 34

// txnVersion is the only aborted-transaction entry version Kafka writes.
const txnVersion = 0

// AbortedTxn is one transaction index entry: producer ProducerID aborted a
// transaction whose data spans [FirstOffset, LastOffset] (LastOffset is the
// abort marker's offset); LastStableOffset was the partition's LSO when the
// marker was written.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// TxnIndex is a segment's .txnindex file. Like Kafka's, the file is only
// created when the first entry is appended.
type TxnIndex struct {
	t     table
	start int64
}

// OpenTxnIndex opens the transaction index at path for appending, loading it
// if it exists. startOffset is the segment's base offset.
func OpenTxnIndex(fsys vfs.FS, path string, startOffset int64) (*TxnIndex, error) {
	x := &TxnIndex{t: table{fsys: fsys, path: path, entrySize: TxnEntrySize}, start: startOffset}
	if _, err := fsys.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return x, nil
	} else if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	if err := x.t.openWritable(false); err != nil {
		return nil, err
	}
	return x, nil
}

// ReadTxnIndex loads the transaction index at path read-only. A missing file
// is an empty index, as for Kafka.
func ReadTxnIndex(fsys vfs.FS, path string, startOffset int64) (*TxnIndex, error) {
	x := &TxnIndex{t: table{fsys: fsys, path: path, entrySize: TxnEntrySize}, start: startOffset}
	err := x.t.openReadOnly()
	if errors.Is(err, fs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// ParseTxnIndex makes a read-only transaction index from the bytes of a
// .txnindex file. name is used in errors.
func ParseTxnIndex(name string, data []byte, startOffset int64) *TxnIndex {
	x := &TxnIndex{t: table{path: name, readOnly: true, entrySize: TxnEntrySize}, start: startOffset}
	x.t.load(data)
	return x
}

func parseTxn(e []byte) AbortedTxn {
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
	}
}

func appendTxn(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// Path is the index file's path.
func (x *TxnIndex) Path() string {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.path
}

// StartOffset is the base offset of the segment.
func (x *TxnIndex) StartOffset() int64 { return x.start }

// Entries is the number of aborted transactions.
func (x *TxnIndex) Entries() int {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	return x.t.n()
}

// All returns every aborted transaction, in file order.
func (x *TxnIndex) All() []AbortedTxn {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	out := make([]AbortedTxn, x.t.n())
	for i := range out {
		out[i] = parseTxn(x.t.entry(i))
	}
	return out
}

// Last returns the last aborted transaction; ok is false when there is none.
func (x *TxnIndex) Last() (a AbortedTxn, ok bool) {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if n := x.t.n(); n > 0 {
		return parseTxn(x.t.entry(n - 1)), true
	}
	return AbortedTxn{}, false
}

// Append adds an aborted transaction. Its LastOffset must be larger than the
// last one appended (*InvalidAppendError otherwise).
func (x *TxnIndex) Append(a AbortedTxn) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	if err := x.t.writable(); err != nil {
		return err
	}
	if n := x.t.n(); n > 0 {
		if last := parseTxn(x.t.entry(n - 1)).LastOffset; a.LastOffset <= last {
			return &InvalidAppendError{File: x.t.path, Field: "last offset", Value: a.LastOffset, Last: last}
		}
	}
	var e [TxnEntrySize]byte
	return x.t.appendEntry(appendTxn(e[:0], a))
}

// CollectAbortedTxns returns the aborted transactions that overlap the fetch
// range [fetchOffset, upperBound): LastOffset >= fetchOffset and FirstOffset
// < upperBound. complete reports that an entry's LastStableOffset reached
// upperBound, so later segments need not be searched (Kafka's
// TxnIndexSearchResult.isComplete).
func (x *TxnIndex) CollectAbortedTxns(fetchOffset, upperBound int64) (txns []AbortedTxn, complete bool) {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	for i := 0; i < x.t.n(); i++ {
		a := parseTxn(x.t.entry(i))
		if a.LastOffset >= fetchOffset && a.FirstOffset < upperBound {
			txns = append(txns, a)
		}
		if a.LastStableOffset >= upperBound {
			return txns, true
		}
	}
	return txns, false
}

// TruncateTo removes every entry whose LastOffset is >= offset.
func (x *TxnIndex) TruncateTo(offset int64) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	keep := 0
	for keep < x.t.n() && parseTxn(x.t.entry(keep)).LastOffset < offset {
		keep++
	}
	return x.t.truncateEntries(keep)
}

// Reset removes every entry (before a rebuild).
func (x *TxnIndex) Reset() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.truncateEntries(0)
}

// Flush makes the appended entries durable.
func (x *TxnIndex) Flush() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.flush()
}

// Close trims the file to its entries and closes it.
func (x *TxnIndex) Close() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.close()
}

// Rename moves the index file to newPath; if the file was never created only
// the path changes.
func (x *TxnIndex) Rename(newPath string) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.rename(newPath)
}

// Delete closes the index and removes its file; a missing file is not an error.
func (x *TxnIndex) Delete() error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.remove()
}

// SanityCheck returns a *CorruptIndexError if the file's length is not a
// whole number of entries, or an entry has an unknown version, a LastOffset
// below the start offset or below its FirstOffset, or last offsets do not
// strictly increase.
func (x *TxnIndex) SanityCheck() error {
	x.t.mu.RLock()
	defer x.t.mu.RUnlock()
	if err := x.t.sizeCheck(); err != nil {
		return err
	}
	return checkTxnEntries(x.t.path, x.t.buf, x.start)
}

func checkTxnEntries(path string, b []byte, start int64) error {
	var prevLast int64
	for i := 0; i < len(b)/TxnEntrySize; i++ {
		e := b[i*TxnEntrySize:]
		a := parseTxn(e)
		switch v := int16(binary.BigEndian.Uint16(e)); {
		case v != txnVersion:
			return corruptf(path, "entry %d: unexpected aborted transaction version %d, current version is %d", i, v, txnVersion)
		case a.LastOffset < start:
			return corruptf(path, "entry %d: last offset %d of aborted transaction is less than start offset %d", i, a.LastOffset, start)
		case a.FirstOffset > a.LastOffset:
			return corruptf(path, "entry %d: first offset %d is after last offset %d", i, a.FirstOffset, a.LastOffset)
		case i > 0 && a.LastOffset <= prevLast:
			return corruptf(path, "entry %d: last offset %d is not larger than the previous %d", i, a.LastOffset, prevLast)
		}
		prevLast = a.LastOffset
	}
	return nil
}

// DecodeAbortedTxns decodes the bytes of a .txnindex file whose segment
// starts at startOffset. Any problem SanityCheck would find is a
// *CorruptIndexError.
func DecodeAbortedTxns(b []byte, startOffset int64) ([]AbortedTxn, error) {
	x := ParseTxnIndex("", b, startOffset)
	if err := x.SanityCheck(); err != nil {
		return nil, err
	}
	return x.All(), nil
}

// EncodeAbortedTxns encodes txns as the bytes of a .txnindex file whose
// segment starts at startOffset. The entries must be valid (see SanityCheck).
func EncodeAbortedTxns(txns []AbortedTxn, startOffset int64) ([]byte, error) {
	out := make([]byte, 0, len(txns)*TxnEntrySize)
	for _, a := range txns {
		out = appendTxn(out, a)
	}
	if err := checkTxnEntries("", out, startOffset); err != nil {
		return nil, fmt.Errorf("encode aborted transactions: %w", err)
	}
	return out, nil
}
