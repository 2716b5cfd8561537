package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxEncodedBytes caps the size of an encoded manifest or sub-manifest.
// Decoding refuses larger input before parsing it, so a hostile object cannot
// make a reader allocate without bound. With the default Policy a root stays
// well under 1 MiB for millions of segments.
const MaxEncodedBytes = 64 << 20

// wireRoot and wireSub are the encoded manifests, in the field order of
// the encoding; DecodeRoot and DecodeSub read their segments as
// wireSegment.
type wireRoot[S any] struct {
	Version        int64     `json:"version"`
	Kind           string    `json:"kind"`
	Topic          string    `json:"topic"`
	Partition      int32     `json:"partition"`
	TopicID        string    `json:"topic_id"`
	Generation     int64     `json:"generation"`
	LogStartOffset int64     `json:"log_start_offset"`
	Sealed         []SubRef  `json:"sealed"`
	Segments       []S       `json:"segments"`
	Gaps           []Gap     `json:"gaps,omitempty"`
	OpenTxns       []OpenTxn `json:"open_txns,omitempty"`
}

type wireSub[S any] struct {
	Version   int64  `json:"version"`
	Kind      string `json:"kind"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	TopicID   string `json:"topic_id"`
	Segments  []S    `json:"segments"`
}

// wireSegment decodes a Segment and keeps whether each of its objects
// spelled out an "offset": only an index section of version 2 has one, and
// writers omit it when it is 0, so an "offset" anywhere else — in version
// 1, on the .log, or an explicit 0 — is not the format.
type wireSegment struct {
	Segment
	Log       wireObject  `json:"log"`
	Index     wireObject  `json:"index"`
	TimeIndex wireObject  `json:"time_index"`
	TxnIndex  *wireObject `json:"txn_index,omitempty"`
}

type wireObject struct {
	Key      string   `json:"key"`
	Offset   *int64   `json:"offset"`
	Size     int64    `json:"size"`
	Checksum Checksum `json:"checksum"`
}

// segments converts decoded segments of a version-ver manifest, refusing
// an "offset" where the format has none, then segments that need a newer
// version than ver.
func segments(ver int64, ws []wireSegment) ([]Segment, error) {
	out := make([]Segment, len(ws))
	for i, w := range ws {
		s := w.Segment
		for _, x := range []struct {
			name string
			w    *wireObject
		}{{"log", &w.Log}, {"index", &w.Index}, {"time_index", &w.TimeIndex}, {"txn_index", w.TxnIndex}} {
			if x.w == nil || x.w.Offset == nil {
				continue
			}
			switch {
			case ver < 2:
				return nil, fmt.Errorf("segment %d: %s has an \"offset\" (a section of an indexes object), which version %d does not have", s.BaseOffset, x.name, ver)
			case x.name == "log":
				return nil, fmt.Errorf("segment %d: log has an \"offset\"; only index sections have one", s.BaseOffset)
			case *x.w.Offset == 0:
				return nil, fmt.Errorf("segment %d: %s has \"offset\": 0, which is written by leaving it out", s.BaseOffset, x.name)
			}
		}
		s.Log, s.Index, s.TimeIndex = w.Log.object(), w.Index.object(), w.TimeIndex.object()
		s.TxnIndex = nil
		if w.TxnIndex != nil {
			t := w.TxnIndex.object()
			s.TxnIndex = &t
		}
		out[i] = s
	}
	if err := checkVersion(ver, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (w wireObject) object() Object {
	o := Object{Key: w.Key, Size: w.Size, Checksum: w.Checksum}
	if w.Offset != nil {
		o.Offset = *w.Offset
	}
	return o
}

// EncodeRoot validates m and encodes it: UTF-8 JSON, fields in a fixed
// order, one sub reference or segment per line. Equal manifests encode to
// equal bytes.
func EncodeRoot(m *Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":%d,"kind":%q,"topic":%q,"partition":%d,%s"generation":%d,"log_start_offset":%d,`,
		VersionOf(m.Segments), KindPartition, m.Topic, m.Partition, topicIDField(m.TopicID), m.Generation, m.LogStartOffset)
	b.WriteString("\n\"sealed\":[")
	if err := writeLines(&b, m.Sealed); err != nil {
		return nil, err
	}
	b.WriteString("],\n\"segments\":[")
	if err := writeLines(&b, m.Segments); err != nil {
		return nil, err
	}
	b.WriteString("]")
	if len(m.Gaps) > 0 {
		// Only when there is one: a manifest without gaps is byte for byte
		// what earlier releases wrote (their strict decoder refuses the field).
		b.WriteString(",\n\"gaps\":[")
		if err := writeLines(&b, m.Gaps); err != nil {
			return nil, err
		}
		b.WriteString("]")
	}
	if len(m.OpenTxns) > 0 {
		// Only when there is one, as gaps.
		b.WriteString(",\n\"open_txns\":[")
		if err := writeLines(&b, m.OpenTxns); err != nil {
			return nil, err
		}
		b.WriteString("]")
	}
	b.WriteString("}\n")
	if b.Len() > MaxEncodedBytes {
		return nil, fmt.Errorf("encode manifest: %d bytes exceeds the %d-byte limit", b.Len(), MaxEncodedBytes)
	}
	return b.Bytes(), nil
}

// EncodeSub validates s and encodes it like EncodeRoot.
func EncodeSub(s *SubManifest) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("encode sub-manifest: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":%d,"kind":%q,"topic":%q,"partition":%d,%s`,
		VersionOf(s.Segments), KindSegments, s.Topic, s.Partition, topicIDField(s.TopicID))
	b.WriteString("\n\"segments\":[")
	if err := writeLines(&b, s.Segments); err != nil {
		return nil, err
	}
	b.WriteString("]}\n")
	if b.Len() > MaxEncodedBytes {
		return nil, fmt.Errorf("encode sub-manifest: %d bytes exceeds the %d-byte limit", b.Len(), MaxEncodedBytes)
	}
	return b.Bytes(), nil
}

// VersionOf is the format version a manifest listing segs is written in: the
// oldest that can express it, so readers of an older release keep reading
// what does not need the newer format. Version 2 is needed by a segment
// whose indexes are sections of one indexes object.
func VersionOf(segs []Segment) int64 {
	for _, s := range segs {
		if _, _, ok := s.IndexesObject(); ok {
			return 2
		}
	}
	return 1
}

// checkVersion refuses segments that a manifest of version ver cannot hold.
func checkVersion(ver int64, segs []Segment) error {
	if need := VersionOf(segs); need > ver {
		return fmt.Errorf("version %d manifest lists a segment with an indexes object, which needs version %d", ver, need)
	}
	return nil
}

// topicIDField is the encoded "topic_id" field with its comma, or nothing
// for a name-only lineage (whose encoding stays what older releases wrote).
func topicIDField(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf("%q:%q,", "topic_id", id)
}

func writeLines[T any](b *bytes.Buffer, items []T) error {
	for i := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		enc, err := json.Marshal(&items[i])
		if err != nil {
			return fmt.Errorf("encode manifest: %w", err)
		}
		b.Write(enc)
	}
	if len(items) > 0 {
		b.WriteByte('\n')
	}
	return nil
}

// DecodeRoot decodes and validates the root manifest stored at key. The key
// must be ManifestKey of the manifest's own topic and partition; its prefix
// becomes Manifest.Prefix. Corrupt input is a *CorruptManifestError; a newer
// format version is an *UnsupportedVersionError.
func DecodeRoot(key string, data []byte) (*Manifest, error) {
	var w wireRoot[wireSegment]
	ver, err := decode(key, data, KindPartition, &w)
	if err != nil {
		return nil, err
	}
	k, segs, err := ownSegments(key, KeyRoot, ver, w.Segments, w.Topic, w.Partition, w.TopicID)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Prefix: k.Prefix, Topic: w.Topic, Partition: w.Partition, TopicID: w.TopicID, Generation: w.Generation,
		LogStartOffset: w.LogStartOffset, Sealed: w.Sealed, Segments: segs, Gaps: w.Gaps, OpenTxns: w.OpenTxns}
	if err := m.Validate(); err != nil {
		return nil, withKey(key, err)
	}
	m.idx = buildIndex(m.Sealed, m.Segments)
	return m, nil
}

// ownSegments converts a decoded manifest's segments and checks that key,
// of type typ, names the partition the manifest says it holds; either
// failing is a *CorruptManifestError.
func ownSegments(key string, typ KeyType, ver int64, ws []wireSegment, topic string, partition int32, topicID string) (Key, []Segment, error) {
	segs, err := segments(ver, ws)
	if err != nil {
		return Key{}, nil, &CorruptManifestError{Key: key, Reason: err.Error()}
	}
	k, err := ParseKey(key)
	if err != nil || k.Type != typ || k.Topic != topic || k.Partition != partition || k.TopicID != topicID {
		return Key{}, nil, &CorruptManifestError{Key: key, Reason: fmt.Sprintf(
			"holds topic %q partition %d topic id %q, which is not the partition its key names", topic, partition, topicID)}
	}
	return k, segs, nil
}

// DecodeSub decodes and validates the sub-manifest stored at key. Callers
// holding a SubRef should use LoadSub, which also checks the bytes against
// the reference.
func DecodeSub(key string, data []byte) (*SubManifest, error) {
	var w wireSub[wireSegment]
	ver, err := decode(key, data, KindSegments, &w)
	if err != nil {
		return nil, err
	}
	k, segs, err := ownSegments(key, KeySub, ver, w.Segments, w.Topic, w.Partition, w.TopicID)
	if err != nil {
		return nil, err
	}
	s := &SubManifest{Prefix: k.Prefix, Topic: w.Topic, Partition: w.Partition, TopicID: w.TopicID, Segments: segs}
	if err := s.Validate(); err != nil {
		return nil, withKey(key, err)
	}
	if first, last := s.Segments[0].BaseOffset, s.Segments[len(s.Segments)-1].LastOffset; first != k.BaseOffset || last != k.LastOffset {
		return nil, &CorruptManifestError{Key: key, Reason: fmt.Sprintf(
			"segments cover [%d, %d], the key names [%d, %d]", first, last, k.BaseOffset, k.LastOffset)}
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:subSumDigits/2]) != k.SumPrefix {
		return nil, &CorruptManifestError{Key: key, Reason: "content does not match the hash in its key"}
	}
	s.idx = buildIndex(nil, s.Segments)
	return s, nil
}

func withKey(key string, err error) error {
	var ce *CorruptManifestError
	if errors.As(err, &ce) {
		return &CorruptManifestError{Key: key, Reason: ce.Reason}
	}
	return &CorruptManifestError{Key: key, Reason: err.Error()}
}

// decode checks size, version and kind, then decodes strictly: unknown
// fields, trailing data and wrong types are errors. It returns the version.
func decode(key string, data []byte, kind string, v any) (int64, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptManifestError{Key: key, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxEncodedBytes {
		return 0, corrupt("%d bytes exceeds the %d-byte limit", len(data), MaxEncodedBytes)
	}
	// Version first, leniently, so a newer format is refused as such rather
	// than reported as unknown fields.
	var head struct {
		Version json.RawMessage `json:"version"`
		Kind    *string         `json:"kind"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&head); err != nil {
		return 0, corrupt("not a JSON object: %v%s", err, jsonAt(err))
	}
	if head.Version == nil {
		return 0, corrupt("no \"version\" field")
	}
	ver, err := strconv.ParseInt(string(head.Version), 10, 64)
	if err != nil {
		return 0, corrupt("version %s is not an integer", truncate(string(head.Version)))
	}
	if ver > Version {
		return 0, &UnsupportedVersionError{Key: key, Version: ver}
	}
	if ver < 1 {
		return 0, corrupt("unknown version %d", ver)
	}
	if head.Kind == nil || *head.Kind != kind {
		got := "none"
		if head.Kind != nil {
			got = fmt.Sprintf("%q", truncate(*head.Kind))
		}
		return 0, corrupt("kind is %s, want %q", got, kind)
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return 0, corrupt("%v%s", err, jsonAt(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, corrupt("data after the JSON object")
	}
	return ver, nil
}

// jsonAt names the byte position of a JSON syntax or type error, so the
// damage can be found in a large manifest; "" for other errors.
func jsonAt(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf(" (at byte %d)", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf(" (at byte %d)", te.Offset)
	}
	return ""
}

// ReadLimited reads a whole manifest object from r, refusing more than
// MaxEncodedBytes with a *CorruptManifestError naming key.
func ReadLimited(key string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxEncodedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	if len(data) > MaxEncodedBytes {
		return nil, &CorruptManifestError{Key: key, Reason: fmt.Sprintf("larger than the %d-byte limit", MaxEncodedBytes)}
	}
	return data, nil
}
