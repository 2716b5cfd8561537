package manifest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Directory names and file names of the bucket layout.
const (
	dataDir       = "data"
	manifestsDir  = "manifests"
	subDir        = "sub"
	rootName      = "manifest.json"
	subExt        = ".json"
	offsetDigits  = 20 // Kafka's zero-padded segment names
	hashHexDigits = 8
	subSumDigits  = 16 // hex digits of the sub-manifest's SHA-256 in its key
	// lineageSep separates the partition from the topic ID in a lineage's
	// partition directory; neither topic names nor IDs contain it.
	lineageSep = "~"
)

// MaxTopicLength is Kafka's limit on topic name length.
const MaxTopicLength = 249

// FileType is one of a segment's objects.
type FileType int

// A segment's objects, in the order Segment.Objects lists them.
const (
	FileLog FileType = iota + 1
	FileIndex
	FileTimeIndex
	FileTxnIndex
	// FileIndexes is one object holding all of a segment's indexes back to
	// back (manifest version 2): .index, .timeindex, then .txnindex.
	FileIndexes
)

var fileExts = [...]string{FileLog: "log", FileIndex: "index", FileTimeIndex: "timeindex", FileTxnIndex: "txnindex",
	FileIndexes: "indexes"}

// Ext is the object's extension without the dot, as in Kafka's file names
// (FileIndexes, which Kafka does not have: "indexes").
func (f FileType) Ext() string {
	if f < FileLog || f > FileIndexes {
		return "unknown"
	}
	return fileExts[f]
}

func (f FileType) String() string { return f.Ext() }

// KeyType says what a key of the layout names.
type KeyType int

// Kinds of keys.
const (
	KeyData KeyType = iota + 1 // a segment object
	KeyRoot                    // a partition's root manifest
	KeySub                     // a sealed sub-manifest
)

func (t KeyType) String() string {
	switch t {
	case KeyData:
		return "data"
	case KeyRoot:
		return "manifest"
	case KeySub:
		return "sub-manifest"
	}
	return "unknown"
}

// Key is a parsed object key. Fields that do not apply to Type are zero.
type Key struct {
	Type      KeyType
	Prefix    string // "" or a slash-separated prefix without leading or trailing slash
	Topic     string
	Partition int32
	// BaseOffset is the segment's base offset (KeyData) or the first
	// segment's base offset (KeySub).
	BaseOffset int64
	LastOffset int64    // KeySub: the last offset the sub-manifest covers
	AttemptID  string   // KeyData
	File       FileType // KeyData
	SumPrefix  string   // KeySub: leading hex digits of the sub-manifest's SHA-256
	// TopicID is the lineage: the topic ID (Kafka's 22-character string
	// form) in the partition directory "<topic>-<partition>~<id>", or ""
	// for a name-only lineage ("<topic>-<partition>": brokers before 2.8,
	// serve's own engine, buckets written before topic IDs).
	TopicID string
}

// SegmentKeys are the object keys of one upload attempt of one segment.
// TxnIndex is set too; a segment without a .txnindex does not upload it.
// Indexes is the key of the one object holding all the indexes, which
// tiered writes instead of Index, TimeIndex and TxnIndex (readers take
// either).
type SegmentKeys struct {
	Log, Index, TimeIndex, TxnIndex, Indexes string
}

// PartitionHash is the 8 hex digits (the first 4 bytes of SHA-256 of
// "topic/partition") that lead a partition's keys, spreading partitions over
// the key space so an S3-compatible store can split its load.
func PartitionHash(topic string, partition int32) string {
	sum := sha256.Sum256([]byte(topic + "/" + strconv.FormatInt(int64(partition), 10)))
	return hex.EncodeToString(sum[:hashHexDigits/2])
}

// NewAttemptID returns a fresh random attempt id: 32 lowercase hex digits
// (128 bits), unique per upload attempt.
func NewAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// DataKeys returns the object keys for one upload attempt of the segment with
// base offset base, in the name-only lineage. prefix may be empty; slashes
// around it are trimmed.
func DataKeys(prefix, topic string, partition int32, base int64, attemptID string) (SegmentKeys, error) {
	return DataKeysID(prefix, topic, "", partition, base, attemptID)
}

// DataKeysID is DataKeys in the lineage of topicID ("" = name-only).
func DataKeysID(prefix, topic, topicID string, partition int32, base int64, attemptID string) (SegmentKeys, error) {
	dir, err := partitionDir(prefix, dataDir, topic, topicID, partition)
	if err != nil {
		return SegmentKeys{}, err
	}
	if base < 0 {
		return SegmentKeys{}, fmt.Errorf("data keys: negative base offset %d", base)
	}
	if err := validateAttemptID(attemptID); err != nil {
		return SegmentKeys{}, fmt.Errorf("data keys: %w", err)
	}
	stem := dir + "/" + offsetName(base) + "-" + attemptID + "."
	return SegmentKeys{
		Log:       stem + FileLog.Ext(),
		Index:     stem + FileIndex.Ext(),
		TimeIndex: stem + FileTimeIndex.Ext(),
		TxnIndex:  stem + FileTxnIndex.Ext(),
		Indexes:   stem + FileIndexes.Ext(),
	}, nil
}

// ManifestKey returns the key of a partition's root manifest in the
// name-only lineage.
func ManifestKey(prefix, topic string, partition int32) (string, error) {
	return ManifestKeyID(prefix, topic, "", partition)
}

// ManifestKeyID returns the key of a partition's root manifest in the
// lineage of topicID ("" = name-only).
func ManifestKeyID(prefix, topic, topicID string, partition int32) (string, error) {
	dir, err := partitionDir(prefix, manifestsDir, topic, topicID, partition)
	if err != nil {
		return "", err
	}
	return dir + "/" + rootName, nil
}

// subKey returns the key of a sub-manifest covering [base, last] whose
// encoding has SHA-256 sum. Sub-manifests are content-addressed: the same
// content always gets the same key, and new content a new key.
func subKey(prefix, topic, topicID string, partition int32, base, last int64, sum [32]byte) (string, error) {
	dir, err := partitionDir(prefix, manifestsDir, topic, topicID, partition)
	if err != nil {
		return "", err
	}
	return dir + "/" + subDir + "/" + offsetName(base) + "-" + offsetName(last) + "-" +
		hex.EncodeToString(sum[:subSumDigits/2]) + subExt, nil
}

// NormalizePrefix trims slashes around prefix and checks it has no empty, "."
// or ".." path element.
func NormalizePrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return "", fmt.Errorf("key prefix %q: empty, \".\" or \"..\" path element", prefix)
		}
	}
	if strings.ContainsAny(p, "\x00\n\r") {
		return "", fmt.Errorf("key prefix %q: control character", prefix)
	}
	return p, nil
}

func partitionDir(prefix, top, topic, topicID string, partition int32) (string, error) {
	p, err := NormalizePrefix(prefix)
	if err != nil {
		return "", err
	}
	if err := ValidateTopic(topic); err != nil {
		return "", err
	}
	if partition < 0 {
		return "", fmt.Errorf("negative partition %d", partition)
	}
	if topicID != "" {
		if err := ValidateTopicID(topicID); err != nil {
			return "", err
		}
	}
	dir := top + "/" + PartitionHash(topic, partition) + "/" + topic + "-" + strconv.FormatInt(int64(partition), 10)
	if topicID != "" {
		dir += lineageSep + topicID
	}
	if p != "" {
		dir = p + "/" + dir
	}
	return dir, nil
}

// ValidateTopic applies Kafka's topic name rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and not "." or "..". Such names are safe in keys.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("topic name is empty")
	case topic == "." || topic == "..":
		return fmt.Errorf("topic name %q is illegal", topic)
	case len(topic) > MaxTopicLength:
		return fmt.Errorf("topic name is longer than %d characters", MaxTopicLength)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", topic)
		}
	}
	return nil
}

// validateAttemptID accepts 8 to 64 characters from [0-9a-z-]: NewAttemptID's
// hex, or a UUID's text form.
func validateAttemptID(id string) error {
	if len(id) < 8 || len(id) > 64 {
		return fmt.Errorf("attempt id %q: want 8 to 64 characters", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("attempt id %q: want only [0-9a-z-]", id)
		}
	}
	return nil
}

func offsetName(off int64) string {
	s := strconv.FormatInt(off, 10)
	return strings.Repeat("0", offsetDigits-len(s)) + s
}

func parseOffsetName(s string) (int64, bool) {
	if len(s) != offsetDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// ParseKey parses any key of the layout: a segment object, a root manifest or
// a sub-manifest, under any prefix. A key that is not one of these (a foreign
// object, or one whose hash does not match its topic and partition) is a
// *KeyError.
func ParseKey(key string) (Key, error) {
	parts := strings.Split(key, "/")
	n := len(parts)
	switch {
	case n >= 4 && parts[n-4] == dataDir:
		return parseData(key, parts)
	case n >= 4 && parts[n-4] == manifestsDir && parts[n-1] == rootName:
		k, err := parseKeyDir(key, parts[:n-1])
		k.Type = KeyRoot
		return k, err
	case n >= 5 && parts[n-5] == manifestsDir && parts[n-2] == subDir:
		return parseSub(key, parts)
	}
	return Key{}, keyErrorf(key, "not a key of the tiered bucket layout")
}

// ParseDataKey parses the key of a segment object (for garbage collection and
// verification: which partition, base offset and attempt it belongs to).
func ParseDataKey(key string) (Key, error) {
	k, err := ParseKey(key)
	if err != nil {
		return Key{}, err
	}
	if k.Type != KeyData {
		return Key{}, keyErrorf(key, "is a %s key, not a segment object", k.Type)
	}
	return k, nil
}

// parseKeyDir parses "<prefix>/<top>/<hash>/<topic>-<partition>" given as
// path elements.
func parseKeyDir(key string, parts []string) (Key, error) {
	n := len(parts)
	for _, el := range parts[:n-3] {
		if el == "" || el == "." || el == ".." {
			return Key{}, keyErrorf(key, "empty, \".\" or \"..\" element in the prefix")
		}
	}
	prefix, err := NormalizePrefix(strings.Join(parts[:n-3], "/"))
	if err != nil {
		return Key{}, keyErrorf(key, "%v", err)
	}
	hash, tp := parts[n-2], parts[n-1]
	var topicID string
	if j := strings.IndexByte(tp, lineageSep[0]); j >= 0 {
		tp, topicID = tp[:j], tp[j+1:]
		if err := ValidateTopicID(topicID); err != nil {
			return Key{}, keyErrorf(key, "%v", err)
		}
	}
	i := strings.LastIndexByte(tp, '-')
	if i < 0 {
		return Key{}, keyErrorf(key, "directory %q is not <topic>-<partition>", tp)
	}
	topic, ps := tp[:i], tp[i+1:]
	if err := ValidateTopic(topic); err != nil {
		return Key{}, keyErrorf(key, "%v", err)
	}
	if ps == "" || len(ps) > 1 && ps[0] == '0' || strings.IndexFunc(ps, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return Key{}, keyErrorf(key, "partition %q is not a canonical decimal", ps)
	}
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return Key{}, keyErrorf(key, "partition %q is not an int32", ps)
	}
	if want := PartitionHash(topic, int32(p)); hash != want {
		return Key{}, keyErrorf(key, "hash element %q does not match %s-%d (want %s)", hash, topic, p, want)
	}
	return Key{Prefix: prefix, Topic: topic, Partition: int32(p), TopicID: topicID}, nil
}

func parseData(key string, parts []string) (Key, error) {
	n := len(parts)
	k, err := parseKeyDir(key, parts[:n-1])
	if err != nil {
		return Key{}, err
	}
	name := parts[n-1]
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return Key{}, keyErrorf(key, "segment object name %q has no extension", name)
	}
	ext := name[dot+1:]
	k.File = 0
	for f := FileLog; f <= FileIndexes; f++ {
		if f.Ext() == ext {
			k.File = f
		}
	}
	if k.File == 0 {
		return Key{}, keyErrorf(key, "unknown segment object extension %q", ext)
	}
	stem := name[:dot]
	if len(stem) < offsetDigits+1 || stem[offsetDigits] != '-' {
		return Key{}, keyErrorf(key, "segment object name %q is not <20-digit base>-<attempt>.%s", name, ext)
	}
	base, ok := parseOffsetName(stem[:offsetDigits])
	if !ok {
		return Key{}, keyErrorf(key, "base offset %q is not 20 decimal digits", stem[:offsetDigits])
	}
	k.BaseOffset = base
	k.AttemptID = stem[offsetDigits+1:]
	if err := validateAttemptID(k.AttemptID); err != nil {
		return Key{}, keyErrorf(key, "%v", err)
	}
	k.Type = KeyData
	return k, nil
}

func parseSub(key string, parts []string) (Key, error) {
	n := len(parts)
	k, err := parseKeyDir(key, parts[:n-2])
	if err != nil {
		return Key{}, err
	}
	name, ok := strings.CutSuffix(parts[n-1], subExt)
	// <20 digits>-<20 digits>-<16 hex>
	if !ok || len(name) != 2*offsetDigits+subSumDigits+2 || name[offsetDigits] != '-' || name[2*offsetDigits+1] != '-' {
		return Key{}, keyErrorf(key, "sub-manifest name %q is not <base>-<last>-<hash>.json", parts[n-1])
	}
	base, ok1 := parseOffsetName(name[:offsetDigits])
	last, ok2 := parseOffsetName(name[offsetDigits+1 : 2*offsetDigits+1])
	sum := name[2*offsetDigits+2:]
	if !ok1 || !ok2 || !isLowerHex(sum) || base > last || last == math.MaxInt64 {
		return Key{}, keyErrorf(key, "sub-manifest name %q is not <base>-<last>-<hash>.json", parts[n-1])
	}
	k.Type, k.BaseOffset, k.LastOffset, k.SumPrefix = KeySub, base, last, sum
	return k, nil
}

// topicIDChars is the length of Kafka's string form of a topic ID: 16
// bytes as URL-safe base64 without padding.
const topicIDChars = 22

// ValidateTopicID checks Kafka's string form of a topic ID (22 characters
// of URL-safe base64 without padding, 16 bytes, not the zero UUID). The
// manifest package keeps IDs as strings; localtier.TopicID is the same
// value as bytes.
func ValidateTopicID(id string) error {
	if len(id) != topicIDChars {
		return fmt.Errorf("topic id %q: want %d characters of URL-safe base64, have %d", id, topicIDChars, len(id))
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("topic id %q: not URL-safe base64 of 16 bytes", id)
	}
	if id == "AAAAAAAAAAAAAAAAAAAAAA" {
		return fmt.Errorf("topic id %q is the zero UUID (no ID)", id)
	}
	return nil
}
