// Package record owns Kafka's record-batch wire and on-disk format: the v2
// record batch (61-byte header, CRC-32C, compressed payloads, control
// batches) and the legacy magic 0/1 message sets that share its 12-byte
// offset+size framing. It decodes without allocating per batch, encodes
// batches byte-identical to Kafka's own, and reports corruption as a
// *CorruptError carrying the byte position. docs/format/record-batch.md and
// docs/format/record.md describe the layout.
package record

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/tiered/tiered/localtier/codec"
)

// Byte positions of the v2 batch header fields.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of a v2 batch header; records follow it.
	HeaderSize = 61
	// LogOverhead is the offset+length prefix shared by every magic: a
	// batch occupies LogOverhead + Length() bytes.
	LogOverhead = 12
	// legacyMinSize is the smallest magic 0 message body (crc..value length).
	legacyMinSize0 = 14
	legacyMinSize1 = 22
)

// Attribute bits of a v2 batch.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
	AttrDeleteHorizon = 0x40
	NoProducerID      = -1
	NoProducerEpoch   = -1
	NoSequence        = -1
	NoPartitionLeader = -1
	NoTimestamp       = -1
	CurrentMagic      = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view of one whole batch in a buffer, from its base offset field
// to its last byte. For magic 0/1 it is one (possibly compressed wrapper)
// message with the same 12-byte framing. Accessors read the header in place;
// a Batch never owns memory.
type Batch []byte

func (b Batch) i64(off int) int64 { return int64(binary.BigEndian.Uint64(b[off:])) }
func (b Batch) i32(off int) int32 { return int32(binary.BigEndian.Uint32(b[off:])) }
func (b Batch) i16(off int) int16 { return int16(binary.BigEndian.Uint16(b[off:])) }

// Magic is the format version: 2 for record batches, 0 or 1 for legacy messages.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// IsLegacy reports whether b is a magic 0/1 message rather than a v2 batch.
func (b Batch) IsLegacy() bool { return b.Magic() < 2 }

// Size is the number of bytes the batch occupies, framing included.
func (b Batch) Size() int { return len(b) }

// Length is the batchLength (or legacy message size) field: bytes after it.
func (b Batch) Length() int32 { return b.i32(offLength) }

// BaseOffset is the first offset of a v2 batch. For a legacy message it is
// the message's offset field (the last inner offset for a compressed wrapper).
func (b Batch) BaseOffset() int64 { return b.i64(offBaseOffset) }

// LastOffset is the offset of the last record the batch covers.
func (b Batch) LastOffset() int64 {
	if b.IsLegacy() {
		return b.i64(offBaseOffset)
	}
	return b.BaseOffset() + int64(b.LastOffsetDelta())
}

// NextOffset is LastOffset()+1.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// PartitionLeaderEpoch of a v2 batch (-1 for legacy messages).
func (b Batch) PartitionLeaderEpoch() int32 {
	if b.IsLegacy() {
		return NoPartitionLeader
	}
	return b.i32(offLeaderEpoch)
}

// CRC is the stored checksum (CRC-32C for v2, CRC-32 IEEE for magic 0/1).
func (b Batch) CRC() uint32 {
	if b.IsLegacy() {
		return binary.BigEndian.Uint32(b[offLeaderEpoch:])
	}
	return binary.BigEndian.Uint32(b[offCRC:])
}

// ComputeCRC computes the checksum the CRC field should hold.
func (b Batch) ComputeCRC() uint32 {
	if b.IsLegacy() {
		return crc32.ChecksumIEEE(b[offMagic:])
	}
	return crc32.Checksum(b[offAttributes:], castagnoli)
}

// Attributes of a v2 batch (legacy: the message attributes byte widened).
func (b Batch) Attributes() int16 {
	if b.IsLegacy() {
		return int16(b[offMagic+1])
	}
	return b.i16(offAttributes)
}

// Codec is the compression codec of the batch payload.
func (b Batch) Codec() codec.Codec { return codec.Codec(b.Attributes() & AttrCodecMask) }

// IsTransactional reports the transactional attribute bit.
func (b Batch) IsTransactional() bool { return !b.IsLegacy() && b.Attributes()&AttrTransactional != 0 }

// IsControl reports the control attribute bit.
func (b Batch) IsControl() bool { return !b.IsLegacy() && b.Attributes()&AttrControl != 0 }

// HasDeleteHorizon reports the delete-horizon attribute bit; BaseTimestamp
// then holds the horizon.
func (b Batch) HasDeleteHorizon() bool {
	return !b.IsLegacy() && b.Attributes()&AttrDeleteHorizon != 0
}

// DeleteHorizon returns the delete horizon in ms, or -1 when absent.
func (b Batch) DeleteHorizon() int64 {
	if b.HasDeleteHorizon() {
		return b.BaseTimestamp()
	}
	return NoTimestamp
}

// TimestampType is 1 for LogAppendTime, 0 for CreateTime.
func (b Batch) LogAppendTime() bool {
	if b.IsLegacy() {
		return b.Magic() == 1 && b[offMagic+1]&0x08 != 0
	}
	return b.Attributes()&AttrLogAppendTime != 0
}

// LastOffsetDelta of a v2 batch.
func (b Batch) LastOffsetDelta() int32 { return b.i32(offLastOffsetDelta) }

// BaseTimestamp of a v2 batch (the first timestamp, or the delete horizon).
func (b Batch) BaseTimestamp() int64 {
	if b.IsLegacy() {
		return b.legacyTimestamp()
	}
	return b.i64(offBaseTimestamp)
}

// MaxTimestamp of the batch. For legacy messages it is the message timestamp
// (-1 for magic 0).
func (b Batch) MaxTimestamp() int64 {
	if b.IsLegacy() {
		return b.legacyTimestamp()
	}
	return b.i64(offMaxTimestamp)
}

func (b Batch) legacyTimestamp() int64 {
	if b.Magic() == 1 && len(b) >= LogOverhead+legacyMinSize1 {
		return b.i64(offMagic + 2)
	}
	return NoTimestamp
}

// ProducerID of a v2 batch (-1 when absent or legacy).
func (b Batch) ProducerID() int64 {
	if b.IsLegacy() {
		return NoProducerID
	}
	return b.i64(offProducerID)
}

// ProducerEpoch of a v2 batch.
func (b Batch) ProducerEpoch() int16 {
	if b.IsLegacy() {
		return NoProducerEpoch
	}
	return b.i16(offProducerEpoch)
}

// BaseSequence of a v2 batch.
func (b Batch) BaseSequence() int32 {
	if b.IsLegacy() {
		return NoSequence
	}
	return b.i32(offBaseSequence)
}

// RecordCount of a v2 batch as stored (1 for a legacy message: a compressed
// wrapper's count is only known after decoding).
func (b Batch) RecordCount() int32 {
	if b.IsLegacy() {
		return 1
	}
	return b.i32(offRecordCount)
}

// Payload is the bytes after the v2 header (records, possibly compressed).
func (b Batch) Payload() []byte { return b[HeaderSize:] }

// VerifyCRC checks the stored checksum against the bytes.
func (b Batch) VerifyCRC() error {
	if got, want := b.ComputeCRC(), b.CRC(); got != want {
		return &CorruptError{Reason: "checksum mismatch", Offset: b.BaseOffset(), Stored: want, Computed: got}
	}
	return nil
}

// SetBaseOffset overwrites the base offset field. The CRC does not cover it.
func (b Batch) SetBaseOffset(off int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off)) }

// SetPartitionLeaderEpoch overwrites the leader epoch. The CRC does not cover it.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// SetMaxTimestampLogAppend sets the LogAppendTime attribute and max timestamp
// and recomputes the CRC, as a broker does for log.message.timestamp.type=LogAppendTime.
func (b Batch) SetMaxTimestampLogAppend(ts int64) {
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(b.Attributes()|AttrLogAppendTime))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.UpdateCRC()
}

// SetMaxTimestampCreateTime clears the LogAppendTime attribute, sets the max
// timestamp and recomputes the CRC, as a broker does for a CreateTime topic.
func (b Batch) SetMaxTimestampCreateTime(ts int64) {
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(b.Attributes()&^AttrLogAppendTime))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.UpdateCRC()
}

// UpdateCRC recomputes and stores the checksum.
func (b Batch) UpdateCRC() {
	if b.IsLegacy() {
		binary.BigEndian.PutUint32(b[offLeaderEpoch:], b.ComputeCRC())
		return
	}
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
}
