package localtier

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tiered/tiered/localtier/vfs"
)

// PartitionMetadataFile is the file Kafka 2.8+ writes in every partition
// directory: the format version and the partition's topic ID.
const PartitionMetadataFile = "partition.metadata"

// TopicID is a Kafka topic ID (org.apache.kafka.common.Uuid): 16 bytes,
// written as 22 characters of URL-safe base64 without padding. The zero
// value is Kafka's Uuid.ZERO_UUID: no ID (brokers before 2.8, or a topic
// whose ID is not known).
type TopicID [16]byte

// NewTopicID returns a random topic ID as Kafka's Uuid.randomUuid does: a
// version 4 UUID, never the zero UUID, Kafka's metadata topic ID
// (AAAAAAAAAAAAAAAAAAAAAQ) nor one whose string form starts with '-'
// (which command-line tools would take for a flag).
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])   // crypto/rand.Read never fails (Go 1.24+)
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // IETF variant
		if s := id.String(); s[0] != '-' && s != "AAAAAAAAAAAAAAAAAAAAAQ" {
			return id
		}
	}
}

// StringOrEmpty is id's string form, "" for the zero ID (a topic without
// one), as the bucket's lineages and Kafka's answers name it.
func (id TopicID) StringOrEmpty() string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

// IsZero reports whether id is the zero UUID.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String renders id as Kafka does: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText implements encoding.TextMarshaler (the JSON form is the string).
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	v, err := ParseTopicID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseTopicID parses Kafka's string form of a topic ID.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 22 {
		return id, fmt.Errorf("parse topic id %q: want 22 characters of URL-safe base64, have %d", s, len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("parse topic id %q: not URL-safe base64 of 16 bytes", s)
	}
	copy(id[:], b)
	return id, nil
}

// PartitionMetadataError is a partition.metadata file that cannot be read
// as Kafka writes it.
type PartitionMetadataError struct {
	Path   string
	Line   int // 1-based; 0 for the whole file
	Reason string
}

func (e *PartitionMetadataError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Reason)
}

// maxPartitionMetadataBytes bounds the file read: Kafka's is about 40 bytes.
const maxPartitionMetadataBytes = 4096

// ReadPartitionMetadata reads dir/partition.metadata and returns its topic
// ID. A missing file (a broker before 2.8, or a directory tiered made) is
// the zero TopicID and no error; a file that is present but malformed is a
// *PartitionMetadataError. Kafka's reader accepts exactly "version: 0" then
// "topic_id: <id>"; this one also tolerates a trailing newline and
// surrounding spaces.
func ReadPartitionMetadata(fsys vfs.FS, dir string) (TopicID, error) {
	path := filepath.Join(dir, PartitionMetadataFile)
	fi, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return TopicID{}, nil
	}
	if err != nil {
		return TopicID{}, fmt.Errorf("read partition metadata: %w", err)
	}
	if fi.Size() > maxPartitionMetadataBytes {
		return TopicID{}, &PartitionMetadataError{Path: path, Reason: fmt.Sprintf("%d bytes; a partition.metadata file is under %d", fi.Size(), maxPartitionMetadataBytes)}
	}
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return TopicID{}, nil
	}
	if err != nil {
		return TopicID{}, fmt.Errorf("read partition metadata: %w", err)
	}
	return ParsePartitionMetadata(path, b)
}

// ParsePartitionMetadata parses the bytes of a partition.metadata file
// (path names it in errors).
func ParsePartitionMetadata(path string, b []byte) (TopicID, error) {
	lines := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
	if len(lines) != 2 {
		return TopicID{}, &PartitionMetadataError{Path: path, Reason: fmt.Sprintf("%d lines; want 2 (version, topic_id)", len(lines))}
	}
	field := func(n int, key string) (string, error) {
		k, v, ok := strings.Cut(strings.TrimSpace(lines[n]), ":")
		if !ok || strings.TrimSpace(k) != key {
			return "", &PartitionMetadataError{Path: path, Line: n + 1, Reason: fmt.Sprintf("want %q, have %q", key+": ...", lines[n])}
		}
		return strings.TrimSpace(v), nil
	}
	ver, err := field(0, "version")
	if err != nil {
		return TopicID{}, err
	}
	if ver != "0" {
		return TopicID{}, &PartitionMetadataError{Path: path, Line: 1, Reason: fmt.Sprintf("version %q; this build reads version 0", ver)}
	}
	s, err := field(1, "topic_id")
	if err != nil {
		return TopicID{}, err
	}
	id, err := ParseTopicID(s)
	if err != nil {
		return TopicID{}, &PartitionMetadataError{Path: path, Line: 2, Reason: err.Error()}
	}
	return id, nil
}

// WritePartitionMetadata writes dir/partition.metadata as a Kafka broker
// does, durably (tmp, fsync, rename, fsync dir).
func WritePartitionMetadata(fsys vfs.FS, dir string, id TopicID) error {
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, PartitionMetadataFile), []byte("version: 0\ntopic_id: "+id.String())); err != nil {
		return fmt.Errorf("write partition metadata: %w", err)
	}
	return nil
}

// TopicID reads the topic ID of a live partition of the broker's log dir
// from its partition.metadata (the zero TopicID when the file is absent).
func (v *BrokerView) TopicID(topic string, partition int32) (TopicID, error) {
	dir, err := v.partitionDir(topic, partition)
	if err != nil {
		return TopicID{}, err
	}
	return ReadPartitionMetadata(v.fs, dir)
}
