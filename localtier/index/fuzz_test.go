package index

import (
	"bytes"
	"errors"
	"testing"
)

// trimZeroTail is what loading does to a file: whole entries, minus
// all-zero trailing ones.
func trimZeroTail(b []byte, size int) []byte {
	n := len(b) / size
	for n > 0 && allZero(b[(n-1)*size:n*size]) {
		n--
	}
	return b[:n*size]
}

func fuzzCorrupt(t *testing.T, err error) {
	var ce *CorruptIndexError
	if !errors.As(err, &ce) {
		t.Fatalf("decode error %v is not a *CorruptIndexError", err)
	}
}

func FuzzDecodeOffsetEntries(f *testing.F) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0, 0, 0, 0x39, 0, 0, 0x10, 0x3a, 0, 0, 0, 0x72, 0, 0, 0x20, 0x42}, int64(0))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, int64(1<<40))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 3}, int64(-5))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		entries, err := DecodeOffsetEntries(b, base)
		if err != nil {
			fuzzCorrupt(t, err)
			return
		}
		x := ParseOffsetIndex("fuzz", b, base)
		for _, e := range entries {
			if got := x.Lookup(e.Offset); got != e {
				t.Fatalf("Lookup(%d) = %v, want %v", e.Offset, got, e)
			}
		}
		enc, err := EncodeOffsetEntries(entries, base)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, trimZeroTail(b, OffsetEntrySize)) {
			t.Fatalf("round trip changed bytes")
		}
	})
}

func FuzzDecodeTimeEntries(f *testing.F) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0, 0, 1, 0x91, 0xe0, 0x5b, 0x6d, 0x8b, 0, 0, 0, 0}, int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, int64(7))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		entries, err := DecodeTimeEntries(b, base)
		if err != nil {
			fuzzCorrupt(t, err)
			return
		}
		x := ParseTimeIndex("fuzz", b, base)
		for _, e := range entries {
			if got := x.Lookup(e.Timestamp); got != e {
				t.Fatalf("Lookup(%d) = %v, want %v", e.Timestamp, got, e)
			}
		}
		enc, err := EncodeTimeEntries(entries, base)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, trimZeroTail(b, TimeEntrySize)) {
			t.Fatalf("round trip changed bytes")
		}
	})
}

func FuzzDecodeAbortedTxns(f *testing.F) {
	good := appendTxn(nil, AbortedTxn{1, 100, 110, 100})
	f.Add([]byte{}, int64(0))
	f.Add(good, int64(100))
	f.Add(append(good, 0, 1, 2), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, start int64) {
		txns, err := DecodeAbortedTxns(b, start)
		if err != nil {
			fuzzCorrupt(t, err)
			return
		}
		x := ParseTxnIndex("fuzz", b, start)
		got, _ := x.CollectAbortedTxns(-1<<63, 1<<63-1)
		if len(got) != len(txns) {
			t.Fatalf("collect found %d of %d", len(got), len(txns))
		}
		enc, err := EncodeAbortedTxns(txns, start)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, trimZeroTail(b, TxnEntrySize)) {
			t.Fatalf("round trip changed bytes")
		}
	})
}
