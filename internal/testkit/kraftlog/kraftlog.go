// Package kraftlog writes KRaft metadata logs for tests: a __cluster_metadata-0 directory
// with log segments of v2 record batches holding metadata records (localtier/kraft's
// framing: frame version, api key, version, flexible body), control batches, and snapshots
// (<20-digit end offset>-<10-digit epoch>.checkpoint) of an image's state. The sidecar's
// tests use it to fake a live broker's metadata log; localtier/kraft's to read generated
// logs back.
package kraftlog

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// Encode returns the bytes of one metadata record (the known types of kraft.Record; the
// version is Record.Version, which must be one kraft decodes).
func Encode(r kraft.Record) ([]byte, error) {
	b := binary.AppendUvarint(nil, kraft.FrameVersion)
	b = binary.AppendUvarint(b, uint64(r.APIKey))
	b = binary.AppendUvarint(b, uint64(r.Version))
	switch {
	case r.Topic != nil:
		b = str(b, r.Topic.Name)
		b = append(b, r.Topic.TopicID[:]...)
		b = noTags(b)
	case r.Partition != nil:
		p := r.Partition
		b = i32(b, p.PartitionID)
		b = append(b, p.TopicID[:]...)
		b = i32s(b, p.Replicas, false)
		b = i32s(b, p.ISR, false)
		b = i32s(b, p.RemovingReplicas, false)
		b = i32s(b, p.AddingReplicas, false)
		b = i32(b, p.Leader)
		b = i32(b, p.LeaderEpoch)
		b = i32(b, p.PartitionEpoch)
		if r.Version >= 1 {
			b = binary.AppendUvarint(b, uint64(len(p.Replicas)+1)) // Directories: one per replica
			for range p.Replicas {
				b = append(b, make([]byte, 16)...)
			}
		}
		b = noTags(b)
	case r.PartitionChange != nil:
		c := r.PartitionChange
		b = i32(b, c.PartitionID)
		b = append(b, c.TopicID[:]...)
		type field struct {
			tag  uint64
			data []byte
		}
		var fs []field
		if c.ISR != nil {
			fs = append(fs, field{0, i32s(nil, c.ISR, true)})
		}
		if c.Leader != kraft.NoLeaderChange {
			fs = append(fs, field{1, i32(nil, c.Leader)})
		}
		if c.Replicas != nil {
			fs = append(fs, field{2, i32s(nil, c.Replicas, true)})
		}
		b = binary.AppendUvarint(b, uint64(len(fs)))
		for _, f := range fs {
			b = binary.AppendUvarint(b, f.tag)
			b = binary.AppendUvarint(b, uint64(len(f.data)))
			b = append(b, f.data...)
		}
	case r.Config != nil:
		c := r.Config
		b = append(b, byte(c.ResourceType))
		b = str(b, c.ResourceName)
		b = str(b, c.Name)
		if c.Value == nil {
			b = append(b, 0)
		} else {
			b = str(b, *c.Value)
		}
		b = noTags(b)
	case r.RemoveTopic != nil:
		b = append(b, r.RemoveTopic.TopicID[:]...)
		b = noTags(b)
	case r.RegisterBroker != nil:
		br := r.RegisterBroker
		b = i32(b, br.BrokerID)
		if r.Version >= 2 {
			b = append(b, 0)
		}
		b = append(b, make([]byte, 16)...) // IncarnationId
		b = binary.BigEndian.AppendUint64(b, uint64(br.BrokerEpoch))
		b = binary.AppendUvarint(b, 2) // one endpoint
		b = str(b, "PLAINTEXT")
		b = str(b, "localhost")
		b = binary.BigEndian.AppendUint16(b, 9092)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = noTags(b)
		b = binary.AppendUvarint(b, 1) // no features
		if br.Rack == nil {
			b = append(b, 0)
		} else {
			b = str(b, *br.Rack)
		}
		b = append(b, boolByte(br.Fenced))
		if r.Version >= 1 {
			b = append(b, 0)
		}
		b = noTags(b)
	default:
		return nil, fmt.Errorf("encode metadata record: api key %d has no body to encode", r.APIKey)
	}
	return b, nil
}

func str(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)+1))
	return append(b, s...)
}

func i32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

func i32s(b []byte, vs []int32, nullable bool) []byte {
	if vs == nil && nullable {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(vs)+1))
	for _, v := range vs {
		b = i32(b, v)
	}
	return b
}

func noTags(b []byte) []byte { return append(b, 0) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Constructors of the records, at the newest versions kraft reads.

func Topic(name string, id kraft.TopicID) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyTopic, Topic: &kraft.TopicRecord{Name: name, TopicID: id}}
}

func Partition(id kraft.TopicID, partition int32, leader, leaderEpoch int32, replicas ...int32) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyPartition, Version: 1, Partition: &kraft.PartitionRecord{PartitionID: partition, TopicID: id,
		Replicas: replicas, ISR: replicas, RemovingReplicas: []int32{}, AddingReplicas: []int32{}, Leader: leader, LeaderEpoch: leaderEpoch}}
}

// LeaderChange moves a partition's leader (a PartitionChangeRecord with only Leader set).
func LeaderChange(id kraft.TopicID, partition, leader int32) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyPartitionChange, PartitionChange: &kraft.PartitionChangeRecord{PartitionID: partition, TopicID: id, Leader: leader}}
}

// TopicConfig sets (value non-nil) or deletes a topic config.
func TopicConfig(topic, name string, value *string) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyConfig, Config: &kraft.ConfigRecord{ResourceType: kraft.ResourceTopic, ResourceName: topic, Name: name, Value: value}}
}

// BrokerConfig sets (value non-nil) or deletes a broker config; broker "" is the
// cluster-wide default.
func BrokerConfig(broker, name string, value *string) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyConfig, Config: &kraft.ConfigRecord{ResourceType: kraft.ResourceBroker, ResourceName: broker, Name: name, Value: value}}
}

func RemoveTopic(id kraft.TopicID) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyRemoveTopic, RemoveTopic: &kraft.RemoveTopicRecord{TopicID: id}}
}

func RegisterBroker(id int32, epoch int64) kraft.Record {
	return kraft.Record{APIKey: kraft.KeyRegisterBroker, Version: 3, RegisterBroker: &kraft.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: epoch}}
}

// Value returns p's address, for config values.
func Value(s string) *string { return &s }

// ImageRecords renders the state of im as the records of a snapshot: brokers, broker
// configs, then per topic its configs, TopicRecord and PartitionRecords (sorted, so equal
// images give equal snapshots).
func ImageRecords(im *kraft.Image) []kraft.Record {
	var out []kraft.Record
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		b := im.Brokers[id]
		r := RegisterBroker(b.ID, b.Epoch)
		r.RegisterBroker.Fenced = b.Fenced
		if b.Rack != "" {
			r.RegisterBroker.Rack = Value(b.Rack)
		}
		out = append(out, r)
	}
	for _, res := range sortedKeys(im.BrokerConfigs) {
		for _, k := range sortedKeys(im.BrokerConfigs[res]) {
			out = append(out, BrokerConfig(res, k, Value(im.BrokerConfigs[res][k])))
		}
	}
	for _, name := range im.Names() {
		t := im.Topics[name]
		out = append(out, Topic(name, t.ID))
		for _, k := range sortedKeys(t.Configs) {
			out = append(out, TopicConfig(name, k, Value(t.Configs[k])))
		}
		for _, p := range t.PartitionIDs() {
			pp := t.Partitions[p]
			r := Partition(t.ID, p, pp.Leader, pp.LeaderEpoch, pp.Replicas...)
			r.Partition.ISR = pp.ISR
			r.Partition.PartitionEpoch = pp.PartitionEpoch
			out = append(out, r)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Log writes a metadata partition directory. Not safe for concurrent use.
type Log struct {
	Dir   string // the __cluster_metadata-0 directory
	Epoch int32  // leader epoch stamped on batches and snapshot names
	// Codec compresses the batches (default none).
	Codec codec.Codec
	next  int64
	seg   string // current segment file
	enc   record.Encoder
	ts    int64
}

// Create makes logDir/__cluster_metadata-0 with one empty segment at offset 0.
func Create(logDir string) (*Log, error) {
	dir := filepath.Join(logDir, kraft.MetadataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{Dir: dir, Epoch: 1, ts: 1_700_000_000_000}
	return l, l.Roll()
}

// Next is the offset the next record gets.
func (l *Log) Next() int64 { return l.next }

// Roll starts a new segment at Next.
func (l *Log) Roll() error {
	l.seg = filepath.Join(l.Dir, fmt.Sprintf("%020d.log", l.next))
	f, err := os.OpenFile(l.seg, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// Append writes recs as one batch at the end of the current segment and returns the offset
// of the first.
func (l *Log) Append(recs ...kraft.Record) (int64, error) {
	vals := make([][]byte, len(recs))
	for i, r := range recs {
		v, err := Encode(r)
		if err != nil {
			return 0, err
		}
		vals[i] = v
	}
	return l.appendValues(false, vals)
}

// AppendControl writes a control batch (a LeaderChange record: what a new quorum leader
// writes first), which readers skip.
func (l *Log) AppendControl() (int64, error) {
	key := binary.BigEndian.AppendUint16(nil, 0)
	key = binary.BigEndian.AppendUint16(key, uint16(record.ControlLeaderChange))
	base := l.next
	l.ts++
	spec := record.NewBatchSpec(base, codec.None)
	spec.Control, spec.PartitionLeaderEpoch = true, l.Epoch
	b, err := l.enc.AppendBatch(nil, spec, []record.Record{{Offset: base, Timestamp: l.ts, Key: key, Value: []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0}}})
	if err != nil {
		return 0, err
	}
	l.next++
	return base, appendFile(l.seg, b)
}

// AppendRaw writes one record whose value is v as it is (for corruption tests).
func (l *Log) AppendRaw(v []byte) (int64, error) { return l.appendValues(false, [][]byte{v}) }

func (l *Log) appendValues(control bool, vals [][]byte) (int64, error) {
	base := l.next
	recs := make([]record.Record, len(vals))
	for i, v := range vals {
		l.ts++
		recs[i] = record.Record{Offset: base + int64(i), Timestamp: l.ts, Value: v}
	}
	spec := record.NewBatchSpec(base, l.Codec)
	spec.Control, spec.PartitionLeaderEpoch = control, l.Epoch
	b, err := l.enc.AppendBatch(nil, spec, recs)
	if err != nil {
		return 0, err
	}
	l.next += int64(len(vals))
	return base, appendFile(l.seg, b)
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Snapshot writes <Next>-<Epoch>.checkpoint holding recs (between a snapshot header and
// footer control batch, as Kafka writes them) and returns its path. Kafka's snapshot of the
// log so far is Snapshot(ImageRecords(image read from the log)).
func (l *Log) Snapshot(recs []kraft.Record) (string, error) {
	path := filepath.Join(l.Dir, fmt.Sprintf("%020d-%010d%s", l.next, l.Epoch, kraft.SnapshotSuffix))
	var out []byte
	ctl := func(typ int16, off int64) error {
		key := binary.BigEndian.AppendUint16(nil, 0)
		key = binary.BigEndian.AppendUint16(key, uint16(typ))
		spec := record.NewBatchSpec(off, codec.None)
		spec.Control, spec.PartitionLeaderEpoch = true, l.Epoch
		var err error
		out, err = l.enc.AppendBatch(out, spec, []record.Record{{Offset: off, Timestamp: l.ts, Key: key, Value: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}})
		return err
	}
	if err := ctl(record.ControlSnapshotHeader, 0); err != nil {
		return "", err
	}
	off := int64(1)
	for i := 0; i < len(recs); i += 10 { // batches of up to 10 records
		var batch []record.Record
		for _, r := range recs[i:min(i+10, len(recs))] {
			v, err := Encode(r)
			if err != nil {
				return "", err
			}
			batch = append(batch, record.Record{Offset: off, Timestamp: l.ts, Value: v})
			off++
		}
		spec := record.NewBatchSpec(batch[0].Offset, l.Codec)
		spec.PartitionLeaderEpoch = l.Epoch
		var err error
		if out, err = l.enc.AppendBatch(out, spec, batch); err != nil {
			return "", err
		}
	}
	if err := ctl(record.ControlSnapshotFooter, off); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, out, 0o644)
}

// DeleteSegmentsBefore removes the segments that end at or before offset (Kafka deletes the
// metadata log below its latest snapshot), keeping the current one.
func (l *Log) DeleteSegmentsBefore(offset int64) error {
	_, _, segs, err := kraft.Files(vfs.Default, l.Dir)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(segs); i++ {
		next, err := strconv.ParseInt(segs[i+1][:20], 10, 64)
		if err != nil {
			return err
		}
		if next <= offset && filepath.Join(l.Dir, segs[i]) != l.seg {
			if err := os.Remove(filepath.Join(l.Dir, segs[i])); err != nil {
				return err
			}
		}
	}
	return nil
}
