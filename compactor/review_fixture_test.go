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

	"github.com/tiered/tiered/localtier"
)

// kRec is a v2 data record as franz-go decodes it.
type kRec struct {
	Offset, Timestamp int64
	Key, Value        string
	NullKey, Tomb     bool
	Headers           int
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
// record of each key, tombstones kept or not.
func compactModel(recs []kRec, keepTombstones bool) []kRec {
	last := map[string]int64{}
	for _, r := range recs {
		if !r.NullKey {
			last[r.Key] = r.Offset
		}
	}
	var out []kRec
	for _, r := range recs {
		if !r.NullKey && last[r.Key] == r.Offset && (keepTombstones || !r.Tomb) {
			out = append(out, r)
		}
	}
	return out
}

// TestReviewFixturesCompactLikeKafka cleans real broker-written compacted
// partitions (Kafka 2.1: tombstones, LZ4) and FetchResponse record sets
// (magic 0/1 and 2 mixed, gzip) and checks, with franz-go as the decoder,
// that what is left is Kafka's latest value per key at the original
// offsets and timestamps, tombstones kept for one pass and gone after the
// horizon, legacy entries unchanged.
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
			if err := e.dir.Close(); err != nil {
				t.Fatal(err)
			}
			pdir := "/data/t-0"
			for _, suf := range []string{".log", ".index", ".timeindex", ".txnindex"} {
				_ = e.fs.Remove(localtier.SegmentPath(pdir, 0, suf))
			}
			base := int64(binary.BigEndian.Uint64(data))
			w, err := e.fs.Create(localtier.SegmentPath(pdir, base, ".log"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			e.openDir()
			e.log = e.partition("t", 0)
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
				if len(legacyBefore) > 0 {
					// Legacy entries are kept as they are and take no part
					// in compaction (a documented choice).
					if len(legacy) != len(legacyBefore) || !slices.EqualFunc(legacy, legacyBefore, bytes.Equal) {
						t.Fatalf("%s: legacy entries changed: %d before, %d after", when, len(legacyBefore), len(legacy))
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
			t.Logf("%d v2 records, %d legacy entries -> %d", len(before), len(legacyBefore), len(compactModel(before, false)))
		})
	}
}
