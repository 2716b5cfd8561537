package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tiered/tiered/localtier/codec"
)

// BatchSpec holds the batch-level fields of a v2 batch to encode.
type BatchSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                codec.Codec
	Transactional        bool
	Control              bool
	LogAppendTime        bool
	// DeleteHorizon, when >= 0, sets the delete-horizon attribute and is
	// stored as the base timestamp (record timestamps become relative to it).
	// Use NoTimestamp (-1) for none; the zero value means a horizon of 0, so
	// callers building specs by hand should call NewBatchSpec.
	DeleteHorizon int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// LastOffsetDelta, when >= 0, is written as is (the compactor keeps the
	// original value when it drops a batch's last records). -1 derives it
	// from the last record.
	LastOffsetDelta int32
	// MaxTimestamp, when not NoTimestamp, overrides the derived maximum (used
	// for LogAppendTime batches).
	MaxTimestamp int64
}

// NewBatchSpec returns a spec for a plain (non-idempotent, non-transactional)
// batch at baseOffset with every optional field unset.
func NewBatchSpec(baseOffset int64, c codec.Codec) BatchSpec {
	return BatchSpec{
		BaseOffset:           baseOffset,
		PartitionLeaderEpoch: NoPartitionLeader,
		Codec:                c,
		DeleteHorizon:        NoTimestamp,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
		LastOffsetDelta:      -1,
		MaxTimestamp:         NoTimestamp,
	}
}

// Encoder encodes v2 batches, reusing a scratch buffer for compression.
// The zero value is ready to use; an Encoder is not safe for concurrent use.
type Encoder struct {
	scratch []byte
}

// AppendBatch appends one encoded v2 batch holding recs to dst. Record
// offsets and timestamps are absolute: they are stored as deltas from
// spec.BaseOffset and from the base timestamp (the first record's timestamp,
// or the delete horizon).
func (e *Encoder) AppendBatch(dst []byte, spec BatchSpec, recs []Record) ([]byte, error) {
	baseTS := int64(NoTimestamp)
	maxTS := int64(NoTimestamp)
	if len(recs) > 0 {
		baseTS = recs[0].Timestamp
		for i := range recs {
			if recs[i].Timestamp > maxTS {
				maxTS = recs[i].Timestamp
			}
		}
	}
	attrs := int16(spec.Codec) & AttrCodecMask
	if spec.LogAppendTime {
		attrs |= AttrLogAppendTime
	}
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	if spec.Control {
		attrs |= AttrControl
	}
	if spec.DeleteHorizon >= 0 {
		attrs |= AttrDeleteHorizon
		baseTS = spec.DeleteHorizon
	}
	if spec.MaxTimestamp != NoTimestamp {
		maxTS = spec.MaxTimestamp
	}
	lastDelta := spec.LastOffsetDelta
	if lastDelta < 0 {
		lastDelta = 0
		if len(recs) > 0 {
			d := recs[len(recs)-1].Offset - spec.BaseOffset
			if d < 0 || d > math.MaxInt32 {
				return dst, fmt.Errorf("encode batch: last record offset %d out of range for base offset %d", recs[len(recs)-1].Offset, spec.BaseOffset)
			}
			lastDelta = int32(d)
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	if spec.Codec == codec.None {
		dst, err = appendRecords(dst, spec.BaseOffset, baseTS, recs)
		if err != nil {
			return dst[:start], err
		}
	} else {
		e.scratch, err = appendRecords(e.scratch[:0], spec.BaseOffset, baseTS, recs)
		if err != nil {
			return dst[:start], err
		}
		dst, err = codec.Compress(spec.Codec, dst, e.scratch)
		if err != nil {
			return dst[:start], fmt.Errorf("encode batch: %w", err)
		}
	}
	return finishBatch(dst, start, spec, attrs, lastDelta, baseTS, maxTS, int32(len(recs)))
}

// finishBatch fills in the header of the v2 batch that starts at dst[start:]
// (its records already appended after HeaderSize bytes) and its CRC.
func finishBatch(dst []byte, start int, spec BatchSpec, attrs int16, lastDelta int32, baseTS, maxTS int64, n int32) ([]byte, error) {
	size := len(dst) - start
	if size-LogOverhead > math.MaxInt32 {
		return dst[:start], errors.New("encode batch: batch exceeds 2 GiB")
	}
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint64(h[offBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(h[offLength:], uint32(size-LogOverhead))
	be.PutUint32(h[offLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	h[offMagic] = CurrentMagic
	be.PutUint16(h[offAttributes:], uint16(attrs))
	be.PutUint32(h[offLastOffsetDelta:], uint32(lastDelta))
	be.PutUint64(h[offBaseTimestamp:], uint64(baseTS))
	be.PutUint64(h[offMaxTimestamp:], uint64(maxTS))
	be.PutUint64(h[offProducerID:], uint64(spec.ProducerID))
	be.PutUint16(h[offProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(h[offBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(h[offRecordCount:], uint32(n))
	Batch(h).UpdateCRC()
	return dst, nil
}

// AppendEncodedBatch appends one v2 batch whose
// records were already encoded with AppendRecord in order (offset deltas
// 0 to n-1 from spec.BaseOffset, timestamp deltas from baseTS): a producer
// that encodes records as they come and closes the batch later. recs is
// the records' bytes, n their count, maxTS their largest timestamp. The
// batch is the one AppendBatch would encode from the same records with
// spec (spec.DeleteHorizon, MaxTimestamp and LastOffsetDelta unset).
func (e *Encoder) AppendEncodedBatch(dst []byte, spec BatchSpec, recs []byte, n int32, baseTS, maxTS int64) ([]byte, error) {
	if spec.DeleteHorizon >= 0 || spec.MaxTimestamp != NoTimestamp || spec.LastOffsetDelta >= 0 || spec.LogAppendTime {
		return dst, errors.New("encode batch: pre-encoded records take a plain batch spec")
	}
	attrs := int16(spec.Codec) & AttrCodecMask
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	if spec.Control {
		attrs |= AttrControl
	}
	if n == 0 {
		baseTS, maxTS = NoTimestamp, NoTimestamp
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	if spec.Codec == codec.None {
		dst = append(dst, recs...)
	} else if dst, err = codec.Compress(spec.Codec, dst, recs); err != nil {
		return dst[:start], fmt.Errorf("encode batch: %w", err)
	}
	return finishBatch(dst, start, spec, attrs, max(n-1, 0), baseTS, maxTS, n)
}

func appendRecords(dst []byte, baseOffset, baseTS int64, recs []Record) ([]byte, error) {
	for i := range recs {
		r := &recs[i]
		od := r.Offset - baseOffset
		if od < 0 || od > math.MaxInt32 {
			return dst, fmt.Errorf("encode batch: record offset %d out of range for base offset %d", r.Offset, baseOffset)
		}
		dst = AppendRecord(dst, r.Attributes, r.Timestamp-baseTS, int32(od), r.Key, r.Value, r.Headers)
	}
	return dst, nil
}

// RecordSize is the encoded size of a record body (without its length prefix).
func recordBodySize(tsDelta int64, offDelta int32, key, value []byte, headers []Header) int {
	n := 1 + varintLen(tsDelta) + varintLen(int64(offDelta)) + bytesLen(key) + bytesLen(value) + varintLen(int64(len(headers)))
	for _, h := range headers {
		n += bytesLen(h.Key) + bytesLen(h.Value)
	}
	return n
}

// AppendRecord appends one encoded v2 record with the given deltas.
func AppendRecord(dst []byte, attrs int8, tsDelta int64, offDelta int32, key, value []byte, headers []Header) []byte {
	body := recordBodySize(tsDelta, offDelta, key, value, headers)
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, byte(attrs))
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offDelta))
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = binary.AppendVarint(dst, int64(len(headers)))
	for _, h := range headers {
		dst = appendBytes(dst, h.Key)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// EncodedRecordSize is the bytes one record takes in an uncompressed batch,
// length prefix included: what a producer counts against its batch size.
func EncodedRecordSize(tsDelta int64, offDelta int32, key, value []byte, headers []Header) int {
	body := recordBodySize(tsDelta, offDelta, key, value, headers)
	return varintLen(int64(body)) + body
}
