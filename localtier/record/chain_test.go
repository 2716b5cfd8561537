package record

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/localtier/codec"
)

// batchAt is a v2 batch of n records at base offset base.
func batchAt(t testing.TB, base int64, n int) Batch {
	t.Helper()
	var e Encoder
	buf, err := e.AppendBatch(nil, NewBatchSpec(base, codec.None), sampleRecords(base, n))
	if err != nil {
		t.Fatal(err)
	}
	return Batch(buf)
}

func TestChain(t *testing.T) {
	type step struct {
		base   int64
		n      int
		reason string // "" when the batch must be accepted
	}
	tests := []struct {
		name   string
		lo, hi int64
		anchor int64 // -1: the walk starts at the segment's start
		steps  []step
	}{
		{"contiguous", 100, 199, -1, []step{{100, 10, ""}, {110, 5, ""}, {115, 85, ""}}},
		{"gaps left by compaction", 100, 199, -1, []step{{103, 2, ""}, {150, 1, ""}, {199, 1, ""}}},
		{"below the segment's base", 100, 199, -1, []step{{99, 2, "below the segment's base offset 100"}}},
		{"past the segment's last offset", 100, 199, -1, []step{{100, 10, ""}, {195, 10, "last offset 204 past the segment's last offset 199"}}},
		{"overlapping the previous batch", 100, 199, -1, []step{{100, 10, ""}, {109, 10, "does not follow the previous batch's last offset 109"}}},
		{"going back", 100, 199, -1, []step{{100, 10, ""}, {110, 10, ""}, {102, 1, "does not follow the previous batch's last offset 119"}}},
		{"index entry in the first batch", 0, 999, 509, []step{{500, 10, ""}, {510, 1, ""}}},
		{"index entry before the first batch", 0, 999, 509, []step{{510, 10, "the index places offset 509 in this batch"}}},
		{"index entry after the first batch", 0, 999, 509, []step{{400, 10, "the index places offset 509 in this batch"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChain(tc.lo, tc.hi)
			if tc.anchor >= 0 {
				c.StartAt(tc.anchor)
			}
			for i, s := range tc.steps {
				b := batchAt(t, s.base, s.n)
				before := c
				err := c.Check(b)
				if s.reason == "" {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if c.Prev() != b.LastOffset() {
						t.Fatalf("step %d: prev %d, want %d", i, c.Prev(), b.LastOffset())
					}
					continue
				}
				if !IsCorrupt(err) || !strings.Contains(err.Error(), s.reason) {
					t.Fatalf("step %d: %v, want a CorruptError %q", i, err, s.reason)
				}
				if c != before {
					t.Fatalf("step %d: a refused batch changed the chain", i)
				}
				// Follows agrees on the refused ordering cases.
				if strings.Contains(s.reason, "does not follow") && c.Follows(b) == nil {
					t.Fatalf("step %d: Follows accepts a batch Check refused for its order", i)
				}
			}
		})
	}
}

func TestIterChainStopsAtFlippedBaseOffset(t *testing.T) {
	var buf []byte
	for i := range 5 {
		buf = append(buf, batchAt(t, int64(i*10), 10)...)
	}
	size := len(buf) / 5
	// Bit 1 of batch 3's base offset (30 -> 28): outside the CRC.
	buf[3*size+7] ^= 0x02
	it := NewIter(buf)
	it.Verify = true
	c := NewChain(0, 49)
	it.Chain = &c
	n := 0
	for {
		if _, ok := it.Next(); !ok {
			break
		}
		n++
	}
	ce, ok := it.Err().(*CorruptError)
	if n != 3 || !ok || ce.Pos != int64(3*size) || ce.Offset != 28 {
		t.Fatalf("accepted %d batches, stopped with %v; want 3 and a CorruptError at %d", n, it.Err(), 3*size)
	}
	// Without the chain the CRC alone accepts it.
	it = NewIter(buf)
	it.Verify = true
	for {
		if _, ok := it.Next(); !ok {
			break
		}
	}
	if it.Err() != nil || it.Pos() != len(buf) {
		t.Fatalf("CRC-only walk: %v at %d", it.Err(), it.Pos())
	}
}

func TestSuspect(t *testing.T) {
	b := batchAt(t, 110, 5)
	if Suspect(b, 109) {
		t.Fatal("a batch continuing its predecessor exactly is suspect")
	}
	if !Suspect(b, 100) {
		t.Fatal("a batch after a gap is not suspect")
	}
}

func TestCheckHeader(t *testing.T) {
	good := batchAt(t, 0, 5)
	set := func(off int, v uint32) Batch {
		b := append(Batch(nil), good...)
		binary.BigEndian.PutUint32(b[off:], v)
		b.UpdateCRC()
		return b
	}
	tests := []struct {
		name   string
		b      Batch
		reason string
	}{
		{"good", good, ""},
		{"fewer records than offsets (compacted)", set(offRecordCount, 2), ""},
		{"empty batch (compacted)", set(offRecordCount, 0), ""},
		{"more records than offsets", set(offRecordCount, 6), "record count 6 does not fit the last offset delta 4"},
		{"negative count", set(offRecordCount, 0x80000000), "does not fit"},
		{"negative delta", set(offLastOffsetDelta, 0xfffffffe), "negative last offset delta -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckHeader(tc.b)
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !IsCorrupt(err) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("%v, want %q", err, tc.reason)
			}
		})
	}
}

// FuzzChain walks arbitrary bytes with every check on and holds the
// accepted batches to what the checks promise, decoding their headers with
// kmsg (the independent decoder): offsets within the segment's range and
// increasing, record counts the offsets can hold, CRCs right.
func FuzzChain(f *testing.F) {
	var seed []byte
	for i := range 4 {
		seed = append(seed, batchAt(f, 100+int64(i*10), 10)...)
	}
	f.Add(seed, int64(100), int64(139), int64(-1))
	f.Add(seed, int64(100), int64(139), int64(125))
	f.Add(seed[:len(seed)-7], int64(0), int64(1<<62), int64(-1))
	f.Fuzz(func(t *testing.T, data []byte, lo, hi, anchor int64) {
		c := NewChain(lo, hi)
		if anchor >= 0 {
			c.StartAt(anchor)
		}
		it := NewIter(data)
		it.Verify, it.Chain = true, &c
		prev := lo - 1
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.IsLegacy() {
				if b.LastOffset() <= prev || b.LastOffset() < lo || b.LastOffset() > hi {
					t.Fatalf("legacy message at %d accepted after %d in [%d, %d]", b.LastOffset(), prev, lo, hi)
				}
				prev = b.LastOffset()
				continue
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatalf("accepted batch kmsg cannot read: %v", err)
			}
			last := rb.FirstOffset + int64(rb.LastOffsetDelta)
			if rb.FirstOffset <= prev || rb.FirstOffset < lo || last > hi || last < rb.FirstOffset {
				t.Fatalf("batch [%d, %d] accepted after %d in [%d, %d]", rb.FirstOffset, last, prev, lo, hi)
			}
			if rb.LastOffsetDelta < 0 || rb.NumRecords < 0 || int64(rb.NumRecords) > int64(rb.LastOffsetDelta)+1 {
				t.Fatalf("batch with %d records and last offset delta %d accepted", rb.NumRecords, rb.LastOffsetDelta)
			}
			prev = last
		}
		if err := it.Err(); err != nil && !IsCorrupt(err) {
			t.Fatalf("untyped error: %v", err)
		}
		if c.Prev() != prev {
			t.Fatalf("chain at %d, the batches accepted end at %d", c.Prev(), prev)
		}
	})
}

// FuzzCheckBatches feeds CheckBatches arbitrary bytes cut into parts at
// batch boundaries (as a remote read's parts are) and holds what it keeps
// to its promise: whole batches that a fresh walk with every check
// accepts, followed by the next batch's base offset when it is known.
func FuzzCheckBatches(f *testing.F) {
	var seed []byte
	for i := range 4 {
		seed = append(seed, batchAt(f, 100+int64(i*10), 10)...)
	}
	f.Add(seed, uint8(1), int64(100), int64(139), []byte{0, 0, 0, 0, 0, 0, 0, 140})
	bad := append([]byte(nil), seed...)
	bad[len(seed)/2+7] ^= 0x04
	f.Add(bad, uint8(2), int64(100), int64(139), []byte(nil))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8, lo, hi int64, after []byte) {
		// Cut after the cut-th whole batch, if there is one.
		var parts [][]byte
		it := NewIter(data)
		for range int(cut) % 4 {
			if _, ok := it.Next(); !ok {
				break
			}
		}
		if p := it.Pos(); p > 0 && p < len(data) {
			parts = [][]byte{data[:p], data[p:]}
		} else {
			parts = [][]byte{data}
		}
		c := NewChain(lo, hi)
		keep, err := CheckBatches(parts, &c, true, after)
		if err != nil && (!IsCorrupt(err) || keep != 0) {
			t.Fatalf("keep %d with error %v", keep, err)
		}
		if keep > len(data) {
			t.Fatalf("keep %d of %d bytes", keep, len(data))
		}
		fresh := NewChain(lo, hi)
		w := NewIter(data[:keep])
		w.Verify, w.Chain = true, &fresh
		var last Batch
		for {
			b, ok := w.Next()
			if !ok {
				break
			}
			last = b
		}
		if w.Err() != nil || w.Pos() != keep {
			t.Fatalf("kept %d bytes, a fresh walk accepts %d (%v)", keep, w.Pos(), w.Err())
		}
		if keep > 0 && keep+8 <= len(data) && int64(binary.BigEndian.Uint64(data[keep:])) <= last.LastOffset() && Suspect(last, lo-1) && keep == len(last) {
			t.Fatalf("kept a lone suspect batch ending at %d before a batch at %d", last.LastOffset(), int64(binary.BigEndian.Uint64(data[keep:])))
		}
	})
}
