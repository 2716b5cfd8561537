package compactor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kRec is a data record as franz-go decodes it.
type kRec struct {
	Offset, Timestamp int64
	Key, Value        string
	NullKey, Tomb     bool
	Headers           int
	Legacy            bool
}

// kmsgLegacy decodes one legacy entry (a message, or a compressed wrapper's
// inner messages) with franz-go.
func kmsgLegacy(t *testing.T, entry []byte) []kRec {
	t.Helper()
	var m kmsg.MessageV1 // v0 is v1 without the timestamp
	magic := entry[16]
	var v0 kmsg.MessageV0
	if magic == 0 {
		if err := v0.ReadFrom(entry); err != nil {
			t.Fatal(err)
		}
		m = kmsg.MessageV1{Offset: v0.Offset, Attributes: v0.Attributes, Timestamp: -1, Key: v0.Key, Value: v0.Value}
	} else if err := m.ReadFrom(entry); err != nil {
		t.Fatal(err)
	}
	c := m.Attributes & 7
	if c == 0 {
		return []kRec{{Offset: m.Offset, Timestamp: m.Timestamp, Key: string(m.Key), Value: string(m.Value),
			NullKey: m.Key == nil, Tomb: m.Value == nil, Legacy: true}}
	}
	inner, err := kgo.DefaultDecompressor().Decompress(m.Value, kgo.CompressionCodecType(c))
	if err != nil {
		t.Fatal(err)
	}
	var out []kRec
	for pos := 0; pos < len(inner); {
		end := pos + 12 + int(binary.BigEndian.Uint32(inner[pos+8:]))
		out = append(out, kmsgLegacy(t, inner[pos:end])...)
		pos = end
	}
	lastRel := out[len(out)-1].Offset
	for i := range out {
		if magic == 1 { // inner offsets are relative; the wrapper's is the last one's
			out[i].Offset = m.Offset - lastRel + out[i].Offset
		}
		if magic == 1 && m.Attributes&0x08 != 0 {
			out[i].Timestamp = m.Timestamp
		}
	}
	return out
}

func (r kRec) String() string {
	return fmt.Sprintf("%d@%d:%q=%q(tomb=%v,h=%d)", r.Offset, r.Timestamp, r.Key, r.Value, r.Tomb, r.Headers)
}

// kmsgDecode reads a segment file with franz-go only: the v2 data records,
// and the raw bytes of every legacy (magic 0/1) entry.
func kmsgDecode(t *testing.T, data []byte) (recs []kRec, legacy [][]byte, control int) {
	t.Helper()
	for pos := 0; pos < len(data); {
		end := pos + 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
		if data[pos+16] < 2 {
			legacy = append(legacy, data[pos:end])
			recs = append(recs, kmsgLegacy(t, data[pos:end])...)
			pos = end
			continue
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data[pos:end]); err != nil {
			t.Fatalf("kmsg batch at %d: %v", pos, err)
		}
		pos = end
		if rb.Attributes&0x20 != 0 {
			control++
			continue
		}
		raw := rb.Records
		if c := rb.Attributes & 7; c != 0 && len(raw) > 0 {
			var err error
			if raw, err = kgo.DefaultDecompressor().Decompress(raw, kgo.CompressionCodecType(c)); err != nil {
				t.Fatal(err)
			}
		}
		logAppendTime := rb.Attributes&0x08 != 0
		for range rb.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			_, n := binary.Varint(raw)
			raw = raw[n+int(r.Length):]
			ts := rb.FirstTimestamp + r.TimestampDelta64
			if logAppendTime {
				ts = rb.MaxTimestamp // the broker's time stands for every record
			}
			recs = append(recs, kRec{Offset: rb.FirstOffset + int64(r.OffsetDelta), Timestamp: ts,
				Key: string(r.Key), Value: string(r.Value), NullKey: r.Key == nil, Tomb: r.Value == nil, Headers: len(r.Headers)})
		}
	}
	return recs, legacy, control
}

// compactModel is Kafka's result of cleaning recs completely: the latest
// record of each key, tombstones kept or not (legacy deletes are kept: a
// fixture is one segment, so no segment is delete.retention.ms older than
// the last clean one, which Kafka's legacy delete horizon goes by).
func compactModel(recs []kRec, keepTombstones bool) []kRec {
	last := map[string]int64{}
	for _, r := range recs {
		if !r.NullKey {
			last[r.Key] = r.Offset
		}
	}
	var out []kRec
	for _, r := range recs {
		if !r.NullKey && last[r.Key] == r.Offset && (keepTombstones || !r.Tomb || r.Legacy) {
			out = append(out, r)
		}
	}
	return out
}

// TestReviewFixturesCompactLikeKafka cleans real broker-written compacted
// partitions (Kafka 2.1: tombstones, LZ4) and FetchResponse record sets
// (magic 0/1 and 2 mixed, gzip) and checks, with franz-go as the decoder,
// that what is left is Kafka's latest value per key, over both formats, at
// the original offsets and timestamps, v2 tombstones kept for one pass and
// gone after the horizon.
func TestReviewFixturesCompactLikeKafka(t *testing.T) {
	const root = "../testdata/fixtures"
	var files []string
	for _, p := range []string{"_schemas-0", "docker-connect-configs-0", "docker-connect-status-0", "__consumer_offsets-*", "_confluent-*"} {
		m, _ := filepath.Glob(filepath.Join(root, "kafka-connect-spooldir-fork/*/kafka-data", p, "*.log"))
		files = append(files, m...)
	}
	m, _ := filepath.Glob(filepath.Join(root, "kafka-go/*.records.bin"))
	files = append(files, m...)
	if len(files) < 10 {
		t.Fatalf("only %d fixture files", len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) == 0 {
				t.Skip("empty")
			}
			before, legacyBefore, control := kmsgDecode(t, data)
			if control > 0 {
				t.Skip("control batches")
			}
			e := newEnv(t, nil)
			e.writeSegment(int64(binary.BigEndian.Uint64(data)), data)
			e.roll()
			read := func() ([]kRec, [][]byte) {
				var all []byte
				for _, s := range e.log.Segments() {
					all = append(all, readFile(t, e.fs, s.Path)...)
				}
				r, l, _ := kmsgDecode(t, all)
				if len(l) == 0 {
					e.read() // our reader and checkKmsg (v2 only) agree too
				}
				return r, l
			}
			check := func(when string, keepTombstones bool) {
				got, legacy := read()
				want := compactModel(before, keepTombstones)
				// A legacy entry that keeps all its records is kept as it
				// is; others are dropped or up-converted to v2.
				for _, l := range legacy {
					if !slices.ContainsFunc(legacyBefore, func(b []byte) bool { return bytes.Equal(b, l) }) {
						t.Fatalf("%s: a legacy entry was changed", when)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s:\n got  %v\n want %v", when, got, want)
				}
			}
			e.pass(true)
			check("after one pass", true)
			e.clock.ms += 2 * 86_400_000
			e.pass(true)
			check("past the delete horizon", false)
			t.Logf("%d records (%d legacy entries) -> %d", len(before), len(legacyBefore), len(compactModel(before, false)))
		})
	}
}
