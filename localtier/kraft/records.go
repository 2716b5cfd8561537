package kraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tiered/tiered/localtier"
)

// TopicID is Kafka's topic ID (a Uuid).
type TopicID = localtier.TopicID

// FrameVersion is the only metadata record frame version Kafka writes and reads.
const FrameVersion = 1

// API keys of the metadata records this package decodes (Kafka's
// metadata/src/main/resources/common/metadata/*.json).
const (
	KeyRegisterBroker  = 0
	KeyTopic           = 2
	KeyPartition       = 3
	KeyConfig          = 4
	KeyPartitionChange = 5
	KeyRemoveTopic     = 9
)

// ConfigRecord resource types (Kafka's ConfigResource.Type).
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
)

// NoLeaderChange is PartitionChangeRecord's Leader default: the leader did not change.
const NoLeaderChange int32 = -2

// Record is one decoded metadata record: exactly one of its pointers is set for the types
// this package knows; an unknown type leaves them all nil (APIKey says which it was).
type Record struct {
	APIKey  int16
	Version int16

	Topic           *TopicRecord
	Partition       *PartitionRecord
	PartitionChange *PartitionChangeRecord
	Config          *ConfigRecord
	RemoveTopic     *RemoveTopicRecord
	RegisterBroker  *RegisterBrokerRecord
}

// TopicRecord creates a topic (api key 2).
type TopicRecord struct {
	Name    string
	TopicID TopicID
}

// PartitionRecord creates or replaces a partition (api key 3, versions 0-2).
type PartitionRecord struct {
	PartitionID      int32
	TopicID          TopicID
	Replicas         []int32
	ISR              []int32
	RemovingReplicas []int32
	AddingReplicas   []int32
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
}

// PartitionChangeRecord changes a partition (api key 5, versions 0-2). Nil slices are
// "unchanged"; Leader is NoLeaderChange when the leader did not change.
type PartitionChangeRecord struct {
	PartitionID int32
	TopicID     TopicID
	ISR         []int32
	Leader      int32
	Replicas    []int32
}

// ConfigRecord sets (Value non-nil) or deletes (Value nil) one config of a resource
// (api key 4). A broker resource named "" is the cluster-wide default.
type ConfigRecord struct {
	ResourceType int8
	ResourceName string
	Name         string
	Value        *string
}

// RemoveTopicRecord deletes a topic and its partitions (api key 9).
type RemoveTopicRecord struct {
	TopicID TopicID
}

// RegisterBrokerRecord registers a broker (api key 0, versions 0-3).
type RegisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	Rack        *string
	Fenced      bool
}

// maxVersion is the newest version of each known record this decoder reads.
var maxVersion = map[int16]int16{
	KeyRegisterBroker: 3, KeyTopic: 0, KeyPartition: 2, KeyConfig: 0, KeyPartitionChange: 2, KeyRemoveTopic: 0,
}

// DecodeError is a metadata record that does not decode: Pos is the byte position inside
// the record value where decoding stopped.
type DecodeError struct {
	APIKey int16 // -1 when the frame itself is bad
	Pos    int
	Reason string
}

func (e *DecodeError) Error() string {
	if e.APIKey < 0 {
		return fmt.Sprintf("metadata record frame at byte %d: %s", e.Pos, e.Reason)
	}
	return fmt.Sprintf("metadata record (api key %d) at byte %d: %s", e.APIKey, e.Pos, e.Reason)
}

var errShort = errors.New("ends early")

// reader decodes Kafka's flexible-version primitives.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(reason string) {
	if r.err == nil {
		r.err = errors.New(reason)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = errShort
		return nil
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		if n == 0 {
			r.err = errShort
		} else {
			r.fail("varint overflows 64 bits")
		}
		return 0
	}
	r.pos += n
	return v
}

// uvarint32 is an unsigned varint that must fit an int32 (lengths, counts).
func (r *reader) uvarint32() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail(fmt.Sprintf("unsigned varint %d overflows int32", v))
		return 0
	}
	return int(v)
}

func (r *reader) int8() int8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *reader) bool() bool {
	b := r.take(1)
	if b == nil {
		return false
	}
	if b[0] > 1 {
		r.fail(fmt.Sprintf("boolean byte %d", b[0]))
	}
	return b[0] == 1
}

func (r *reader) int16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) int32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) int64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) uuid() TopicID {
	var id TopicID
	copy(id[:], r.take(16))
	return id
}

// compactString reads a COMPACT_NULLABLE_STRING: length+1 as an unsigned varint, 0 = null.
func (r *reader) compactString(nullable bool) *string {
	n := r.uvarint32()
	if r.err != nil {
		return nil
	}
	if n == 0 {
		if !nullable {
			r.fail("null in a non-nullable string")
		}
		return nil
	}
	s := string(r.take(n - 1))
	return &s
}

func (r *reader) str() string {
	if s := r.compactString(false); s != nil {
		return *s
	}
	return ""
}

// int32s reads a COMPACT_ARRAY of int32: count+1, 0 = null (nil when nullable).
func (r *reader) int32s(nullable bool) []int32 {
	n := r.uvarint32()
	if r.err != nil {
		return nil
	}
	if n == 0 {
		if !nullable {
			r.fail("null in a non-nullable array")
		}
		return nil
	}
	n--
	if n*4 > len(r.b)-r.pos {
		r.err = errShort
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.int32()
	}
	return out
}

// skipArray skips a COMPACT_ARRAY whose elements are elem bytes wide.
func (r *reader) skipArray(elem int) {
	n := r.uvarint32()
	if n > 0 {
		r.take((n - 1) * elem)
	}
}

// tagged reads a tagged-field section, handing each field's bytes to fn (known tags) or
// skipping it; tags must be strictly increasing.
func (r *reader) tagged(fn func(tag uint64, f *reader)) {
	n := r.uvarint32()
	prev := int64(-1)
	for i := 0; i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint32()
		if r.err != nil {
			return
		}
		if int64(tag) <= prev {
			r.fail(fmt.Sprintf("tagged field %d after %d (tags must increase)", tag, prev))
			return
		}
		prev = int64(tag)
		start := r.pos
		data := r.take(size)
		if r.err != nil || fn == nil {
			continue
		}
		f := &reader{b: data}
		fn(tag, f)
		if f.err == nil && f.pos != len(data) {
			f.fail(fmt.Sprintf("tagged field %d has %d byte(s) left over", tag, len(data)-f.pos))
		}
		if f.err != nil {
			r.pos = start + f.pos
			r.err = fmt.Errorf("tagged field %d: %w", tag, f.err)
		}
	}
}

// DecodeRecord decodes one metadata record (the value of a record in a metadata log batch):
// frame version, api key and version as unsigned varints, then the record's flexible body
// with its tagged fields. Types other than the known ones decode as a Record with only
// APIKey and Version set (their bodies are not read). A known type at an unknown version,
// a bad frame, or a body that does not decode exactly is a *DecodeError.
func DecodeRecord(b []byte) (Record, error) {
	r := &reader{b: b}
	frame := r.uvarint()
	if r.err == nil && frame != FrameVersion {
		return Record{}, &DecodeError{APIKey: -1, Pos: 0, Reason: fmt.Sprintf("frame version %d (this reader knows %d)", frame, FrameVersion)}
	}
	key, ver := r.uvarint(), r.uvarint()
	if r.err != nil {
		return Record{}, &DecodeError{APIKey: -1, Pos: r.pos, Reason: "frame header " + r.err.Error()}
	}
	if key > math.MaxInt16 || ver > math.MaxInt16 {
		return Record{}, &DecodeError{APIKey: -1, Pos: r.pos, Reason: fmt.Sprintf("api key %d or version %d out of range", key, ver)}
	}
	rec := Record{APIKey: int16(key), Version: int16(ver)}
	maxV, known := maxVersion[rec.APIKey]
	if !known {
		return rec, nil
	}
	if rec.Version > maxV {
		return Record{}, &DecodeError{APIKey: rec.APIKey, Pos: r.pos, Reason: fmt.Sprintf("version %d (this reader knows 0-%d)", rec.Version, maxV)}
	}
	switch rec.APIKey {
	case KeyTopic:
		rec.Topic = &TopicRecord{Name: r.str(), TopicID: r.uuid()}
		r.tagged(nil)
	case KeyPartition:
		p := &PartitionRecord{PartitionID: r.int32(), TopicID: r.uuid()}
		p.Replicas, p.ISR = r.int32s(false), r.int32s(false)
		p.RemovingReplicas, p.AddingReplicas = r.int32s(false), r.int32s(false)
		p.Leader, p.LeaderEpoch, p.PartitionEpoch = r.int32(), r.int32(), r.int32()
		if rec.Version >= 1 {
			r.skipArray(16) // Directories
		}
		r.tagged(nil) // LeaderRecoveryState, ELR, LastKnownElr
		rec.Partition = p
	case KeyPartitionChange:
		c := &PartitionChangeRecord{PartitionID: r.int32(), TopicID: r.uuid(), Leader: NoLeaderChange}
		r.tagged(func(tag uint64, f *reader) {
			switch tag {
			case 0:
				c.ISR = f.int32s(true)
			case 1:
				c.Leader = f.int32()
			case 2:
				c.Replicas = f.int32s(true)
			}
		})
		rec.PartitionChange = c
	case KeyConfig:
		c := &ConfigRecord{ResourceType: r.int8(), ResourceName: r.str(), Name: r.str()}
		c.Value = r.compactString(true)
		r.tagged(nil)
		rec.Config = c
	case KeyRemoveTopic:
		rec.RemoveTopic = &RemoveTopicRecord{TopicID: r.uuid()}
		r.tagged(nil)
	case KeyRegisterBroker:
		br := &RegisterBrokerRecord{BrokerID: r.int32()}
		if rec.Version >= 2 {
			r.bool() // IsMigratingZkBroker
		}
		r.uuid() // IncarnationId
		br.BrokerEpoch = r.int64()
		for n := r.uvarint32() - 1; n > 0 && r.err == nil; n-- { // EndPoints
			r.str()
			r.str()
			r.take(2) // Port
			r.int16() // SecurityProtocol
			r.tagged(nil)
		}
		for n := r.uvarint32() - 1; n > 0 && r.err == nil; n-- { // Features
			r.str()
			r.int16()
			r.int16()
			r.tagged(nil)
		}
		br.Rack = r.compactString(true)
		br.Fenced = r.bool()
		if rec.Version >= 1 {
			r.bool() // InControlledShutdown
		}
		r.tagged(nil) // LogDirs (v3+)
		rec.RegisterBroker = br
	}
	if r.err == nil && r.pos != len(b) {
		r.fail(fmt.Sprintf("%d byte(s) of garbage after the record", len(b)-r.pos))
	}
	if r.err != nil {
		return Record{}, &DecodeError{APIKey: rec.APIKey, Pos: r.pos, Reason: r.err.Error()}
	}
	return rec, nil
}
