package topicconfig

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// MaxTopicNameLength is Kafka's limit on topic name length (Topic.MAX_NAME_LENGTH).
const MaxTopicNameLength = 249

// InvalidTopicError is Kafka's InvalidTopicException: a topic name that breaks Kafka's rules.
type InvalidTopicError struct {
	Topic   string
	Message string // Kafka's message, e.g. `Topic name is illegal, it can't be empty`
}

func (e *InvalidTopicError) Error() string { return e.Message }

// Is makes errors.Is(err, kafkaerr.ErrInvalidTopic) true.
func (e *InvalidTopicError) Is(target error) bool { return target == kafkaerr.ErrInvalidTopic }

// ValidateTopicName applies Kafka's topic name rules: non-empty, not "." or "..", at most 249
// characters, and only ASCII letters, digits, '.', '_' and '-'.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return &InvalidTopicError{Topic: name, Message: "Topic name is illegal, it can't be empty"}
	case name == "." || name == "..":
		return &InvalidTopicError{Topic: name, Message: `Topic name cannot be "." or ".."`}
	case utf16Len(name) > MaxTopicNameLength:
		return &InvalidTopicError{Topic: name, Message: "Topic name is illegal, it can't be longer than " +
			strconv.Itoa(MaxTopicNameLength) + " characters, topic name: " + name}
	}
	if !legalTopicChars(name) {
		return &InvalidTopicError{Topic: name, Message: `Topic name "` + name +
			`" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`}
	}
	return nil
}

// utf16Len is the length Java's String.length() reports.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

func legalTopicChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CollidesWith reports whether two different topic names collide in Kafka's metric names, where
// '.' and '_' are the same character (Topic.hasCollision). Kafka refuses to create a topic that
// collides with an existing one.
func CollidesWith(a, b string) bool {
	return a != b && strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// DirName is the directory of one partition's log: "topic-partition".
func DirName(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// DirKind says what a partition directory is for.
type DirKind uint8

const (
	// DirLog is a live partition log, "topic-partition".
	DirLog DirKind = iota
	// DirDelete is a log renamed for asynchronous deletion, "topic-partition.uniqueId-delete".
	DirDelete
	// DirFuture is a log being moved between log dirs, "topic-partition.uniqueId-future".
	DirFuture
	// DirStray is a log the broker found it does not host, "topic-partition.uniqueId-stray".
	DirStray
)

func (k DirKind) String() string {
	switch k {
	case DirLog:
		return "log"
	case DirDelete:
		return "delete"
	case DirFuture:
		return "future"
	case DirStray:
		return "stray"
	default:
		return "DirKind(" + strconv.Itoa(int(k)) + ")"
	}
}

// DirInfo is a parsed partition directory name.
type DirInfo struct {
	Topic     string
	Partition int32
	Kind      DirKind
	UniqueID  string // the id between '.' and the suffix of a marked directory; "" for DirLog
}

// DirNameError reports a directory name that is not a partition directory.
type DirNameError struct {
	Dir    string
	Reason string
}

func (e *DirNameError) Error() string {
	return "'" + e.Dir + "' is not in the form of topic-partition or topic-partition.uniqueId-delete (if marked for deletion): " + e.Reason
}

// MarkedDirError is returned by ParseDirName for a well-formed "-delete", "-future" or "-stray"
// directory: not a live log, to be skipped (or cleaned up) by a loader.
type MarkedDirError struct {
	Dir  string
	Info DirInfo
}

func (e *MarkedDirError) Error() string {
	return "directory '" + e.Dir + "' is a " + e.Info.Kind.String() + " directory of " + DirName(e.Info.Topic, e.Info.Partition)
}

var dirSuffixes = [...]struct {
	suffix string
	kind   DirKind
}{{"-delete", DirDelete}, {"-future", DirFuture}, {"-stray", DirStray}}

// ParseDir parses a partition directory name (a path's last element is used). Like Kafka it
// splits at the last '-', so topics containing '-' work; it also recognises
// "topic-partition.uniqueId-delete|-future|-stray". It is stricter than Kafka: the topic must be
// a valid topic name and the partition a canonical non-negative decimal (so DirName round-trips).
// Every failure is a *DirNameError.
func ParseDir(dir string) (DirInfo, error) {
	name := filepath.Base(dir)
	bad := func(reason string) (DirInfo, error) {
		return DirInfo{}, &DirNameError{Dir: name, Reason: reason}
	}
	info := DirInfo{Kind: DirLog}
	base := name
	for _, s := range dirSuffixes {
		if !strings.HasSuffix(name, s.suffix) {
			continue
		}
		rest := strings.TrimSuffix(name, s.suffix)
		dot := strings.LastIndexByte(rest, '.')
		if dot < 0 {
			return bad("no '.uniqueId' before " + s.suffix)
		}
		id := rest[dot+1:]
		if id == "" || strings.ContainsFunc(id, isJavaSpace) {
			return bad("empty or blank unique id")
		}
		info.Kind, info.UniqueID, base = s.kind, id, rest[:dot]
		break
	}
	dash := strings.LastIndexByte(base, '-')
	if dash < 0 {
		return bad("no '-'")
	}
	topic, part := base[:dash], base[dash+1:]
	if err := ValidateTopicName(topic); err != nil {
		return bad(err.Error())
	}
	p, ok := parsePartition(part)
	if !ok {
		return bad("partition " + strconv.Quote(part) + " is not a non-negative 32-bit decimal")
	}
	info.Topic, info.Partition = topic, p
	return info, nil
}

// ParseDirName returns the topic and partition of a live partition directory "topic-partition".
// For a well-formed marked directory (-delete, -future, -stray) it returns the topic and
// partition together with a *MarkedDirError, so a loader can skip it; a name that is not a
// partition directory gives a *DirNameError.
func ParseDirName(dir string) (topic string, partition int32, err error) {
	info, err := ParseDir(dir)
	if err != nil {
		return "", 0, err
	}
	if info.Kind != DirLog {
		return info.Topic, info.Partition, &MarkedDirError{Dir: filepath.Base(dir), Info: info}
	}
	return info.Topic, info.Partition, nil
}

// parsePartition accepts only what DirName writes for a non-negative partition.
func parsePartition(s string) (int32, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// isJavaSpace matches Java regex \s: [ \t\n\x0B\f\r].
func isJavaSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}
