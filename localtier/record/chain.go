package record

import (
	"encoding/binary"
	"fmt"
)

// Chain checks the offsets of the batches of one segment as a reader
// visits them in log order, the part of a batch its CRC does not cover
// (the base offset field sits before the checksummed bytes, so a flipped
// bit there would pass VerifyCRC and serve records under wrong offsets):
//
//   - every offset a batch holds lies in the segment's range [lo, hi]: at or
//     above its base offset, below the next segment's base offset (or the
//     log's end offset, or the manifest's last offset);
//   - each batch starts after the last offset of the batch before it (gaps
//     are allowed: compaction leaves them);
//   - a read that starts at an index entry's position (not the segment's
//     start) finds there the batch holding the entry's offset.
//
// Framing, lastOffsetDelta and record count are checked by Iter (and
// CheckHeader), the CRC by VerifyCRC; Chain is the offsets. The zero value
// is not usable: make one with NewChain. A Chain is a small value; copy it
// to try a batch and keep the state before it.
type Chain struct {
	lo, hi int64
	prev   int64 // last offset of the batch before; lo-1 before the first
	anchor int64 // an offset the next batch must hold, -1 when none
	n      int   // batches checked
}

// NewChain returns a chain for a segment whose batches hold offsets within
// [lo, hi].
func NewChain(lo, hi int64) Chain { return Chain{lo: lo, hi: hi, prev: lo - 1, anchor: -1} }

// StartAt says the walk begins at the position an index entry for offset
// gives (not the segment's start): the first batch checked must hold it.
// Kafka indexes a batch by its last offset (older brokers by its first), so
// the batch at an entry's position holds the entry's offset either way.
func (c *Chain) StartAt(offset int64) {
	if c.n == 0 {
		c.anchor = offset
	}
}

// Checked is the number of batches Check accepted.
func (c *Chain) Checked() int { return c.n }

// Prev is the last offset of the last batch Check accepted (lo-1 before
// the first).
func (c *Chain) Prev() int64 { return c.prev }

// firstOffset is the lowest offset the header of b says it holds: the base
// offset of a v2 batch; for a legacy message only its offset field is known
// without decompressing (the last inner offset of a compressed wrapper).
func firstOffset(b Batch) int64 {
	if b.IsLegacy() {
		return b.LastOffset()
	}
	return b.BaseOffset()
}

// Check checks the offsets of b, a batch header or a whole batch (only the
// header fields are read), and on success makes it the batch before the
// next. A failure is a *CorruptError with Pos 0 (callers add the position,
// see WithFile).
func (c *Chain) Check(b Batch) error {
	first, last := firstOffset(b), b.LastOffset()
	fail := func(format string, args ...any) error {
		return &CorruptError{Offset: b.BaseOffset(), Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case last < first:
		return fail("last offset %d below the base offset (offset overflow)", last)
	case first < c.lo:
		return fail("base offset below the segment's base offset %d", c.lo)
	case last > c.hi:
		return fail("last offset %d past the segment's last offset %d", last, c.hi)
	case c.anchor >= 0 && (last < c.anchor || (!b.IsLegacy() && first > c.anchor)):
		return fail("the index places offset %d in this batch, which holds offsets %d to %d", c.anchor, first, last)
	case first <= c.prev:
		return fail("base offset does not follow the previous batch's last offset %d", c.prev)
	}
	c.prev, c.anchor = last, -1
	c.n++
	return nil
}

// Follows checks that a batch whose base offset field is base may come
// after the batches checked so far: the check of the next batch's header
// when the read stops before it. buf holds at least that batch's first 8
// bytes.
func (c *Chain) Follows(buf []byte) error {
	base := int64(binary.BigEndian.Uint64(buf))
	if base <= c.prev {
		return &CorruptError{Offset: base, Reason: fmt.Sprintf(
			"base offset does not follow the previous batch's last offset %d", c.prev)}
	}
	return nil
}

// CheckHeader checks the header fields of a v2 batch that its framing and
// CRC do not establish: a lastOffsetDelta that is not negative and a
// record count that the offsets can hold (at most lastOffsetDelta+1;
// compaction may remove records and leave an empty batch, so fewer is
// legal, Kafka's equality being the producer's rule). Legacy messages pass.
// b needs only the header.
func CheckHeader(b Batch) error {
	if b.IsLegacy() || len(b) < HeaderSize {
		return nil
	}
	delta, count := b.LastOffsetDelta(), b.RecordCount()
	switch {
	case delta < 0:
		return &CorruptError{Offset: b.BaseOffset(), Reason: fmt.Sprintf("negative last offset delta %d", delta)}
	case count < 0 || int64(count) > int64(delta)+1:
		return &CorruptError{Offset: b.BaseOffset(), Reason: fmt.Sprintf(
			"record count %d does not fit the last offset delta %d", count, delta)}
	}
	return nil
}

// Suspect reports whether b, a batch the chain accepted after a batch
// ending at offset prev, may be the wrong one when the batch after it does
// not follow it: b is trusted only when it continues prev exactly (a bit
// flipped into that one value would have to turn a gap of a power of two
// into none). A reader then serves the batches before b and not b.
func Suspect(b Batch, prev int64) bool { return firstOffset(b) != prev+1 }

// Settle is the last step of a read's check, once its batches passed
// the chain: the batch after them (next holds at least its first 8 bytes;
// shorter when unknown or at the segment's end, then nothing is checked)
// must follow the last one, last (accepted after a batch ending at offset
// lastPrev). When it does not, either may be the wrong one: last stays
// when it continues the batch before it exactly (Suspect), else drop is
// set and the read ends before last too, or, when last was its only batch,
// fails with err (Pos 0: at next).
func (c *Chain) Settle(last Batch, lastPrev int64, next []byte) (drop bool, err error) {
	if len(next) < 8 {
		return false, nil
	}
	if err := c.Follows(next); err != nil && Suspect(last, lastPrev) {
		return true, err
	}
	return false, nil
}

// CheckBatches is the check a read runs on the batches it is about to
// serve: it walks the whole batches of parts in order (each batch lying
// within one part; parts may end with a partial batch) with chain, and with
// verify their CRCs too, and returns how many bytes of them may be served.
// Local reads run it over what they read; remote reads run the same steps
// inside their one walk of the window (Iter with Chain, then Settle).
//
// The first batch that fails ends them, and is err when it is the first
// (keep 0; its Pos is relative to the start of parts). The batch after the
// last one kept — the one that failed, the partial batch parts end with,
// else after (the bytes that follow parts) — then goes through Settle.
func CheckBatches(parts [][]byte, chain *Chain, verify bool, after []byte) (keep int, err error) {
	var (
		lastStart, lastPrev = 0, chain.Prev() // the last batch kept, the offset before it
		lastHdr             Batch
		base                int // position of the current part
		next                []byte
		failed              error
	)
walk:
	for _, p := range parts {
		it := NewIter(p)
		it.Verify, it.Chain = verify, chain
		for {
			at, prev := it.Pos(), chain.Prev()
			b, ok := it.Next()
			if !ok {
				break
			}
			lastStart, lastPrev, lastHdr = base+at, prev, b
		}
		keep = base + it.Pos()
		if err := it.Err(); err != nil {
			failed, next = err, p[it.Pos():]
			if ce, ok := err.(*CorruptError); ok {
				ce.Pos += int64(base)
			}
			break walk
		}
		if it.Truncated() {
			next = p[it.Pos():]
			break walk
		}
		base += len(p)
	}
	if keep == 0 {
		return 0, failed
	}
	if next == nil {
		next = after
	}
	drop, ferr := chain.Settle(lastHdr, lastPrev, next)
	switch {
	case !drop:
		return keep, nil
	case lastStart > 0:
		return lastStart, nil
	case failed != nil:
		return 0, failed
	}
	ferr.(*CorruptError).Pos = int64(keep)
	return 0, ferr
}
