package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/tiered/tiered/localtier/codec"
)

// Header is a record header. Value is nil for a null header value.
type Header struct {
	Key   []byte
	Value []byte
}

// Record is one decoded record. Key and Value are nil for null (a nil Value
// is a tombstone); a non-nil empty slice is an empty, non-null field. Decoded
// records alias the batch or the decoder's scratch buffer.
type Record struct {
	Offset     int64
	Timestamp  int64
	Attributes int8
	Key        []byte
	Value      []byte
	Headers    []Header
}

// DefaultMaxUncompressed bounds the decompressed size of one batch: a hostile
// payload cannot make the decoder allocate more.
const DefaultMaxUncompressed = 64 << 20

// minRecordSize is the smallest encoded v2 record: length, attributes,
// timestamp delta, offset delta, key length, value length, header count.
const minRecordSize = 7

// maxRecordsPrealloc caps the records Records allocates room for before
// decoding any: a Record is 96 bytes, so sizing the slice by what a 64 MiB
// payload could hold would allocate 900 MB for a batch whose first record
// is garbage. Past it the slice grows as records decode.
const maxRecordsPrealloc = 4096

// Decoder decodes the records of batches, reusing its buffers: the records
// it returns are valid until its next call.
type Decoder struct {
	// MaxUncompressed caps one batch's decompressed payload; 0 means
	// DefaultMaxUncompressed.
	MaxUncompressed int
	scratch         []byte
	recs            []Record
	hdrs            []Header
	legacy          legacyScratch
}

var errShort = errors.New("record extends past the end of the batch")

// Release lets go of the buffers the decoder reuses between calls when one
// holds more than keep bytes, so a long-lived decoder does not pin the
// largest batch it ever decoded. Records returned before must no longer be
// used.
func (d *Decoder) Release(keep int) {
	if cap(d.scratch) <= keep && cap(d.legacy.buf) <= keep &&
		cap(d.recs)*int(unsafe.Sizeof(Record{})) <= keep && cap(d.hdrs)*int(unsafe.Sizeof(Header{})) <= keep {
		return
	}
	*d = Decoder{MaxUncompressed: d.MaxUncompressed}
}

func (d *Decoder) max() int {
	if d.MaxUncompressed > 0 {
		return d.MaxUncompressed
	}
	return DefaultMaxUncompressed
}

// Records decodes every record of b (decompressing if needed). It does not
// verify the CRC; use Batch.VerifyCRC or Iter.Verify for that.
func (d *Decoder) Records(b Batch) ([]Record, error) {
	if b.IsLegacy() {
		return d.legacyRecords(b)
	}
	if len(b) < HeaderSize {
		return nil, &CorruptError{Offset: -1, Reason: fmt.Sprintf("batch of %d bytes is shorter than the %d-byte header", len(b), HeaderSize)}
	}
	count := b.RecordCount()
	if count < 0 {
		return nil, corrupt(b, fmt.Sprintf("negative record count %d", count), nil)
	}
	payload := b.Payload()
	if c := b.Codec(); c != codec.None {
		if c == codec.LZ4 && codec.IsKafka3160LZ4(payload) {
			return nil, corrupt(b, "lz4 frame header checksum covers the magic number (KAFKA-3160), which Kafka reads only in magic 0 messages", nil)
		}
		out, err := codec.Decompress(c, d.scratch[:0], payload, d.max())
		if err != nil {
			return nil, corrupt(b, "decompress "+c.String()+" payload", err)
		}
		d.scratch = out
		payload = out
	}
	// The count and the payload size only bound how many records there
	// can be: preallocate no more than maxRecordsPrealloc, so a batch
	// that fails early (or lies) costs no more than what it decodes.
	capHint := min(int(count), len(payload)/minRecordSize, maxRecordsPrealloc)
	recs := d.recs[:0]
	if cap(recs) < capHint {
		recs = make([]Record, 0, capHint)
	}
	d.hdrs = d.hdrs[:0]
	base, baseTS := b.BaseOffset(), b.BaseTimestamp()
	logAppend := b.LogAppendTime()
	maxTS := b.MaxTimestamp()
	pos := 0
	for i := int32(0); i < count; i++ {
		var r Record
		n, err := d.decodeRecord(payload[pos:], &r)
		if err != nil {
			d.recs = recs
			return nil, corrupt(b, fmt.Sprintf("record %d of %d at payload byte %d", i, count, pos), err)
		}
		pos += n
		r.Offset += base
		if logAppend {
			r.Timestamp = maxTS
		} else {
			r.Timestamp += baseTS
		}
		recs = append(recs, r)
	}
	d.recs = recs
	if pos != len(payload) {
		return nil, corrupt(b, fmt.Sprintf("%d bytes left after the %d declared records", len(payload)-pos, count), nil)
	}
	return recs, nil
}

func corrupt(b Batch, reason string, err error) error {
	return &CorruptError{Offset: b.BaseOffset(), Reason: reason, Err: err}
}

// decodeRecord decodes one record from p into r (Offset and Timestamp hold
// the deltas) and returns the bytes consumed.
func (d *Decoder) decodeRecord(p []byte, r *Record) (int, error) {
	n := 0
	length, err := varint32(p, &n)
	if err != nil {
		return 0, fmt.Errorf("record length: %w", err)
	}
	if length < minRecordSize-1 || length > int64(len(p)-n) {
		return 0, fmt.Errorf("record length %d does not fit in the %d bytes left", length, len(p)-n)
	}
	end := n + int(length)
	body := p[n:end]
	if len(body) < 1 {
		return 0, errShort
	}
	r.Attributes = int8(body[0])
	pos := 1
	v, err := varint(body, &pos)
	if err != nil {
		return 0, fmt.Errorf("timestamp delta: %w", err)
	}
	r.Timestamp = v
	v, err = varint32(body, &pos)
	if err != nil {
		return 0, fmt.Errorf("offset delta: %w", err)
	}
	r.Offset = v
	if r.Key, err = nullableBytes(body, &pos); err != nil {
		return 0, fmt.Errorf("key: %w", err)
	}
	if r.Value, err = nullableBytes(body, &pos); err != nil {
		return 0, fmt.Errorf("value: %w", err)
	}
	hc, err := varint32(body, &pos)
	if err != nil {
		return 0, fmt.Errorf("header count: %w", err)
	}
	if hc < 0 || hc > int64(len(body)-pos)/2 {
		return 0, fmt.Errorf("header count %d does not fit", hc)
	}
	if hc > 0 {
		start := len(d.hdrs)
		for i := int64(0); i < hc; i++ {
			var h Header
			if h.Key, err = nullableBytes(body, &pos); err != nil || h.Key == nil {
				if err == nil {
					err = errors.New("null header key")
				}
				return 0, fmt.Errorf("header %d key: %w", i, err)
			}
			if h.Value, err = nullableBytes(body, &pos); err != nil {
				return 0, fmt.Errorf("header %d value: %w", i, err)
			}
			d.hdrs = append(d.hdrs, h)
		}
		r.Headers = d.hdrs[start:len(d.hdrs):len(d.hdrs)]
	} else {
		r.Headers = nil
	}
	if pos != len(body) {
		return 0, fmt.Errorf("%d bytes left inside the record after its headers", len(body)-pos)
	}
	return end, nil
}

func varint(p []byte, pos *int) (int64, error) {
	if *pos < len(p) && p[*pos] < 0x80 {
		// One-byte fast path: zig-zag decode.
		u := uint64(p[*pos])
		*pos++
		return int64(u>>1) ^ -int64(u&1), nil
	}
	v, n := binary.Varint(p[*pos:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	*pos += n
	return v, nil
}

// varint32 reads a zig-zag varint of at most 5 bytes, the int32 fields
// of a record, as Kafka's ByteUtils.readVarint does: a longer one is
// refused ("Varint is too long"), bits past the 32nd are dropped.
func varint32(p []byte, pos *int) (int64, error) {
	var u uint32
	for i := 0; i < 5; i++ {
		if *pos+i >= len(p) {
			return 0, errors.New("bad varint")
		}
		c := p[*pos+i]
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			*pos += i + 1
			return int64(int32(u>>1) ^ -int32(u&1)), nil
		}
	}
	return 0, errors.New("varint is longer than 5 bytes")
}

func nullableBytes(p []byte, pos *int) ([]byte, error) {
	l, err := varint32(p, pos)
	if err != nil {
		return nil, err
	}
	if l == -1 {
		return nil, nil
	}
	if l < -1 || l > int64(len(p)-*pos) {
		return nil, fmt.Errorf("length %d does not fit in the %d bytes left", l, len(p)-*pos)
	}
	s := p[*pos : *pos+int(l) : *pos+int(l)]
	*pos += int(l)
	return s, nil
}
