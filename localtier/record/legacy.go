package record

import (
	"encoding/binary"
	"fmt"

	"github.com/tiered/tiered/localtier/codec"
)

// Legacy (magic 0/1) message layout after the 12-byte offset+size framing:
// crc u32 | magic i8 | attributes i8 | [timestamp i64, magic 1 only] |
// key (i32 length, -1 null) | value (i32 length, -1 null). A compressed
// wrapper's value is a compressed message set of inner messages.

type legacyScratch struct {
	buf []byte
}

type legacyMsg struct {
	offset    int64
	magic     int8
	attrs     int8
	timestamp int64
	key       []byte
	value     []byte
}

// parseLegacy parses one framed legacy message (framing included).
func parseLegacy(b []byte) (legacyMsg, error) {
	var m legacyMsg
	if len(b) < LogOverhead+legacyMinSize0 {
		return m, fmt.Errorf("legacy message of %d bytes is too short", len(b))
	}
	m.offset = int64(binary.BigEndian.Uint64(b))
	size := int64(int32(binary.BigEndian.Uint32(b[8:])))
	if size != int64(len(b)-LogOverhead) {
		return m, fmt.Errorf("legacy message size %d does not match its %d bytes", size, len(b)-LogOverhead)
	}
	m.magic = int8(b[offMagic])
	m.attrs = int8(b[offMagic+1])
	pos := offMagic + 2
	m.timestamp = NoTimestamp
	if m.magic == 1 {
		if len(b) < LogOverhead+legacyMinSize1 {
			return m, fmt.Errorf("magic 1 message of %d bytes is too short", len(b))
		}
		m.timestamp = int64(binary.BigEndian.Uint64(b[pos:]))
		pos += 8
	} else if m.magic != 0 {
		return m, fmt.Errorf("unknown magic %d", m.magic)
	}
	var err error
	if m.key, pos, err = legacyBytes(b, pos); err != nil {
		return m, fmt.Errorf("key: %w", err)
	}
	if m.value, pos, err = legacyBytes(b, pos); err != nil {
		return m, fmt.Errorf("value: %w", err)
	}
	if pos != len(b) {
		return m, fmt.Errorf("%d bytes left after the value", len(b)-pos)
	}
	return m, nil
}

func legacyBytes(b []byte, pos int) ([]byte, int, error) {
	if len(b)-pos < 4 {
		return nil, pos, errShort
	}
	l := int32(binary.BigEndian.Uint32(b[pos:]))
	pos += 4
	if l == -1 {
		return nil, pos, nil
	}
	if l < -1 || int(l) > len(b)-pos {
		return nil, pos, fmt.Errorf("length %d does not fit in the %d bytes left", l, len(b)-pos)
	}
	return b[pos : pos+int(l) : pos+int(l)], pos + int(l), nil
}

// legacyRecords decodes a legacy message, expanding a compressed wrapper into
// its inner messages with absolute offsets, as Kafka's consumers see them.
func (d *Decoder) legacyRecords(b Batch) ([]Record, error) {
	m, err := parseLegacy(b)
	if err != nil {
		return nil, corrupt(b, "legacy message", err)
	}
	recs := d.recs[:0]
	c := codec.Codec(m.attrs & AttrCodecMask)
	if c == codec.None {
		recs = append(recs, Record{Offset: m.offset, Timestamp: m.timestamp, Key: m.key, Value: m.value})
		d.recs = recs
		return recs, nil
	}
	if m.value == nil {
		return nil, corrupt(b, "compressed legacy wrapper with a null value", nil)
	}
	if c == codec.LZ4 && m.magic > 0 && codec.IsKafka3160LZ4(m.value) {
		return nil, corrupt(b, "lz4 frame header checksum covers the magic number (KAFKA-3160), which Kafka reads only in magic 0 messages", nil)
	}
	inner, err := codec.Decompress(c, d.legacy.buf[:0], m.value, d.max())
	if err != nil {
		return nil, corrupt(b, "decompress "+c.String()+" legacy wrapper", err)
	}
	d.legacy.buf = inner
	it := NewIter(inner)
	first := len(recs)
	for {
		ib, ok := it.Next()
		if !ok {
			break
		}
		im, err := parseLegacy(ib)
		if err != nil {
			return nil, corrupt(b, "inner legacy message", err)
		}
		if im.attrs&AttrCodecMask != 0 {
			return nil, corrupt(b, "nested compressed legacy message", nil)
		}
		ts := im.timestamp
		if m.magic == 1 && m.attrs&0x08 != 0 {
			ts = m.timestamp // LogAppendTime: the wrapper's timestamp applies
		}
		recs = append(recs, Record{Offset: im.offset, Timestamp: ts, Key: im.key, Value: im.value})
	}
	if it.Err() != nil || it.Truncated() {
		err := it.Err()
		if err == nil {
			err = errShort
		}
		return nil, corrupt(b, "inner message set", err)
	}
	if len(recs) == first {
		return nil, corrupt(b, "compressed legacy wrapper holds no messages", nil)
	}
	if m.magic == 1 {
		// Inner offsets are relative; the wrapper carries the last absolute one.
		last := recs[len(recs)-1].Offset
		for i := first; i < len(recs); i++ {
			recs[i].Offset = m.offset - last + recs[i].Offset
		}
	}
	d.recs = recs
	return recs, nil
}
