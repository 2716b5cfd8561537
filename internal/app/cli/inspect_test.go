package cli

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

const (
	kraftDir  = fixtures + "/kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"
	kafka21   = fixtures + "/kafka-connect-spooldir-fork/369b2776d6427f369ffecba1a5bdfcedbc5763c8/kafka-data"
	firstSeg  = "00000000000000000000.log"
	firstTime = "00000000000000000000.timeindex"
)

type segmentReport struct {
	File        string
	Size        int64
	BaseOffset  *int64 `json:"base_offset"`
	Batches     []batchJSON
	ValidBytes  int64 `json:"valid_bytes"`
	BatchCount  int   `json:"batch_count"`
	RecordCount int   `json:"record_count"`
	Error       *string
}

func inspectJSON(t *testing.T, path string, wantCode int) segmentReport {
	t.Helper()
	res := run(t, "", "inspect", "segment", path, "--json")
	if res.code != wantCode {
		t.Fatalf("inspect %s: exit %d, want %d; stderr %q", path, res.code, wantCode, res.stderr)
	}
	var rep segmentReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("inspect --json output is not JSON: %v\n%s", err, res.stdout)
	}
	return rep
}

// TestInspectFixtures: real broker segments inspect cleanly, with the
// expected batches, codecs and control records.
func TestInspectFixtures(t *testing.T) {
	tests := []struct {
		name             string
		path             string
		batches, records int
		check            func(t *testing.T, rep segmentReport, text string)
	}{
		{"kraft_foo", kraftDir + "/foo-0/" + firstSeg, 2, 3, func(t *testing.T, rep segmentReport, text string) {
			b := rep.Batches[0]
			if b.ProducerID != 0 || b.BaseSequence != 0 || b.LastSequence != 1 || b.LastOffset != 1 || b.Codec != "none" || !b.CRCValid {
				t.Errorf("first batch %+v", b)
			}
			if !strings.Contains(text, `| offset: 2 CreateTime: 1725272041932 keySize: -1 valueSize: 2 sequence: 2 headerKeys: [] key: null payload: "m3"`) {
				t.Errorf("record line missing:\n%s", text)
			}
		}},
		{"kraft_metadata_leader_change", kraftDir + "/__cluster_metadata-0/" + firstSeg, 109, 116, func(t *testing.T, rep segmentReport, text string) {
			controls := 0
			for _, b := range rep.Batches {
				if b.IsControl {
					controls++
					if b.ControlType == nil || *b.ControlType != record.ControlLeaderChange || b.ControlTypeName != "leader change" {
						t.Errorf("control batch %+v", b)
					}
				}
			}
			if controls != 2 || strings.Count(text, "control type 2 (leader change)") < 2 {
				t.Errorf("%d control batches; text:\n%s", controls, text)
			}
		}},
		{"kafka21_consumer_offsets", kafka21 + "/__consumer_offsets-9/" + firstSeg, 29, 46, nil},
		{"kafka21_lz4", kafka21 + "/_confluent-command-0/" + firstSeg, 1, 2, func(t *testing.T, rep segmentReport, _ string) {
			if rep.Batches[0].Codec != "lz4" {
				t.Errorf("codec %s, want lz4", rep.Batches[0].Codec)
			}
		}},
		{"legacy_magic_0_1_mixed", fixtures + "/kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin", 15, 20, func(t *testing.T, rep segmentReport, _ string) {
			magics := map[int8]bool{}
			for _, b := range rep.Batches {
				magics[b.Magic] = true
			}
			if !magics[1] || !magics[2] || rep.BaseOffset != nil {
				t.Errorf("magics %v base %v", magics, rep.BaseOffset)
			}
		}},
		{"snappy_java", fixtures + "/rskafka/snappy_java.batch.bin", 1, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := inspectJSON(t, tt.path, 0)
			if rep.BatchCount != tt.batches || len(rep.Batches) != tt.batches || rep.RecordCount != tt.records || rep.Error != nil {
				t.Fatalf("%d/%d batches, %d records, error %v; want %d batches, %d records", rep.BatchCount, len(rep.Batches), rep.RecordCount, rep.Error, tt.batches, tt.records)
			}
			st, _ := os.Stat(tt.path)
			if rep.ValidBytes != st.Size() {
				t.Fatalf("valid bytes %d of %d", rep.ValidBytes, st.Size())
			}
			text := mustRun(t, "", "inspect", "segment", tt.path).stdout
			if strings.Count(text, "baseOffset: ") != tt.batches || strings.Count(text, "\n| offset: ") != tt.records {
				t.Fatalf("text shows %d batches, %d records", strings.Count(text, "baseOffset: "), strings.Count(text, "\n| offset: "))
			}
			if tt.check != nil {
				tt.check(t, rep, text)
			}
		})
	}
}

// TestInspectCorrupt: a damaged copy prints the good batches, then one
// stderr line naming the file and byte position, and exits 1.
func TestInspectCorrupt(t *testing.T) {
	src, err := os.ReadFile(kraftDir + "/__cluster_metadata-0/" + firstSeg)
	if err != nil {
		t.Fatal(err)
	}
	// Positions of the first batches.
	var pos []int
	it := record.NewIter(src)
	for p := 0; ; {
		b, ok := it.Next()
		if !ok {
			break
		}
		pos = append(pos, p)
		p += b.Size()
	}
	third := pos[2]
	tests := []struct {
		name   string
		damage func(b []byte) []byte
		want   string
	}{
		{"bad_crc", func(b []byte) []byte { b[third+record.HeaderSize] ^= 0xff; return b }, "checksum mismatch"},
		{"bad_magic", func(b []byte) []byte { b[third+16] = 7; return b }, "unknown magic 7"},
		{"short_length", func(b []byte) []byte { binary.BigEndian.PutUint32(b[third+8:], 3); return b }, "below the minimum"},
		{"torn_tail", func(b []byte) []byte { return b[:third+30] }, "truncated batch"},
		{"torn_header", func(b []byte) []byte { return b[:third+5] }, "truncated batch header"},
		{"length_past_end", func(b []byte) []byte { binary.BigEndian.PutUint32(b[third+8:], 1<<30); return b }, "truncated batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), firstSeg)
			if err := os.WriteFile(path, tt.damage(append([]byte(nil), src...)), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, "", "inspect", "segment", path)
			wantPos := "at position " + itoa(third)
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, path) || !strings.Contains(res.stderr, wantPos) || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q; want 1 and one line with %s, %q, %q", res.code, res.stderr, path, wantPos, tt.want)
			}
			if n := strings.Count(res.stdout, "baseOffset: "); n != 2 {
				t.Fatalf("printed %d batches before the damage, want 2:\n%s", n, res.stdout)
			}
			rep := inspectJSON(t, path, ExitError)
			if rep.BatchCount != 2 || rep.ValidBytes != int64(third) || rep.Error == nil || !strings.Contains(*rep.Error, tt.want) {
				t.Fatalf("JSON report: %d batches, %d valid bytes, error %v", rep.BatchCount, rep.ValidBytes, rep.Error)
			}
		})
	}
	if res := run(t, "", "inspect", "segment", filepath.Join(t.TempDir(), "missing.log")); res.code != ExitError || len(lines(res.stderr)) != 1 {
		t.Fatalf("missing file: exit %d stderr %q", res.code, res.stderr)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestInspectRecordDecodeError: a batch with a valid CRC whose records do
// not decode is shown, then reported.
func TestInspectRecordDecodeError(t *testing.T) {
	var enc record.Encoder
	good, err := enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), []record.Record{{Offset: 0, Value: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := enc.AppendBatch(nil, record.NewBatchSpec(1, codec.None), []record.Record{{Offset: 1, Value: []byte("b")}, {Offset: 2, Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	// Record count 1 of 2 records: within the header's lastOffsetDelta+1
	// (a count above it fails the header check before any decoding).
	binary.BigEndian.PutUint32(bad[57:], 1)
	record.Batch(bad).UpdateCRC()
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, append(good, bad...), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "", "inspect", "segment", path)
	if res.code != ExitError || !strings.Contains(res.stderr, "at position "+itoa(len(good))) || strings.Count(res.stdout, "baseOffset: ") != 2 {
		t.Fatalf("exit %d stderr %q stdout:\n%s", res.code, res.stderr, res.stdout)
	}
}

// TestInspectProducedControlAndTxn: a transaction's records, its abort
// marker and the .txnindex entry, through produce-free log appends.
func TestInspectControlAndTxnIndex(t *testing.T) {
	dir := t.TempDir()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := d.CreateTopic("tx", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := tp.Partitions[0]
	var enc record.Encoder
	spec := record.NewBatchSpec(0, codec.None)
	spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, 42, 1, 0
	// Timestamps near now: a record time more than segment.ms before the
	// marker's (which is now) would roll the segment, as in Kafka.
	now := time.Now().UnixMilli()
	data, err := enc.AppendBatch(nil, spec, []record.Record{{Offset: 0, Timestamp: now, Value: []byte("aborted-1")}, {Offset: 1, Timestamp: now, Value: []byte("aborted-2")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(data); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(42, 1, false, 7); err != nil {
		t.Fatal(err)
	}
	plain, err := enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), []record.Record{{Offset: 0, Timestamp: now, Value: []byte("after")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(plain); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "tx-0", firstSeg)
	text := mustRun(t, "", "inspect", "segment", seg).stdout
	for _, want := range []string{
		"producerId: 42 producerEpoch: 1",
		"isTransactional: true isControl: true",
		"control type 0 (abort)",
		"| offset: 2 CreateTime:",
		"control type 0 (abort) version: 0 coordinatorEpoch: 7",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect lacks %q:\n%s", want, text)
		}
	}
	// consume skips the marker; aborted records are read (READ_UNCOMMITTED).
	if got := values(t, mustRun(t, "", "consume", "--data-dir", dir, "--topic", "tx", "--partition", "0").stdout); got != "aborted-1,aborted-2,after" {
		t.Fatalf("consume printed %q", got)
	}
	txn := filepath.Join(dir, "tx-0", "00000000000000000000.txnindex")
	if res := mustRun(t, "", "inspect", "index", txn); !strings.Contains(res.stdout, "producerId: 42 firstOffset: 0 lastOffset: 2") {
		t.Fatalf("txnindex:\n%s", res.stdout)
	}
}

func TestInspectIndex(t *testing.T) {
	res := mustRun(t, "", "inspect", "index", kraftDir+"/__cluster_metadata-0/"+firstTime)
	if !strings.Contains(res.stdout, "timestamp: 1725272098040 offset: 115") || !strings.Contains(res.stdout, "3 entries") {
		t.Fatalf("timeindex:\n%s", res.stdout)
	}
	var rep struct {
		Type       string
		BaseOffset int64 `json:"base_offset"`
		Entries    []map[string]int64
		Error      *string
	}
	res = mustRun(t, "", "inspect", "index", kraftDir+"/__cluster_metadata-0/00000000000000000000.index", "--json")
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Type != "offset" || len(rep.Entries) != 1 || rep.Entries[0]["offset"] != 56 || rep.Entries[0]["position"] != 4123 || rep.Error != nil {
		t.Fatalf("index JSON %+v", rep)
	}
	// Kafka's empty, preallocated-then-trimmed index of foo-0.
	if res := mustRun(t, "", "inspect", "index", kraftDir+"/foo-0/00000000000000000000.index"); !strings.Contains(res.stdout, "0 entries") {
		t.Fatalf("empty index:\n%s", res.stdout)
	}

	tests := []struct {
		name    string
		file    string
		data    []byte
		entries int
		want    string
	}{
		{"offsets_decrease", "00000000000000000100.index", be32(5, 10, 3, 20), 2, "not larger than the previous"},
		{"partial_entry", "00000000000000000000.index", append(be32(1, 0), 1, 2, 3), 1, "not a multiple of the entry size 8"},
		{"time_goes_back", "00000000000000000000.timeindex", append(be64ts(100, 1), be64ts(50, 2)...), 2, "timestamp 50 is not larger than the previous 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, "", "inspect", "index", path)
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, path) || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q", res.code, res.stderr)
			}
			if !strings.Contains(res.stdout, itoa(tt.entries)+" entries") {
				t.Fatalf("entries not printed before the error:\n%s", res.stdout)
			}
		})
	}
}

func be32(vs ...uint32) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.BigEndian.AppendUint32(out, v)
	}
	return out
}

func be64ts(ts int64, rel uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
}
