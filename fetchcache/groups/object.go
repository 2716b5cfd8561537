package groups

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/tiered/tiered/remotetier/objstore"
)

// KeyPrefix is where group objects live in the bucket (below the bucket
// URL's own prefix): docs/format/groups.md.
const KeyPrefix = "groups/"

// FormatVersion is the newest version of the group object this release
// writes and reads: 2, whose offsets may name the topic ID they were
// committed against (Offset.TopicID). An object none of whose offsets
// names one is written as FormatV1, which releases before topic IDs read
// too; both are read.
const FormatVersion = 2

// FormatV1 is the group object before topic IDs: no offset names one.
const FormatV1 = 1

// Group states as Kafka's DescribeGroups and ListGroups name them.
const (
	StateEmpty               = "Empty"
	StatePreparingRebalance  = "PreparingRebalance"
	StateCompletingRebalance = "CompletingRebalance"
	StateStable              = "Stable"
	StateDead                = "Dead"
)

// Object is the durable state of one group: its committed offsets and what
// expiry needs. It is the JSON document at Key(group); docs/format/groups.md
// describes every field.
type Object struct {
	Format int    `json:"format"`
	Group  string `json:"group"`
	// ProtocolType is the protocol type of the group's last generation
	// ("consumer" for Kafka consumers); empty for a group only ever used
	// for commits without membership (assign() with a group.id).
	ProtocolType string `json:"protocol_type,omitempty"`
	// Generation is the last generation the coordinator completed when it
	// wrote the object; a coordinator that loads the object numbers its
	// next generation above it, so a commit of a generation from before a
	// restart or takeover is never taken for a current one.
	Generation int32 `json:"generation"`
	// State is "Empty" (no members: the expiry clock runs from EmptySinceMS),
	// "Stable" (it had members when written) or "Dead" (deleted, or expired:
	// the group does not exist).
	State string `json:"state"`
	// EmptySinceMS is when the group last lost its last member (Unix ms);
	// 0 when it has members or never had any.
	EmptySinceMS int64 `json:"empty_since_ms,omitempty"`
	// UpdatedMS is when the object was written (Unix ms).
	UpdatedMS int64 `json:"updated_ms"`
	// Offsets are the committed offsets, sorted by topic then partition.
	Offsets []Offset `json:"offsets"`
}

// Offset is one committed offset.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// LeaderEpoch is the committed leader epoch, -1 when the client sent none.
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata"`
	// CommitMS is when the commit was accepted (Unix ms).
	CommitMS int64 `json:"commit_ms"`
	// TopicID is the topic ID (Kafka's string form) of the topic's
	// incarnation the offset was committed against: the lineage the fetch
	// service served under the name then (docs/format/topic-object.md).
	// "" when not known (a topic without IDs, one not served at the
	// commit, or an object written before topic IDs): the offset is taken
	// as the topic's current incarnation's. An offset naming another ID
	// than the topic's current one (the topic was deleted, or deleted and
	// re-created) is not served (Lineages).
	TopicID string `json:"topic_id,omitempty"`
}

// Key is the bucket key of group's object: groups/<hash>/<escaped>.json,
// where hash is the first 4 bytes of SHA-256 of the group ID in hex (it
// spreads groups over key ranges) and escaped is the group ID with
// url.PathEscape (a '/' becomes %2F), so every group ID, including the
// empty one, is a valid key.
func Key(group string) string {
	sum := sha256.Sum256([]byte(group))
	return KeyPrefix + hex.EncodeToString(sum[:4]) + "/" + url.PathEscape(group) + ".json"
}

// ValidGroupID reports whether group can have an object: not empty, and
// its key (Key) within the store's key length. A longer id would fail
// every commit against the store, and the client would retry for ever;
// it is answered INVALID_GROUP_ID instead.
func ValidGroupID(group string) bool {
	return group != "" && len(Key(group)) <= objstore.MaxKeyLen
}

// GroupOfKey is the group ID a key of Key names.
func GroupOfKey(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", fmt.Errorf("group key %q: not under %s", key, KeyPrefix)
	}
	hash, name, ok := strings.Cut(rest, "/")
	name, okJSON := strings.CutSuffix(name, ".json")
	if !ok || !okJSON || len(hash) != 8 {
		return "", fmt.Errorf("group key %q: not %s<hash>/<group>.json", key, KeyPrefix)
	}
	g, err := url.PathUnescape(name)
	if err != nil {
		return "", fmt.Errorf("group key %q: %w", key, err)
	}
	if Key(g) != key {
		return "", fmt.Errorf("group key %q: hash does not match group %q", key, g)
	}
	return g, nil
}

// CorruptError is a group object that cannot be read.
type CorruptError struct {
	Key    string
	Offset int64 // byte position of the problem, -1 when not known
	Err    error
}

func (e *CorruptError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("group object %s: corrupt at byte %d: %v", e.Key, e.Offset, e.Err)
	}
	return fmt.Sprintf("group object %s: corrupt: %v", e.Key, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Encode is the object's bytes (offsets sorted). Its format is
// FormatVersion when an offset names a topic ID, FormatV1 otherwise.
func (o *Object) Encode() ([]byte, error) {
	o.sortOffsets()
	o.Format = FormatV1
	if slices.ContainsFunc(o.Offsets, func(off Offset) bool { return off.TopicID != "" }) {
		o.Format = FormatVersion
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(o); err != nil {
		return nil, fmt.Errorf("encode group object %q: %w", o.Group, err)
	}
	return buf.Bytes(), nil
}

// Decode reads an object read from key and checks it.
func Decode(key string, data []byte) (*Object, error) {
	var o Object
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		off := int64(-1)
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			off = se.Offset
		case errors.As(err, &te):
			off = te.Offset
		}
		return nil, &CorruptError{Key: key, Offset: off, Err: err}
	}
	if o.Format != FormatV1 && o.Format != FormatVersion {
		return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("format %d, this release reads %d and %d", o.Format, FormatV1, FormatVersion)}
	}
	if Key(o.Group) != key {
		return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("names group %q, whose key is %s", o.Group, Key(o.Group))}
	}
	switch o.State {
	case StateEmpty, StateStable, StateDead:
	default:
		return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("state %q is not Empty, Stable or Dead", o.State)}
	}
	for i, off := range o.Offsets {
		if off.Partition < 0 || off.Offset < -1 || off.Topic == "" {
			return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("offsets[%d]: %s-%d offset %d is not a committed offset", i, off.Topic, off.Partition, off.Offset)}
		}
		if off.TopicID != "" && (o.Format == FormatV1 || !validTopicID(off.TopicID)) {
			return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("offsets[%d]: %s-%d topic_id %q in format %d", i, off.Topic, off.Partition, off.TopicID, o.Format)}
		}
		if i > 0 && compareOffset(o.Offsets[i-1], off) >= 0 {
			return nil, &CorruptError{Key: key, Offset: -1, Err: fmt.Errorf("offsets[%d]: %s-%d out of order or repeated", i, off.Topic, off.Partition)}
		}
	}
	return &o, nil
}

func compareOffset(a, b Offset) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func (o *Object) sortOffsets() { slices.SortFunc(o.Offsets, compareOffset) }

// clone is a deep copy.
func (o *Object) clone() *Object {
	c := *o
	c.Offsets = slices.Clone(o.Offsets)
	return &c
}

// Lookup is the committed offset of topic/partition.
func (o *Object) Lookup(topic string, partition int32) (Offset, bool) {
	i, ok := slices.BinarySearchFunc(o.Offsets, Offset{Topic: topic, Partition: partition}, compareOffset)
	if !ok {
		return Offset{}, false
	}
	return o.Offsets[i], true
}

// set stores or replaces one offset (keeps the order).
func (o *Object) set(off Offset) {
	i, ok := slices.BinarySearchFunc(o.Offsets, off, compareOffset)
	if ok {
		o.Offsets[i] = off
		return
	}
	o.Offsets = slices.Insert(o.Offsets, i, off)
}

// removeOffsets drops the offsets del selects and returns them, in order.
func (o *Object) removeOffsets(del func(Offset) bool) []Offset {
	var removed []Offset
	kept := o.Offsets[:0]
	for _, off := range o.Offsets {
		if del(off) {
			removed = append(removed, off)
		} else {
			kept = append(kept, off)
		}
	}
	o.Offsets = kept
	return removed
}
