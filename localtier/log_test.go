package localtier

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func testConfig(t testing.TB, overrides map[string]string) topicconfig.Config {
	t.Helper()
	cfg, err := topicconfig.Parse(overrides)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// batchOf encodes a producer batch (base offset 0) of n records with the
// given value size, keys "k<i>", timestamps ts, ts+1, ...
func batchOf(t testing.TB, n, valueSize int, ts int64, c codec.Codec) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{'v'}, valueSize)}
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, record.NewBatchSpec(0, c), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openTestLog(t testing.TB, fsys vfs.FS, dir string, cfg topicconfig.Config, clock *fakeClock, rp int64) (*Log, RecoveryReport) {
	t.Helper()
	l, rep, err := OpenLog(fsys, dir, LogOptions{Config: cfg, RecoveryPoint: rp, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, rep
}

// readAll reads every record of the log with Read, checking offsets increase.
func readAll(t testing.TB, l *Log) []record.Record {
	t.Helper()
	var out []record.Record
	off := l.LogStartOffset()
	var d record.Decoder
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 64<<10, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Data) == 0 {
			t.Fatalf("read at %d returned nothing before the end %d", off, l.LogEndOffset())
		}
		it := record.NewIter(res.Data)
		it.Verify = true
		progressed := false
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			recs, err := d.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset < off {
					continue
				}
				r.Key = append([]byte(nil), r.Key...)
				r.Value = append([]byte(nil), r.Value...)
				out = append(out, r)
				off = r.Offset + 1
				progressed = true
			}
			if b.NextOffset() > off {
				off = b.NextOffset()
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		if !progressed && off < l.LogEndOffset() {
			t.Fatalf("no progress at %d", off)
		}
	}
	return out
}

func TestAppendReadRoll(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "20000", "index.interval.bytes": "4096"})
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	total := 0
	for i := 0; i < 40; i++ {
		info, err := l.Append(batchOf(t, 10, 200, 1_700_000_000_000+int64(i*10), codec.None))
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset != int64(total) || info.LastOffset != int64(total+9) {
			t.Fatalf("append %d got offsets [%d,%d]", i, info.FirstOffset, info.LastOffset)
		}
		total += 10
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("expected several segments with segment.bytes 20000, got %d", len(segs))
	}
	for i, s := range segs {
		if s.Size > 20000 {
			t.Fatalf("segment %d is %d bytes, over segment.bytes", i, s.Size)
		}
		if i > 0 && s.BaseOffset != segs[i-1].NextOffset {
			t.Fatalf("segment %d base %d does not follow %d", i, s.BaseOffset, segs[i-1].NextOffset)
		}
	}
	recs := readAll(t, l)
	if len(recs) != total {
		t.Fatalf("read %d records, want %d", len(recs), total)
	}
	// Read from the middle of a batch returns the batch holding it.
	res, err := l.Read(105, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	b := record.Batch(res.Data)
	if b.BaseOffset() != 100 || len(res.Data) != b.Size() {
		t.Fatalf("read 105: batch at %d, %d bytes", b.BaseOffset(), len(res.Data))
	}
	// Without minOne, a batch larger than the limit is not returned (never
	// a partial batch: its CRC could not be checked).
	res, err = l.Read(105, 100, false)
	if err != nil || len(res.Data) != 0 {
		t.Fatalf("read 105 limit 100: %d bytes, %v", len(res.Data), err)
	}
	if _, err := l.Read(int64(total+1), 100, true); !errors.As(err, new(*OffsetOutOfRangeError)) {
		t.Fatalf("read past end: %v", err)
	}
	if res, err := l.Read(int64(total), 100, true); err != nil || len(res.Data) != 0 {
		t.Fatalf("read at end: %d bytes, %v", len(res.Data), err)
	}
	// Offset by timestamp.
	off, ts, ok, err := l.OffsetForTimestamp(1_700_000_000_000 + 205)
	if err != nil || !ok || off != 205 || ts != 1_700_000_000_000+205 {
		t.Fatalf("offset for timestamp: %d %d %v %v", off, ts, ok, err)
	}
	if _, _, ok, _ := l.OffsetForTimestamp(1_800_000_000_000); ok {
		t.Fatal("found an offset for a timestamp after every record")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertIndexesPointAtBatches(t, dir)
	// Reopen cleanly (recovery point = end): same content.
	l2, rep := openTestLog(t, vfs.Default, dir, cfg, clock, int64(total))
	defer l2.Close()
	if rep.BytesTruncated != 0 || l2.LogEndOffset() != int64(total) {
		t.Fatalf("reopen: %+v end %d", rep, l2.LogEndOffset())
	}
	if got := readAll(t, l2); len(got) != total {
		t.Fatalf("after reopen read %d", len(got))
	}
	if _, err := l2.Append(batchOf(t, 1, 10, 1_700_000_001_000, codec.None)); err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != int64(total+1) {
		t.Fatalf("end after reopen+append: %d", l2.LogEndOffset())
	}
}

// assertIndexesPointAtBatches checks every .index entry points at a batch
// start whose batch holds the entry's offset... as Kafka's entries do: the
// entry's offset is the last offset of the append starting at the position.
func assertIndexesPointAtBatches(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	checked := 0
	for _, e := range entries {
		base, suf, ok := ParseSegmentName(e.Name())
		if !ok || suf != IndexSuffix {
			continue
		}
		logData, err := os.ReadFile(SegmentPath(dir, base, LogSuffix))
		if err != nil {
			t.Fatal(err)
		}
		starts := map[int32]record.Batch{}
		it := record.NewIter(logData)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			starts[int32(it.Pos()-b.Size())] = b
		}
		idx, err := index.ReadOffsetIndex(vfs.Default, filepath.Join(dir, e.Name()), base)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range idx.All() {
			b, ok := starts[en.Position]
			if !ok || b.LastOffset() != en.Offset {
				t.Fatalf("%s: entry %+v does not point at a batch ending at its offset", e.Name(), en)
			}
			checked++
		}
		tidx, err := index.ReadTimeIndex(vfs.Default, SegmentPath(dir, base, TimeIndexSuffix), base)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range tidx.All() {
			found := false
			for _, b := range starts {
				if b.LastOffset() == en.Offset && b.MaxTimestamp() == en.Timestamp {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s: time entry %+v matches no batch", e.Name(), en)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no index entries checked")
	}
}

func TestIndexIntervalSpacing(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_000)}
	l, _ := openTestLog(t, vfs.Default, dir, testConfig(t, nil), clock, 0)
	for i := 0; i < 100; i++ {
		if _, err := l.Append(batchOf(t, 1, 1000, int64(1000+i), codec.None)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := index.ReadOffsetIndex(vfs.Default, SegmentPath(dir, 0, IndexSuffix), 0)
	if err != nil {
		t.Fatal(err)
	}
	all := idx.All()
	// Batches are 1081 bytes: an entry after more than 4096 bytes, i.e. every 5th batch...
	if len(all) < 15 {
		t.Fatalf("only %d index entries for ~108 KB", len(all))
	}
	for i := 1; i < len(all); i++ {
		if gap := all[i].Position - all[i-1].Position; gap <= 4096 || gap > 4096+2*1100 {
			t.Fatalf("index entries %d and %d are %d bytes apart", i-1, i, gap)
		}
	}
}

func TestRollTriggers(t *testing.T) {
	base := int64(1_700_000_000_000)
	t.Run("segment.ms by record timestamps", func(t *testing.T) {
		clock := &fakeClock{t: time.UnixMilli(base)}
		l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{"segment.ms": "1000"}), clock, 0)
		defer l.Close()
		mustAppend(t, l, batchOf(t, 1, 10, base, codec.None))
		mustAppend(t, l, batchOf(t, 1, 10, base+1000, codec.None)) // not more than segment.ms
		if n := len(l.Segments()); n != 1 {
			t.Fatalf("rolled at exactly segment.ms: %d segments", n)
		}
		mustAppend(t, l, batchOf(t, 1, 10, base+1001, codec.None))
		if n := len(l.Segments()); n != 2 {
			t.Fatalf("did not roll past segment.ms: %d segments", n)
		}
		// Wall clock does not matter when batches carry timestamps.
		clock.t = clock.t.Add(time.Hour)
		mustAppend(t, l, batchOf(t, 1, 10, base+1002, codec.None))
		if n := len(l.Segments()); n != 2 {
			t.Fatalf("rolled by wall clock: %d segments", n)
		}
	})
	t.Run("segment.ms by wall clock without timestamps", func(t *testing.T) {
		clock := &fakeClock{t: time.UnixMilli(base)}
		l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{"segment.ms": "1000"}), clock, 0)
		defer l.Close()
		mustAppend(t, l, batchOf(t, 1, 10, -1, codec.None))
		clock.t = clock.t.Add(1001 * time.Millisecond)
		mustAppend(t, l, batchOf(t, 1, 10, -1, codec.None))
		if n := len(l.Segments()); n != 2 {
			t.Fatalf("no wall-clock roll: %d segments", n)
		}
	})
	t.Run("full offset index", func(t *testing.T) {
		clock := &fakeClock{t: time.UnixMilli(base)}
		l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{"segment.index.bytes": "16", "index.interval.bytes": "0"}), clock, 0)
		defer l.Close()
		for i := 0; i < 7; i++ {
			mustAppend(t, l, batchOf(t, 1, 10, base+int64(i), codec.None))
		}
		if n := len(l.Segments()); n < 2 {
			t.Fatalf("full index did not roll: %d segments", n)
		}
	})
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestAppendValidation(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1000)}
	good := batchOf(t, 3, 10, 1000, codec.None)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 1
	var e record.Encoder
	keyless, _ := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), []record.Record{{Offset: 0, Timestamp: 1, Value: []byte("x")}})
	gapSpec := record.NewBatchSpec(0, codec.None)
	gapSpec.LastOffsetDelta = 1
	gap, _ := e.AppendBatch(nil, gapSpec, []record.Record{{Offset: 0, Timestamp: 1, Key: []byte("a")}, {Offset: 2, Timestamp: 1, Key: []byte("b")}})
	legacy, _ := os.ReadFile("../testdata/fixtures/kafka-go/v1-v1.records.bin")
	tests := []struct {
		name  string
		cfg   map[string]string
		data  []byte
		code  string
		wants string
	}{
		{"bad_crc", nil, corrupt, "CORRUPT_MESSAGE", "checksum"},
		{"torn", nil, good[:len(good)-1], "CORRUPT_MESSAGE", "incomplete"},
		{"too_large", map[string]string{"max.message.bytes": "50"}, good, "MESSAGE_TOO_LARGE", "max.message.bytes"},
		{"keyless_compacted", map[string]string{"cleanup.policy": "compact"}, keyless, "INVALID_RECORD", "without key"},
		{"offset_gap", nil, gap, "INVALID_RECORD", "consecutive"},
		{"legacy", nil, legacy, "UNSUPPORTED_VERSION", "magic"},
		{"good_then_bad", nil, append(append([]byte(nil), good...), corrupt...), "CORRUPT_MESSAGE", "checksum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, tc.cfg), clock, 0)
			defer l.Close()
			_, err := l.Append(append([]byte(nil), tc.data...))
			var ie *InvalidRecordError
			if !errors.As(err, &ie) || ie.Code != tc.code || !bytes.Contains([]byte(err.Error()), []byte(tc.wants)) {
				t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.wants)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("refused append wrote data: end %d size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}

func TestCompressionTypeRecompresses(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1000)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, map[string]string{"compression.type": "zstd"}), clock, 0)
	defer l.Close()
	mustAppend(t, l, batchOf(t, 20, 100, 1000, codec.None))
	res, err := l.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if c := record.Batch(res.Data).Codec(); c != codec.Zstd {
		t.Fatalf("stored codec %v, want zstd", c)
	}
	if got := readAll(t, l); len(got) != 20 || string(got[19].Key) != "k19" {
		t.Fatalf("records after recompression: %d", len(got))
	}
}

func TestTransactionsIndexAborts(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1000)}
	dir := t.TempDir()
	l, _ := openTestLog(t, vfs.Default, dir, testConfig(t, nil), clock, 0)
	txBatch := func(pid int64) []byte {
		spec := record.NewBatchSpec(0, codec.None)
		spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, pid, 0, 0
		var e record.Encoder
		b, err := e.AppendBatch(nil, spec, []record.Record{{Offset: 0, Timestamp: 1000, Key: []byte("k"), Value: []byte("v")}, {Offset: 1, Timestamp: 1000, Key: []byte("k")}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustAppend(t, l, txBatch(7))                                    // 0-1
	mustAppend(t, l, txBatch(8))                                    // 2-3
	if _, err := l.AppendEndTxnMarker(7, 0, false, 3); err != nil { // abort at 4
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(8, 0, true, 3); err != nil { // commit at 5
		t.Fatal(err)
	}
	aborted := l.AbortedTxns(0, 100)
	if len(aborted) != 1 || aborted[0].ProducerID != 7 || aborted[0].FirstOffset != 0 || aborted[0].LastOffset != 4 || aborted[0].LastStableOffset != 2 {
		t.Fatalf("aborted txns %+v", aborted)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(SegmentPath(dir, 0, TxnIndexSuffix)); err != nil {
		t.Fatalf("no .txnindex: %v", err)
	}
	// Recovery (a torn tail after the markers) keeps the aborted transaction.
	f, err := os.OpenFile(SegmentPath(dir, 0, LogSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(txBatch(9)[:40])
	_ = f.Close()
	l2, rep := openTestLog(t, vfs.Default, dir, testConfig(t, nil), clock, 0)
	defer l2.Close()
	if rep.BytesTruncated != 40 {
		t.Fatalf("truncated %d", rep.BytesTruncated)
	}
	if got := l2.AbortedTxns(0, 100); len(got) != 1 || got[0] != aborted[0] {
		t.Fatalf("aborted txns after recovery %+v, want %+v", got, aborted)
	}
}

// corruptCase builds a log, damages it, reopens it and checks what survives.
func TestRecoveryTable(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "6000"})
	build := func(t *testing.T) (string, []SegmentInfo) {
		dir := t.TempDir()
		l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
		for i := 0; i < 30; i++ {
			mustAppend(t, l, batchOf(t, 5, 100, 1_700_000_000_000+int64(i), codec.None))
		}
		segs := l.Segments()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if len(segs) < 3 {
			t.Fatalf("need 3+ segments, got %d", len(segs))
		}
		return dir, segs
	}
	lastSegOf := func(segs []SegmentInfo) SegmentInfo { return segs[len(segs)-1] }
	tests := []struct {
		name      string
		damage    func(t *testing.T, dir string, segs []SegmentInfo)
		rp        func(segs []SegmentInfo) int64
		wantEnd   func(segs []SegmentInfo) int64
		wantTrunc bool
	}{
		{
			name: "torn_last_batch",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				s := lastSegOf(segs)
				if err := os.Truncate(s.Path, s.Size-7); err != nil {
					t.Fatal(err)
				}
			},
			rp:        func(segs []SegmentInfo) int64 { return lastSegOf(segs).BaseOffset },
			wantEnd:   func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset - 5 },
			wantTrunc: true,
		},
		{
			name: "bad_checksum_mid_log",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// Flip a byte inside the second batch of segment 1: it and
				// everything after it is lost.
				f, err := os.OpenFile(segs[1].Path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				b := batchOf(t, 5, 100, 0, codec.None)
				if _, err := f.WriteAt([]byte{0xff}, int64(len(b)+100)); err != nil {
					t.Fatal(err)
				}
			},
			rp:        func(segs []SegmentInfo) int64 { return 0 },
			wantEnd:   func(segs []SegmentInfo) int64 { return segs[1].BaseOffset + 5 },
			wantTrunc: true,
		},
		{
			name: "garbage_index",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				if err := os.WriteFile(SegmentPath(dir, segs[0].BaseOffset, IndexSuffix), []byte("this is not an index!!"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(SegmentPath(dir, segs[1].BaseOffset, TimeIndexSuffix), bytes.Repeat([]byte{0xff}, 24), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			rp:      func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
			wantEnd: func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
		},
		{
			name: "missing_index",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				_ = os.Remove(SegmentPath(dir, segs[0].BaseOffset, IndexSuffix))
				_ = os.Remove(SegmentPath(dir, segs[0].BaseOffset, TimeIndexSuffix))
			},
			rp:      func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
			wantEnd: func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
		},
		{
			name: "leftover_cleaned_and_deleted",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// A crash mid-clean leaves .cleaned files; a crash mid-delete .deleted ones.
				data, _ := os.ReadFile(segs[0].Path)
				_ = os.WriteFile(SegmentPath(dir, segs[0].BaseOffset, LogSuffix+CleanedSuffix), data[:100], 0o644)
				_ = os.WriteFile(SegmentPath(dir, 999999, LogSuffix+DeletedSuffix), data, 0o644)
			},
			rp:      func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
			wantEnd: func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
		},
		{
			name: "leftover_swap_completes",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// A compaction merged segments 0 and 1 into a .swap and
				// crashed before deleting them: the swap replaces both.
				a, _ := os.ReadFile(segs[0].Path)
				b, _ := os.ReadFile(segs[1].Path)
				swap := SegmentPath(dir, segs[0].BaseOffset, LogSuffix+SwapSuffix)
				if err := os.WriteFile(swap, append(a, b...), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			rp:      func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
			wantEnd: func(segs []SegmentInfo) int64 { return lastSegOf(segs).NextOffset },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := build(t)
			tc.damage(t, dir, segs)
			l, rep := openTestLog(t, vfs.Default, dir, cfg, clock, tc.rp(segs))
			defer l.Close()
			if got, want := l.LogEndOffset(), tc.wantEnd(segs); got != want {
				t.Fatalf("log end %d, want %d (report %+v)", got, want, rep)
			}
			if tc.wantTrunc != (rep.BytesTruncated > 0) {
				t.Fatalf("truncated %d bytes, want truncation=%v", rep.BytesTruncated, tc.wantTrunc)
			}
			recs := readAll(t, l)
			if int64(len(recs)) != tc.wantEnd(segs) {
				t.Fatalf("read %d records, want %d", len(recs), tc.wantEnd(segs))
			}
			for i, r := range recs {
				if r.Offset != int64(i) {
					t.Fatalf("record %d has offset %d", i, r.Offset)
				}
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if isTempName(e.Name()) {
					t.Fatalf("leftover %s after recovery", e.Name())
				}
			}
			if tc.name == "leftover_swap_completes" {
				if n := len(l.Segments()); n != len(segs)-1 {
					t.Fatalf("%d segments after swap, want %d", n, len(segs)-1)
				}
			}
			// The log accepts appends after recovery.
			mustAppend(t, l, batchOf(t, 1, 1, 1_700_000_100_000, codec.None))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertIndexesPointAtBatches(t, dir)
		})
	}
}

// TestCrashKeepsFlushedData appends, flushes, appends more, "loses power"
// and checks everything flushed survives and the log is consistent.
func TestCrashKeepsFlushedData(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "5000"})
	mem := vfs.NewMem()
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batchOf(t, 3, 100, 1_700_000_000_000+int64(i), codec.None))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := l.LogEndOffset()
	rp := l.RecoveryPoint()
	for i := 0; i < 20; i++ {
		mustAppend(t, l, batchOf(t, 3, 100, 1_700_000_001_000+int64(i), codec.None))
	}
	crashed := mem.CrashClone()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := openTestLog(t, crashed, "/d/t-0", cfg, clock, rp)
	defer l2.Close()
	if l2.LogEndOffset() < flushed {
		t.Fatalf("lost flushed data: end %d < flushed %d", l2.LogEndOffset(), flushed)
	}
	if got := readAll(t, l2); int64(len(got)) != l2.LogEndOffset() {
		t.Fatalf("read %d records, end %d", len(got), l2.LogEndOffset())
	}
}

func FuzzRecovery(f *testing.F) {
	f.Add([]byte{}, uint16(0), byte(0))
	f.Add([]byte{1, 2, 3}, uint16(100), byte(7))
	f.Fuzz(func(t *testing.T, garbage []byte, at uint16, flip byte) {
		clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
		cfg := testConfig(t, map[string]string{"index.interval.bytes": "200"})
		mem := vfs.NewMem()
		l, _, err := OpenLog(mem, "/p/t-0", LogOptions{Config: cfg, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if _, err := l.Append(batchOf(t, 2, 50, 1_700_000_000_000+int64(i), codec.None)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Damage: flip a byte and append garbage to the log.
		fh, err := mem.OpenFile("/p/t-0/00000000000000000000.log", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := fh.Stat()
		if fi.Size() > 0 {
			pos := int64(at) % fi.Size()
			var b [1]byte
			_, _ = fh.ReadAt(b[:], pos)
			b[0] ^= flip
			_, _ = fh.WriteAt(b[:], pos)
		}
		_, _ = fh.WriteAt(garbage, fi.Size())
		_ = fh.Close()
		l2, _, err := OpenLog(mem, "/p/t-0", LogOptions{Config: cfg, RecoveryPoint: 0, Now: clock.Now})
		if err != nil {
			t.Fatalf("recovery failed: %v", err)
		}
		defer l2.Close()
		// The base offset is not under the CRC, so a flipped one can only be
		// caught by ordering: offsets must still increase strictly.
		got := readAll(t, l2)
		for i := 1; i < len(got); i++ {
			if got[i].Offset <= got[i-1].Offset {
				t.Fatalf("offsets not increasing after recovery: %d then %d", got[i-1].Offset, got[i].Offset)
			}
		}
		if len(got) > 0 && got[len(got)-1].Offset >= l2.LogEndOffset() {
			t.Fatalf("record %d at or past log end %d", got[len(got)-1].Offset, l2.LogEndOffset())
		}
	})
}

// TestFlushPolicy: flush.messages=1 makes every append durable (it survives
// a power loss); the default leaves it to Flush.
func TestFlushPolicy(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	for _, tc := range []struct {
		name    string
		cfg     map[string]string
		advance time.Duration
		durable bool
	}{
		{"default", nil, 0, false},
		{"flush.messages=1", map[string]string{"flush.messages": "1"}, 0, true},
		{"flush.messages=4 after 3", map[string]string{"flush.messages": "4"}, 0, false},
		{"flush.ms=1000 reached", map[string]string{"flush.ms": "1000"}, 1500 * time.Millisecond, true},
		{"flush.ms=1000 not reached", map[string]string{"flush.ms": "1000"}, 500 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			c := &fakeClock{t: clock.t}
			l, _ := openTestLog(t, mem, "/d/t-0", testConfig(t, tc.cfg), c, 0)
			c.t = c.t.Add(tc.advance)
			info := mustAppend(t, l, batchOf(t, 3, 10, 1_700_000_000_000, codec.None))
			if info.Durable != tc.durable {
				t.Fatalf("Durable = %v, want %v", info.Durable, tc.durable)
			}
			crashed := mem.CrashClone()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, _ := openTestLog(t, crashed, "/d/t-0", testConfig(t, tc.cfg), c, 0)
			defer l2.Close()
			if got := l2.LogEndOffset(); (got == 3) != tc.durable {
				t.Fatalf("after power loss the log ends at %d; durable=%v", got, tc.durable)
			}
		})
	}
}
