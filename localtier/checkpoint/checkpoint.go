// Package checkpoint owns Kafka's checkpoint text files: the per-log-dir
// offset checkpoints (replication-offset-checkpoint,
// recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// cleaner-offset-checkpoint) and the per-partition leader-epoch-checkpoint.
// It reads them as Kafka's CheckpointFile does and writes them atomically.
//
// Format (UTF-8 text, "\n" line ends, Kafka's CheckpointFile):
//
//	0                  version, always 0
//	2                  number of entries
//	foo 0 1234         offset checkpoints: topic partition offset
//	bar 3 0
//
//	0                  leader-epoch-checkpoint
//	2
//	0 0                epoch startOffset
//	2 81
//
// Fields are separated by whitespace. As in Kafka, an empty file, or one
// holding only the version line, reads as no entries, and so does a file that
// does not exist (use Stat to tell the two apart).
package checkpoint

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/tiered/tiered/localtier/vfs"
)

// Names of Kafka's checkpoint files.
const (
	ReplicationOffsetFile   = "replication-offset-checkpoint"
	RecoveryPointOffsetFile = "recovery-point-offset-checkpoint"
	LogStartOffsetFile      = "log-start-offset-checkpoint"
	CleanerOffsetFile       = "cleaner-offset-checkpoint"
	LeaderEpochFile         = "leader-epoch-checkpoint"
)

// Version is the only checkpoint version Kafka writes and reads.
const Version = 0

// maxFileBytes bounds how much of a checkpoint file is read; a log dir with a
// million partitions needs well under this.
const maxFileBytes = 256 << 20

// maxLineInError bounds how much of a bad line an error message quotes.
const maxLineInError = 200

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is Kafka's "topic-partition" form (also the partition's directory name).
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// EpochEntry is one leader epoch: the leader of Epoch wrote its first record
// at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// MalformedError reports a checkpoint file that does not parse. Line is the
// 1-based line number and Text the line (shortened); Line is 0 when the
// problem is the file as a whole (an entry count that does not match).
type MalformedError struct {
	File   string
	Line   int
	Text   string
	Reason string
}

func (e *MalformedError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("Malformed checkpoint file [%s]: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("Malformed line in checkpoint file [%s]: %q (line %d: %s)", e.File, e.Text, e.Line, e.Reason)
}

// ReadOffsets reads an offset checkpoint file. A missing file reads as an
// empty map.
func ReadOffsets(fsys vfs.FS, path string) (map[TopicPartition]int64, error) {
	b, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return ParseOffsets(path, b)
}

// WriteOffsets replaces an offset checkpoint file with m, sorted by topic
// and partition, durably: after a crash the file holds the old or the new
// content.
func WriteOffsets(fsys vfs.FS, path string, m map[TopicPartition]int64) error {
	b, err := FormatOffsets(m)
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	if err := vfs.WriteFileAtomic(fsys, path, b); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	return nil
}

// ReadLeaderEpochs reads a leader-epoch-checkpoint file. A missing file reads
// as no entries.
func ReadLeaderEpochs(fsys vfs.FS, path string) ([]EpochEntry, error) {
	b, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return ParseLeaderEpochs(path, b)
}

// WriteLeaderEpochs replaces a leader-epoch-checkpoint file with entries, in
// the order given, durably.
func WriteLeaderEpochs(fsys vfs.FS, path string, entries []EpochEntry) error {
	if err := vfs.WriteFileAtomic(fsys, path, FormatLeaderEpochs(entries)); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	return nil
}

func readFile(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, &MalformedError{File: path, Reason: fmt.Sprintf("file is larger than %d bytes", maxFileBytes)}
	}
	return b, nil
}

// ParseOffsets parses the content of an offset checkpoint file; name is used
// in errors. A topic-partition listed twice keeps its last offset, as in Kafka.
func ParseOffsets(name string, b []byte) (map[TopicPartition]int64, error) {
	m := make(map[TopicPartition]int64)
	err := parse(name, b, func(fields []string) string {
		if len(fields) != 3 {
			return fmt.Sprintf("want 3 fields (topic partition offset), found %d", len(fields))
		}
		p, err := strconv.ParseInt(fields[1], 10, 32)
		if err != nil {
			return "partition is not an int32"
		}
		off, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return "offset is not an int64"
		}
		m[TopicPartition{Topic: fields[0], Partition: int32(p)}] = off
		return ""
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ParseLeaderEpochs parses the content of a leader-epoch-checkpoint file;
// name is used in errors.
func ParseLeaderEpochs(name string, b []byte) ([]EpochEntry, error) {
	var out []EpochEntry
	err := parse(name, b, func(fields []string) string {
		if len(fields) != 2 {
			return fmt.Sprintf("want 2 fields (epoch startOffset), found %d", len(fields))
		}
		epoch, err := strconv.ParseInt(fields[0], 10, 32)
		if err != nil {
			return "epoch is not an int32"
		}
		off, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return "start offset is not an int64"
		}
		out = append(out, EpochEntry{Epoch: int32(epoch), StartOffset: off})
		return ""
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parse walks the version line, the count line and the entry lines, passing
// each entry's fields to entry, which returns a reason when they are bad.
// Nothing is allocated from the count.
func parse(name string, b []byte, entry func(fields []string) string) error {
	lines := lineReader{b: b}
	bad := func(line int, text, reason string) error {
		if len(text) > maxLineInError {
			text = text[:maxLineInError] + "..."
		}
		return &MalformedError{File: name, Line: line, Text: text, Reason: reason}
	}
	line, ok := lines.next()
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(line, 10, 32)
	if err != nil {
		return bad(1, line, "version is not an int32")
	}
	if v != Version {
		return bad(1, line, fmt.Sprintf("unrecognised version %d, expected version %d", v, Version))
	}
	line, ok = lines.next()
	if !ok {
		return nil
	}
	count, err := strconv.ParseInt(line, 10, 32)
	if err != nil {
		return bad(2, line, "entry count is not an int32")
	}
	if count < 0 {
		return bad(2, line, "entry count is negative")
	}
	found := 0
	for n := 3; ; n++ {
		line, ok = lines.next()
		if !ok {
			break
		}
		if line != "" && isJavaSpace(rune(line[0])) {
			// Java's split("\\s+") yields an empty first field here.
			return bad(n, line, "line starts with whitespace")
		}
		if reason := entry(strings.FieldsFunc(line, isJavaSpace)); reason != "" {
			return bad(n, line, reason)
		}
		found++
	}
	if int64(found) != count {
		return &MalformedError{File: name, Reason: fmt.Sprintf("expected [%d] entries, but found [%d]", count, found)}
	}
	return nil
}

// isJavaSpace is Java's regex \s: [ \t\n\x0B\f\r].
func isJavaSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// lineReader splits text into lines as Java's BufferedReader.readLine does:
// a line ends at "\n", "\r" or "\r\n", and a final line needs no terminator.
type lineReader struct {
	b   []byte
	pos int
}

func (r *lineReader) next() (string, bool) {
	if r.pos >= len(r.b) {
		return "", false
	}
	rest := r.b[r.pos:]
	i := bytes.IndexAny(rest, "\r\n")
	if i < 0 {
		r.pos = len(r.b)
		return string(rest), true
	}
	r.pos += i + 1
	if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
		r.pos++
	}
	return string(rest[:i]), true
}

// FormatOffsets renders m as an offset checkpoint file, sorted by topic and
// partition. A topic that is empty or contains whitespace cannot be written.
func FormatOffsets(m map[TopicPartition]int64) ([]byte, error) {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		if tp.Topic == "" || strings.ContainsFunc(tp.Topic, isJavaSpace) {
			return nil, fmt.Errorf("format checkpoint: invalid topic name %q", tp.Topic)
		}
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	b := header(len(m))
	for _, tp := range tps {
		b = append(b, tp.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tp.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, m[tp], 10)
		b = append(b, '\n')
	}
	return b, nil
}

// FormatLeaderEpochs renders entries as a leader-epoch-checkpoint file.
func FormatLeaderEpochs(entries []EpochEntry) []byte {
	b := header(len(entries))
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

func header(count int) []byte {
	b := strconv.AppendInt(nil, Version, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(count), 10)
	return append(b, '\n')
}
