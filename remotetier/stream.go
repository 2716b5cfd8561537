package remotetier

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
)

// logStream sits between a segment's .log and the object store. It checks
// every batch as the bytes pass (framing, offsets going forward, CRC), with
// memory independent of the segment and batch sizes: it never buffers a
// batch, only its header. It collects what the manifest records (offsets,
// record count, timestamps, leader epochs), builds the offset and time
// indexes when the source has none, and can cut the segment: drop the
// batches below an offset, so the object starts exactly there.
type logStream struct {
	src  io.Reader
	name string // for errors

	segBase int64 // base offset of the source segment
	cut     int64 // first offset to emit; batches below it are dropped (segBase: emit all)
	// cleaned allows the first batch emitted to start past cut, as long as
	// no batch spans it: a compacted partition's cleaner removes whole
	// batches (it keeps a batch's offsets when it keeps any of its records),
	// so the batch a cut would start at may be gone.
	cleaned bool
	// interval is index.interval.bytes for built indexes; < 0 builds none.
	interval int64

	// parser state
	hdr      [record.HeaderSize]byte
	hdrLen   int   // bytes of hdr filled
	hdrNeed  int   // bytes of header wanted for the current batch
	size     int64 // whole size of the current batch (0 until known)
	left     int64 // body bytes of the current batch still to come
	crc      uint32
	legacy   bool
	emitting bool  // the current and every later batch is emitted
	inPos    int64 // position in the source of the next byte
	batchPos int64 // source position of the current batch
	outPos   int64 // bytes emitted so far
	outStart int64 // output position of the current batch

	stats streamStats

	// built indexes
	sinceIndex   int64
	maxTSSoFar   int64
	offsetOfMax  int64
	offEntries   []index.Entry
	timeEntries  []index.TimestampOffset
	lastIndexedT int64

	prefix []byte // header bytes of the first emitted batch read before emission began
	pend   []byte // emitted bytes not yet returned
	err    error
}

// streamStats describes the emitted batches.
type streamStats struct {
	Batches      int
	FirstOffset  int64 // base offset of the first batch, -1 if none
	LastOffset   int64 // last offset of the last batch
	Records      int64 // manifest.UnknownCount if a legacy message was seen
	MinTimestamp int64
	MaxTimestamp int64
	Epochs       []manifest.EpochEntry // from the batches' partition leader epochs
	Bytes        int64
	// Txns is what the batches did to each producer's transaction
	// (applyTxns composes it onto the transactions open before them).
	Txns map[int64]txnEffect
}

// txnEffect is what a run of batches did to one producer's transaction:
// Closed, a commit or abort marker ended the one open before (if any);
// Open, the first offset of a transaction still open after the run (its
// first transactional batch after the last marker), -1 when none.
type txnEffect struct {
	Closed bool
	Open   int64
}

// trackTxn records the effect of batch h on its producer's transaction.
func (st *streamStats) trackTxn(h record.Batch) {
	if !h.IsTransactional() {
		return
	}
	pid := h.ProducerID()
	if st.Txns == nil {
		st.Txns = map[int64]txnEffect{}
	}
	e, ok := st.Txns[pid]
	if !ok {
		e.Open = -1
	}
	switch {
	case h.IsControl():
		e.Closed, e.Open = true, -1
	case e.Open < 0:
		e.Open = h.BaseOffset()
	}
	st.Txns[pid] = e
}

// applyTxns is the transactions open after a run of batches with effects
// fx, those in open being open before it: a marker closes a producer's
// transaction, and a transactional batch after it (or with none open)
// opens one. In first offset order.
func applyTxns(open []manifest.OpenTxn, fx map[int64]txnEffect) []manifest.OpenTxn {
	if len(fx) == 0 {
		return open
	}
	first := make(map[int64]int64, len(open)+len(fx))
	for _, t := range open {
		first[t.ProducerID] = t.FirstOffset
	}
	for pid, e := range fx {
		if e.Closed {
			delete(first, pid)
		}
		if _, ok := first[pid]; !ok && e.Open >= 0 {
			first[pid] = e.Open
		}
	}
	out := make([]manifest.OpenTxn, 0, len(first))
	for pid, off := range first {
		out = append(out, manifest.OpenTxn{ProducerID: pid, FirstOffset: off})
	}
	slices.SortFunc(out, func(a, b manifest.OpenTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.ProducerID, b.ProducerID))
	})
	return out
}

// newLogStream reads src, a whole segment with base offset segBase. cut is
// the first offset the output keeps (segBase for the whole segment); a cut
// that falls inside a batch is a *CutError. interval >= 0 builds indexes.
func newLogStream(src io.Reader, name string, segBase, cut, interval int64) *logStream {
	return &logStream{src: src, name: name, segBase: segBase, cut: max(cut, segBase), interval: interval,
		hdrNeed: record.LogOverhead + 5, emitting: cut <= segBase,
		stats:      streamStats{FirstOffset: -1, LastOffset: segBase - 1, MinTimestamp: manifest.NoTimestamp, MaxTimestamp: manifest.NoTimestamp},
		maxTSSoFar: manifest.NoTimestamp, lastIndexedT: manifest.NoTimestamp}
}

// CutError reports that a segment cannot be cut at an offset because no
// batch starts there (a leader's batch spans it), or it holds no batch at or
// after it.
type CutError struct {
	Segment string
	Offset  int64
	Reason  string
}

func (e *CutError) Error() string {
	return fmt.Sprintf("cut %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Read implements io.Reader: the emitted bytes, then io.EOF once the source
// ended on a batch boundary.
func (s *logStream) Read(p []byte) (int, error) {
	for {
		if len(s.pend) > 0 {
			n := copy(p, s.pend)
			s.pend = s.pend[n:]
			return n, nil
		}
		if s.err != nil {
			return 0, s.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		n, rerr := s.src.Read(p)
		out := 0
		if n > 0 {
			from, err := s.feed(p[:n])
			if err != nil {
				s.err = err
				return 0, err
			}
			if from >= 0 {
				if len(s.prefix) > 0 {
					s.pend = append(s.prefix, p[from:n]...)
					s.prefix = nil
				} else {
					out = copy(p, p[from:n])
				}
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				s.err = s.finish()
			} else {
				s.err = rerr
			}
		}
		if out > 0 {
			return out, nil
		}
	}
}

// feed parses chunk. It returns the index in chunk from which bytes are
// emitted (all later bytes are emitted too), or -1 when none is. When the
// first emitted batch's header began in an earlier chunk, its first bytes
// are left in s.prefix.
func (s *logStream) feed(chunk []byte) (int, error) {
	emitFrom := -1
	if s.emitting {
		emitFrom = 0
	}
	i := 0
	for i < len(chunk) {
		if s.left == 0 && s.size == 0 {
			// In a header.
			if s.hdrLen == 0 {
				s.batchPos = s.inPos + int64(i)
			}
			start := i - s.hdrLen
			n := copy(s.hdr[s.hdrLen:s.hdrNeed], chunk[i:])
			s.hdrLen += n
			i += n
			if s.hdrLen < s.hdrNeed {
				continue
			}
			if s.hdrNeed == record.LogOverhead+5 {
				if err := s.sizeHeader(); err != nil {
					return 0, err
				}
				if s.hdrLen < s.hdrNeed {
					continue
				}
			}
			wasEmitting := s.emitting
			if err := s.startBatch(); err != nil {
				return 0, err
			}
			if s.emitting && !wasEmitting {
				if start >= 0 {
					emitFrom = start
				} else {
					// The header began in a chunk that was not emitted.
					fromEarlier := -start
					s.prefix = append([]byte(nil), s.hdr[:fromEarlier]...)
					emitFrom = 0
				}
			}
			if s.left == 0 {
				if err := s.endBatch(); err != nil {
					return 0, err
				}
			}
			continue
		}
		n := int(min(int64(len(chunk)-i), s.left))
		if s.legacy {
			s.crc = crc32.Update(s.crc, crc32.IEEETable, chunk[i:i+n])
		} else {
			s.crc = crc32.Update(s.crc, castagnoli, chunk[i:i+n])
		}
		s.left -= int64(n)
		i += n
		if s.left == 0 {
			if err := s.endBatch(); err != nil {
				return 0, err
			}
		}
	}
	s.inPos += int64(len(chunk))
	return emitFrom, nil
}

func (s *logStream) corrupt(offset int64, format string, args ...any) error {
	return &record.CorruptError{File: s.name, Pos: s.batchPos, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// sizeHeader reads length and magic and sets how much header to collect.
func (s *logStream) sizeHeader() error {
	length := int64(int32(binary.BigEndian.Uint32(s.hdr[8:])))
	magic := int8(s.hdr[16])
	base := int64(binary.BigEndian.Uint64(s.hdr[:]))
	switch {
	case magic < 0 || magic > record.CurrentMagic:
		return s.corrupt(base, "unknown magic %d", magic)
	case magic == record.CurrentMagic && length < record.HeaderSize-record.LogOverhead:
		return s.corrupt(base, "bad batch length %d", length)
	case magic < record.CurrentMagic && length < 14:
		return s.corrupt(base, "bad message length %d", length)
	}
	s.size = record.LogOverhead + length
	s.legacy = magic < record.CurrentMagic
	if s.legacy {
		s.hdrNeed = int(min(s.size, record.LogOverhead+22))
	} else {
		s.hdrNeed = record.HeaderSize
	}
	s.size = 0 // stays 0 until the header is complete
	return nil
}

// startBatch checks a complete header and starts the body.
func (s *logStream) startBatch() error {
	h := record.Batch(s.hdr[:s.hdrLen])
	length := int64(int32(binary.BigEndian.Uint32(s.hdr[8:])))
	s.size = record.LogOverhead + length
	s.left = s.size - int64(s.hdrLen)
	base, last := h.BaseOffset(), h.LastOffset()
	switch {
	case last < base:
		return s.corrupt(base, "last offset %d below base offset %d", last, base)
	case base < s.segBase:
		return s.corrupt(base, "batch offset %d below the segment base %d", base, s.segBase)
	case s.stats.Batches > 0 && base <= s.stats.LastOffset || s.stats.Batches == 0 && s.emitting && base < s.cut:
		return s.corrupt(base, "batch offsets [%d, %d] go backwards (previous batch ended at %d)", base, last, s.stats.LastOffset)
	}
	if !s.emitting && last >= s.cut {
		switch {
		case base < s.cut:
			return &CutError{Segment: s.name, Offset: s.cut,
				Reason: fmt.Sprintf("batch [%d, %d] spans it; no batch starts there", base, last)}
		case base > s.cut && !s.cleaned:
			return &CutError{Segment: s.name, Offset: s.cut,
				Reason: fmt.Sprintf("no batch starts there; the next is [%d, %d]", base, last)}
		}
		s.emitting = true
	}
	if s.legacy {
		s.crc = crc32.Update(0, crc32.IEEETable, s.hdr[16:s.hdrLen])
	} else {
		s.crc = crc32.Update(0, castagnoli, s.hdr[21:s.hdrLen])
	}
	s.outStart = s.outPos
	return nil
}

// endBatch checks the CRC and records the batch.
func (s *logStream) endBatch() error {
	h := record.Batch(s.hdr[:s.hdrLen])
	if stored := h.CRC(); stored != s.crc {
		return &record.CorruptError{File: s.name, Offset: h.BaseOffset(), Reason: "checksum mismatch", Stored: stored, Computed: s.crc}
	}
	if s.emitting {
		s.record(h, s.outStart, s.size)
		s.outPos += s.size
	}
	s.hdrLen, s.hdrNeed, s.size, s.left = 0, record.LogOverhead+5, 0, 0
	return nil
}

func (s *logStream) record(h record.Batch, pos, size int64) {
	st := &s.stats
	base, last := h.BaseOffset(), h.LastOffset()
	if st.Batches == 0 {
		st.FirstOffset = base
		st.Records = 0
	}
	st.Batches++
	st.LastOffset = last
	st.Bytes += size
	st.trackTxn(h)
	if h.IsLegacy() {
		st.Records = manifest.UnknownCount
	} else if st.Records != manifest.UnknownCount {
		st.Records += int64(h.RecordCount())
	}
	if ts := h.MaxTimestamp(); ts >= 0 {
		if st.MinTimestamp < 0 || ts < st.MinTimestamp {
			st.MinTimestamp = ts
		}
		st.MaxTimestamp = max(st.MaxTimestamp, ts)
	}
	if e := h.PartitionLeaderEpoch(); e >= 0 && (len(st.Epochs) == 0 || e > st.Epochs[len(st.Epochs)-1].Epoch) {
		st.Epochs = append(st.Epochs, manifest.EpochEntry{Epoch: e, StartOffset: base})
	}
	if s.interval < 0 {
		return
	}
	// Kafka's LogSegment.append, as localtier's Segment.append does it.
	if ts := h.MaxTimestamp(); ts > s.maxTSSoFar {
		s.maxTSSoFar, s.offsetOfMax = ts, last
	}
	if s.sinceIndex > s.interval {
		if rel := last - s.cut; rel <= math.MaxInt32 && pos <= math.MaxInt32 {
			s.offEntries = append(s.offEntries, index.Entry{Offset: last, Position: int32(pos)})
			s.maybeTimeEntry()
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += size
}

func (s *logStream) maybeTimeEntry() {
	if s.maxTSSoFar > s.lastIndexedT && s.maxTSSoFar >= 0 && s.offsetOfMax-s.cut <= math.MaxInt32 {
		s.timeEntries = append(s.timeEntries, index.TimestampOffset{Timestamp: s.maxTSSoFar, Offset: s.offsetOfMax})
		s.lastIndexedT = s.maxTSSoFar
	}
}

// finish checks the source ended on a batch boundary.
func (s *logStream) finish() error {
	if s.hdrLen > 0 || s.left > 0 {
		return &record.CorruptError{File: s.name, Pos: s.inPos, Offset: -1, Reason: "partial batch at the end of the segment"}
	}
	if !s.emitting || s.stats.Batches == 0 {
		if s.cut > s.segBase {
			return &CutError{Segment: s.name, Offset: s.cut, Reason: "the segment holds no batch at or after it"}
		}
	}
	return io.EOF
}

// indexes returns the built .index and .timeindex bytes (with the final
// time index entry Kafka writes when a segment rolls).
func (s *logStream) indexes() (offIdx, timeIdx []byte, err error) {
	s.maybeTimeEntry()
	if offIdx, err = index.EncodeOffsetEntries(s.offEntries, s.cut); err != nil {
		return nil, nil, fmt.Errorf("build offset index of %s: %w", s.name, err)
	}
	if timeIdx, err = index.EncodeTimeEntries(s.timeEntries, s.cut); err != nil {
		return nil, nil, fmt.Errorf("build time index of %s: %w", s.name, err)
	}
	return offIdx, timeIdx, nil
}
