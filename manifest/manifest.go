package manifest

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Version is the newest manifest format version this build reads and
// writes. Version 2 adds the indexes object (an Object with an offset: a
// section of a larger object); a manifest that does not use it is still
// written as version 1, the oldest that can express it (VersionOf).
const Version = 2

// Values of the encoded "kind" field.
const (
	KindPartition = "partition" // a root manifest
	KindSegments  = "segments"  // a sealed sub-manifest
)

// MaxSegmentSpan is the most offsets past its base offset a segment can
// hold: Kafka's indexes store offsets relative to the base in 32 bits, so
// a broker rolls a segment before its last offset exceeds base + 2^31-1
// (and the log cleaner groups segments only within that range). A
// manifest claiming more is corrupt: its last offset would become a
// partition's high watermark.
const MaxSegmentSpan = math.MaxInt32

// UnknownCount is Segment.RecordCount when the uploader did not count.
const UnknownCount = -1

// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: a segment of legacy
// messages without timestamps has min and max timestamp -1.
const NoTimestamp = -1

// maxUploaderLen bounds Segment.Uploader.
const maxUploaderLen = 256

// EpochEntry is one leader epoch in a segment: the leader of Epoch wrote the
// segment's offsets from StartOffset up to the next entry's StartOffset.
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// Object is one object of a segment, or one section of an object: an index
// inside the segment's indexes object (FileIndexes) is the Size bytes at
// Offset of the object at Key. Checksum is over those Size bytes.
type Object struct {
	Key      string   `json:"key"`
	Offset   int64    `json:"offset,omitempty"` // version 2; 0 for a whole object
	Size     int64    `json:"size"`
	Checksum Checksum `json:"checksum"`
}

// Segment is one committed segment: a Kafka segment's .log and index files,
// uploaded by one attempt. It serves offsets [BaseOffset, LastOffset]; a
// compacted segment may hold fewer records than that range.
type Segment struct {
	BaseOffset int64 `json:"base_offset"` // the .log's name; index entries are relative to it
	LastOffset int64 `json:"last_offset"` // last offset of the last batch, inclusive
	// RecordCount is the number of records, or UnknownCount.
	RecordCount int64 `json:"record_count"`
	// MinTimestamp and MaxTimestamp are over the segment's batches' max
	// timestamps as Kafka keeps them (NoTimestamp without timestamps).
	MinTimestamp int64 `json:"min_timestamp"`
	MaxTimestamp int64 `json:"max_timestamp"`
	// LeaderEpochs covering the segment, from the leader-epoch checkpoint
	// (EpochsForSegment); empty when unknown.
	LeaderEpochs []EpochEntry `json:"leader_epochs"`
	Compacted    bool         `json:"compacted"`
	Log          Object       `json:"log"`
	Index        Object       `json:"index"`
	TimeIndex    Object       `json:"time_index"`
	TxnIndex     *Object      `json:"txn_index,omitempty"` // only when the segment has one
	UploadTimeMs int64        `json:"upload_time_ms"`      // Unix milliseconds
	Uploader     string       `json:"uploader"`            // id of the uploading process
	AttemptID    string       `json:"attempt_id"`          // names the objects' keys
}

// Section reports whether o is a section of a segment's indexes object
// (FileIndexes) rather than a whole object: read it by range.
func (o Object) Section() bool { return strings.HasSuffix(o.Key, "."+FileIndexes.Ext()) }

// NextOffset is LastOffset + 1.
func (s Segment) NextOffset() int64 { return s.LastOffset + 1 }

// Size is the size of the .log object.
func (s Segment) Size() int64 { return s.Log.Size }

// Objects lists the segment's objects: log, index, time index and, when
// present, transaction index. The indexes may be sections of one object
// (Indexed), and then share a key.
func (s Segment) Objects() []Object {
	objs := []Object{s.Log, s.Index, s.TimeIndex}
	if s.TxnIndex != nil {
		objs = append(objs, *s.TxnIndex)
	}
	return objs
}

// Keys lists the keys of Objects, in their order, a key that several
// objects share (the sections of an indexes object, which are adjacent in
// a valid segment) once.
func (s Segment) Keys() []string {
	objs := s.Objects()
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		if len(keys) == 0 || keys[len(keys)-1] != o.Key {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

// IndexesObject reports whether the segment's indexes are sections of one
// indexes object (FileIndexes, manifest version 2) rather than one object
// each, and if so that object's key and size.
func (s Segment) IndexesObject() (key string, size int64, ok bool) {
	if !s.Index.Section() {
		return "", 0, false
	}
	size = s.Index.Size + s.TimeIndex.Size
	if s.TxnIndex != nil {
		size += s.TxnIndex.Size
	}
	return s.Index.Key, size, true
}

// Validate checks everything about the segment that does not depend on the
// manifest it is in: offsets, counts, timestamps, epochs, sizes, checksums,
// and that its keys are data keys of its base offset and attempt.
func (s Segment) Validate() error {
	_, err := s.validate()
	return err
}

// validate returns the segment's keys' parsed prefix/topic/partition so the
// manifest can check them.
func (s Segment) validate() (Key, error) {
	switch {
	case s.BaseOffset < 0:
		return Key{}, fmt.Errorf("negative base offset %d", s.BaseOffset)
	case s.LastOffset < s.BaseOffset:
		return Key{}, fmt.Errorf("last offset %d below base offset %d", s.LastOffset, s.BaseOffset)
	case s.LastOffset == math.MaxInt64:
		return Key{}, fmt.Errorf("last offset %d leaves no next offset", s.LastOffset)
	case s.LastOffset-s.BaseOffset > MaxSegmentSpan:
		return Key{}, fmt.Errorf("last offset %d is %d offsets past base offset %d, more than a segment can hold (%d)",
			s.LastOffset, s.LastOffset-s.BaseOffset, s.BaseOffset, MaxSegmentSpan)
	case s.RecordCount < UnknownCount:
		return Key{}, fmt.Errorf("record count %d", s.RecordCount)
	case s.RecordCount > s.LastOffset-s.BaseOffset+1:
		return Key{}, fmt.Errorf("record count %d exceeds the %d offsets of [%d, %d]",
			s.RecordCount, s.LastOffset-s.BaseOffset+1, s.BaseOffset, s.LastOffset)
	case s.MinTimestamp < NoTimestamp || s.MaxTimestamp < NoTimestamp:
		return Key{}, fmt.Errorf("timestamps [%d, %d] below -1", s.MinTimestamp, s.MaxTimestamp)
	case s.MinTimestamp > s.MaxTimestamp:
		return Key{}, fmt.Errorf("min timestamp %d above max timestamp %d", s.MinTimestamp, s.MaxTimestamp)
	case s.UploadTimeMs < 0:
		return Key{}, fmt.Errorf("negative upload time %d", s.UploadTimeMs)
	case len(s.Uploader) > maxUploaderLen || !utf8.ValidString(s.Uploader):
		return Key{}, fmt.Errorf("uploader id is longer than %d bytes or not UTF-8", maxUploaderLen)
	}
	if err := validateAttemptID(s.AttemptID); err != nil {
		return Key{}, err
	}
	for i, e := range s.LeaderEpochs {
		switch {
		case e.Epoch < 0:
			return Key{}, fmt.Errorf("negative leader epoch %d", e.Epoch)
		case e.StartOffset < s.BaseOffset || e.StartOffset > s.LastOffset:
			return Key{}, fmt.Errorf("leader epoch %d starts at %d, outside the segment", e.Epoch, e.StartOffset)
		case i > 0 && (e.Epoch <= s.LeaderEpochs[i-1].Epoch || e.StartOffset <= s.LeaderEpochs[i-1].StartOffset):
			return Key{}, fmt.Errorf("leader epochs not strictly increasing at epoch %d", e.Epoch)
		}
	}
	objs := []struct {
		o    *Object
		file FileType
	}{{&s.Log, FileLog}, {&s.Index, FileIndex}, {&s.TimeIndex, FileTimeIndex}, {s.TxnIndex, FileTxnIndex}}
	var owner Key
	// The indexes are either one object each (at offset 0) or, all of
	// them, sections of one indexes object laid back to back in the order
	// above, from offset 0: next is where the next section must start.
	sections, next := false, int64(0)
	for _, x := range objs {
		if x.o == nil {
			continue
		}
		if x.o.Size < 0 || x.file == FileLog && x.o.Size == 0 {
			return Key{}, fmt.Errorf("%s object size %d", x.file, x.o.Size)
		}
		if err := x.o.Checksum.Validate(); err != nil {
			return Key{}, fmt.Errorf("%s object: %w", x.file, err)
		}
		k, err := ParseDataKey(x.o.Key)
		if err != nil {
			return Key{}, err
		}
		if x.file == FileIndex {
			sections = k.File == FileIndexes
		}
		want := x.file
		if sections {
			want = FileIndexes
		}
		if k.File != want || k.BaseOffset != s.BaseOffset || k.AttemptID != s.AttemptID {
			return Key{}, fmt.Errorf("%s object key %q does not name the %s of base offset %d, attempt %s",
				x.file, x.o.Key, want, s.BaseOffset, s.AttemptID)
		}
		switch {
		case sections && x.o.Key != s.Index.Key:
			return Key{}, fmt.Errorf("%s object key %q is not the indexes object %q of the other indexes", x.file, x.o.Key, s.Index.Key)
		case sections && x.o.Offset != next:
			return Key{}, fmt.Errorf("%s section at offset %d of %s, want %d (the indexes lie back to back)", x.file, x.o.Offset, x.o.Key, next)
		case !sections && x.o.Offset != 0:
			return Key{}, fmt.Errorf("%s object has offset %d, but only a section of an indexes object may", x.file, x.o.Offset)
		}
		if sections {
			if x.o.Size > math.MaxInt64-next {
				return Key{}, fmt.Errorf("%s section of %d bytes overflows the indexes object", x.file, x.o.Size)
			}
			next += x.o.Size
		}
		if x.file == FileLog {
			owner = k
		} else if of(k) != of(owner) {
			return Key{}, fmt.Errorf("%s object key %q is not in the log object's partition", x.file, x.o.Key)
		}
	}
	return owner, nil
}

// SubRef is the root's entry for one sealed sub-manifest: where it is, how to
// check it, and a summary of what it holds, so lookups and retention by
// size or time need not read it.
type SubRef struct {
	Key          string   `json:"key"`
	Size         int64    `json:"size"`     // bytes of the encoded sub-manifest
	Checksum     Checksum `json:"checksum"` // SHA-256 of those bytes
	BaseOffset   int64    `json:"base_offset"`
	LastOffset   int64    `json:"last_offset"`
	MinTimestamp int64    `json:"min_timestamp"`
	MaxTimestamp int64    `json:"max_timestamp"`
	Segments     int      `json:"segment_count"`
	LogBytes     int64    `json:"log_bytes"` // sum of the segments' .log sizes
}

// Manifest is a partition's root manifest: the commit point of its remote
// tier. Older segments live in sealed sub-manifests (Sealed, in offset
// order), the newest inline (Segments); every sealed offset is below every
// inline one. Treat a Manifest as immutable: the commit functions return a
// new one.
type Manifest struct {
	// Prefix is the key prefix the manifest lives under. It is not encoded:
	// DecodeRoot takes it from the manifest's own key, and every key in the
	// manifest must be under it.
	Prefix    string
	Topic     string
	Partition int32
	// TopicID is the lineage (Key.TopicID): the topic ID every key of the
	// manifest is under, or "" for a name-only lineage. Encoded as
	// "topic_id" (left out when "").
	TopicID string
	// Generation is incremented by every commit; 0 for a manifest never
	// written.
	Generation int64
	// LogStartOffset is the first offset of the remote log. When Sealed and
	// Segments are empty, it is also the next offset to commit.
	LogStartOffset int64
	Sealed         []SubRef
	Segments       []Segment
	// Gaps are the offset ranges lost before upload (see Gap), in offset
	// order; encoded as "gaps" only when there is one.
	Gaps []Gap
	// OpenTxns are the transactions open at the end of the committed log
	// (NextOffset): transactional batches committed without their commit or
	// abort marker, which lies in a segment not committed yet. Until it is,
	// nobody can tell their records committed from aborted, so a
	// READ_COMMITTED reader stops before the first of them
	// (LastStableOffset). In FirstOffset order; encoded as "open_txns" only
	// when there is one.
	OpenTxns []OpenTxn

	idx *lookupIndex // built by DecodeRoot and the commit functions
}

// OpenTxn is a producer's transaction open at the end of the committed
// log: its first transactional batch not followed by a marker starts at
// FirstOffset.
type OpenTxn struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
}

// maxOpenTxns bounds Manifest.OpenTxns (one per producer).
const maxOpenTxns = 1 << 16

// LastStableOffset is the first offset a READ_COMMITTED reader may not read:
// the first offset of the earliest open transaction, at least the log start,
// or the log end when none is open.
func (m *Manifest) LastStableOffset() int64 {
	end := m.NextOffset()
	lso := end
	for _, t := range m.OpenTxns {
		lso = min(lso, t.FirstOffset)
	}
	return min(max(lso, m.LogStartOffset), end)
}

// SetOpenTxns sets the transactions open at the end of an uncommitted root
// (a Commit's, before it is written), checked as Validate checks them; on
// error the root is left as it was.
func (m *Manifest) SetOpenTxns(open []OpenTxn) error {
	prev := m.OpenTxns
	m.OpenTxns = open
	if err := m.validateOpenTxns(); err != nil {
		m.OpenTxns = prev
		return err
	}
	return nil
}

// validateOpenTxns checks the open transactions are few enough, in order,
// one per producer and below the end of the log.
func (m *Manifest) validateOpenTxns() error {
	if len(m.OpenTxns) > maxOpenTxns {
		return invalidf("%d open transactions, more than %d", len(m.OpenTxns), maxOpenTxns)
	}
	end := m.NextOffset()
	seen := make(map[int64]bool, len(m.OpenTxns))
	for i, t := range m.OpenTxns {
		switch {
		case t.ProducerID < 0:
			return invalidf("open_txns[%d]: negative producer id %d", i, t.ProducerID)
		case seen[t.ProducerID]:
			return invalidf("open_txns[%d]: producer %d listed twice", i, t.ProducerID)
		case t.FirstOffset < 0 || t.FirstOffset >= end:
			return invalidf("open_txns[%d]: first offset %d outside the log [0, %d)", i, t.FirstOffset, end)
		case i > 0 && t.FirstOffset < m.OpenTxns[i-1].FirstOffset:
			return invalidf("open_txns[%d]: first offset %d below the one before (%d)", i, t.FirstOffset, m.OpenTxns[i-1].FirstOffset)
		}
		seen[t.ProducerID] = true
	}
	return nil
}

// SubManifest is a sealed, immutable run of segments.
type SubManifest struct {
	Prefix    string // not encoded; from the key
	Topic     string
	Partition int32
	TopicID   string // as Manifest.TopicID
	Segments  []Segment

	idx *lookupIndex
}

// New returns an empty manifest (generation 0) for a partition whose remote
// log starts at logStart, in the name-only lineage.
func New(prefix, topic string, partition int32, logStart int64) (*Manifest, error) {
	return NewID(prefix, topic, "", partition, logStart)
}

// NewID is New in the lineage of topicID ("" = name-only).
func NewID(prefix, topic, topicID string, partition int32, logStart int64) (*Manifest, error) {
	m := &Manifest{Topic: topic, Partition: partition, TopicID: topicID, LogStartOffset: logStart}
	p, err := NormalizePrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("new manifest: %w", err)
	}
	m.Prefix = p
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("new manifest: %w", err)
	}
	return m, nil
}

// Key is the manifest's own object key.
func (m *Manifest) Key() string {
	k, err := ManifestKeyID(m.Prefix, m.Topic, m.TopicID, m.Partition)
	if err != nil {
		return ""
	}
	return k
}

// Validate checks the whole root: header, every inline segment, every sub
// reference, ordering (sorted, no offset in two segments) and that every key
// belongs to this partition under Prefix. It returns a *CorruptManifestError.
func (m *Manifest) Validate() error {
	o := m.owner()
	if err := validateHeader(o); err != nil {
		return err
	}
	switch {
	case m.Generation < 0:
		return invalidf("negative generation %d", m.Generation)
	case m.LogStartOffset < 0:
		return invalidf("negative log start offset %d", m.LogStartOffset)
	}
	prevLast := int64(-1)
	for i, r := range m.Sealed {
		if err := validateRef(o, r); err != nil {
			return invalidf("sealed[%d]: %v", i, err)
		}
		if r.BaseOffset <= prevLast {
			return invalidf("sealed[%d] [%d, %d] overlaps or precedes the one before (last offset %d)",
				i, r.BaseOffset, r.LastOffset, prevLast)
		}
		prevLast = r.LastOffset
	}
	if err := validateSegments(o, m.Segments, prevLast, "segments"); err != nil {
		return err
	}
	if first, ok := m.firstLast(); ok && m.LogStartOffset > first {
		return invalidf("log start offset %d is above the first segment's last offset %d", m.LogStartOffset, first)
	}
	if err := m.validateGaps(); err != nil {
		return err
	}
	return m.validateOpenTxns()
}

// firstLast is the last offset of the first segment (or of the first sealed
// range, whose first segment's last offset is not known without loading it).
func (m *Manifest) firstLast() (int64, bool) {
	if len(m.Sealed) > 0 {
		return m.Sealed[0].LastOffset, true
	}
	if len(m.Segments) > 0 {
		return m.Segments[0].LastOffset, true
	}
	return 0, false
}

// Validate checks a sub-manifest: header, segments, ordering and keys.
func (s *SubManifest) Validate() error {
	o := s.owner()
	if err := validateHeader(o); err != nil {
		return err
	}
	if len(s.Segments) == 0 {
		return invalidf("sub-manifest has no segments")
	}
	return validateSegments(o, s.Segments, -1, "segments")
}

// lineage names the partition directory every key of a manifest is under.
type lineage struct {
	prefix, topic, topicID string
	partition              int32
}

func (m *Manifest) owner() lineage    { return lineage{m.Prefix, m.Topic, m.TopicID, m.Partition} }
func (s *SubManifest) owner() lineage { return lineage{s.Prefix, s.Topic, s.TopicID, s.Partition} }

// of is the lineage a parsed key is in.
func of(k Key) lineage { return lineage{k.Prefix, k.Topic, k.TopicID, k.Partition} }

func (l lineage) String() string {
	s := l.prefix + "/" + l.topic + "-" + fmt.Sprint(l.partition)
	if l.topicID != "" {
		s += lineageSep + l.topicID
	}
	return s
}

func validateHeader(o lineage) error {
	if p, err := NormalizePrefix(o.prefix); err != nil || p != o.prefix {
		return invalidf("key prefix %q is not normalized", o.prefix)
	}
	if err := ValidateTopic(o.topic); err != nil {
		return invalidf("%v", err)
	}
	if o.partition < 0 {
		return invalidf("negative partition %d", o.partition)
	}
	if o.topicID != "" {
		if err := ValidateTopicID(o.topicID); err != nil {
			return invalidf("%v", err)
		}
	}
	return nil
}

func validateSegments(o lineage, segs []Segment, prevLast int64, field string) error {
	for i := range segs {
		s := &segs[i]
		owner, err := s.validate()
		if err != nil {
			return invalidf("%s[%d] (base offset %d): %v", field, i, s.BaseOffset, err)
		}
		if of(owner) != o {
			return invalidf("%s[%d] (base offset %d): key %q is not under this partition (%s)",
				field, i, s.BaseOffset, s.Log.Key, o)
		}
		if s.BaseOffset <= prevLast {
			return invalidf("%s[%d] [%d, %d] overlaps or precedes the segment before (last offset %d)",
				field, i, s.BaseOffset, s.LastOffset, prevLast)
		}
		prevLast = s.LastOffset
	}
	return nil
}

func validateRef(o lineage, r SubRef) error {
	k, err := ParseKey(r.Key)
	if err != nil {
		return err
	}
	switch {
	case k.Type != KeySub:
		return fmt.Errorf("key %q is not a sub-manifest key", r.Key)
	case of(k) != o:
		return fmt.Errorf("key %q is not under this partition", r.Key)
	case k.BaseOffset != r.BaseOffset || k.LastOffset != r.LastOffset:
		return fmt.Errorf("key %q does not match range [%d, %d]", r.Key, r.BaseOffset, r.LastOffset)
	case r.Checksum.Algorithm() != SHA256:
		return fmt.Errorf("checksum %q is not %s", r.Checksum, SHA256)
	case r.Checksum.Validate() != nil:
		return r.Checksum.Validate()
	case string(r.Checksum[len(SHA256)+1:len(SHA256)+1+subSumDigits]) != k.SumPrefix:
		return fmt.Errorf("key %q does not match checksum %s", r.Key, r.Checksum)
	case r.Size <= 0 || r.Size > MaxEncodedBytes:
		return fmt.Errorf("size %d outside (0, %d]", r.Size, MaxEncodedBytes)
	case r.Segments <= 0 || int64(r.Segments) > r.LastOffset-r.BaseOffset+1:
		return fmt.Errorf("segment count %d for range [%d, %d]", r.Segments, r.BaseOffset, r.LastOffset)
	case r.LogBytes < int64(r.Segments):
		return fmt.Errorf("log bytes %d for %d segments", r.LogBytes, r.Segments)
	case r.MinTimestamp < NoTimestamp || r.MinTimestamp > r.MaxTimestamp:
		return fmt.Errorf("timestamps [%d, %d]", r.MinTimestamp, r.MaxTimestamp)
	}
	return nil
}

// EpochsForSegment returns the leader epochs covering [base, last] from a
// leader-epoch checkpoint (entries ascending): the entry in force at base,
// with its start moved up to base, and every entry starting inside the
// segment. Kafka's tiered storage records a segment's epochs the same way.
func EpochsForSegment(checkpoint []EpochEntry, base, last int64) []EpochEntry {
	var out []EpochEntry
	for _, e := range checkpoint {
		switch {
		case e.StartOffset > last:
			return out
		case e.StartOffset <= base:
			out = append(out[:0], EpochEntry{Epoch: e.Epoch, StartOffset: base})
		default:
			out = append(out, e)
		}
	}
	return out
}
