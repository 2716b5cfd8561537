package localtier

import (
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// buildFourSegments writes 4 segments of 10 batches × 5 records (offsets
// 0..199) and closes the log cleanly, so the recovery point is the log end.
func buildFourSegments(t *testing.T, clock *fakeClock) (string, []SegmentInfo) {
	t.Helper()
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "60000", "index.interval.bytes": "1000"})
	dir := t.TempDir()
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	for i := 0; i < 40; i++ {
		if i > 0 && i%10 == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, l, batchOf(t, 5, 100, clock.t.UnixMilli()+int64(i), codec.None))
	}
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 4 {
		t.Fatalf("built %d segments, want 4", len(segs))
	}
	return dir, segs
}

// offsetsOf reads every record with Read from the log start, stepping over
// gaps (a read at an offset a damaged segment lost returns the next
// segment's first batch, as Kafka's does).
func offsetsOf(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	var d record.Decoder
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Data) == 0 {
			t.Fatalf("read at %d returned nothing before the log end %d", off, l.LogEndOffset())
		}
		it := record.NewIter(res.Data)
		it.Verify = true
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
				if r.Offset >= off {
					out = append(out, r.Offset)
				}
			}
			off = max(off, b.NextOffset())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRecoveryBelowRecoveryPointKeepsLaterSegments is the case: a
// flushed segment whose bytes or indexes are damaged loses only its own bad
// tail; the flushed segments after it stay (Kafka's loadSegmentFiles), and
// reads step over the gap. Above the recovery point, the first truncated
// segment still ends the log (Kafka's recoverLog).
func TestRecoveryBelowRecoveryPointKeepsLaterSegments(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	cfg := testConfig(t, map[string]string{"internal.segment.bytes": "60000", "index.interval.bytes": "1000"})
	batchBytes := int64(len(batchOf(t, 5, 100, 0, codec.None)))
	tests := []struct {
		name string
		// damage returns the offsets that must be gone.
		damage      func(t *testing.T, dir string, segs []SegmentInfo)
		rp          func(segs []SegmentInfo) int64
		wantLost    [2]int64 // [from, to) of lost offsets
		wantEnd     int64
		wantDeleted int
		wantGap     int64 // RecoveryReport.OffsetsLost
	}{
		{
			name: "segment_0_truncated_mid_batch",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// Keep 3 whole batches and part of the 4th.
				if err := os.Truncate(segs[0].Path, 3*batchBytes+50); err != nil {
					t.Fatal(err)
				}
			},
			rp:       func(segs []SegmentInfo) int64 { return segs[3].NextOffset },
			wantLost: [2]int64{15, 50}, wantEnd: 200, wantGap: 35,
		},
		{
			name: "segment_1_checksum_and_missing_index",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// A flipped byte in batch 6 of segment 1 and its index gone:
				// the index rebuild finds the bad CRC there.
				f, err := os.OpenFile(segs[1].Path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt([]byte{0xee}, 6*batchBytes+100); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(SegmentPath(dir, segs[1].BaseOffset, IndexSuffix)); err != nil {
					t.Fatal(err)
				}
			},
			rp:       func(segs []SegmentInfo) int64 { return segs[3].NextOffset },
			wantLost: [2]int64{80, 100}, wantEnd: 200, wantGap: 20,
		},
		{
			name: "last_flushed_segment_torn",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				if err := os.Truncate(segs[3].Path, segs[3].Size-7); err != nil {
					t.Fatal(err)
				}
			},
			rp:       func(segs []SegmentInfo) int64 { return segs[3].NextOffset },
			wantLost: [2]int64{195, 200}, wantEnd: 195,
		},
		{
			name: "above_recovery_point_kafka_deletes_the_rest",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				if err := os.Truncate(segs[1].Path, 3*batchBytes+50); err != nil {
					t.Fatal(err)
				}
			},
			// Only segment 0 was flushed: segment 1 on are recovered in
			// order and the truncation of segment 1 ends the log.
			rp:       func(segs []SegmentInfo) int64 { return segs[1].BaseOffset },
			wantLost: [2]int64{65, 200}, wantEnd: 65, wantDeleted: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := buildFourSegments(t, clock)
			tc.damage(t, dir, segs)
			l, rep := openTestLog(t, vfs.Default, dir, cfg, clock, tc.rp(segs))
			defer l.Close()
			if got := l.LogEndOffset(); got != tc.wantEnd {
				t.Fatalf("log end %d, want %d (report %+v)", got, tc.wantEnd, rep)
			}
			if rep.SegmentsDeleted != tc.wantDeleted || rep.OffsetsLost != tc.wantGap {
				t.Fatalf("report %+v: want %d segments deleted, %d offsets lost", rep, tc.wantDeleted, tc.wantGap)
			}
			var want []int64
			for o := int64(0); o < 200; o++ {
				if o < tc.wantLost[0] || o >= tc.wantLost[1] {
					want = append(want, o)
				}
			}
			got := offsetsOf(t, l)
			if len(got) != len(want) {
				t.Fatalf("read %d records, want %d (report %+v)", len(got), len(want), rep)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("record %d has offset %d, want %d", i, got[i], want[i])
				}
			}
			// A read inside the gap gets the first batch after it.
			if tc.wantGap > 0 {
				res, err := l.Read(tc.wantLost[0], 1<<20, true)
				if err != nil {
					t.Fatal(err)
				}
				if b := record.Batch(res.Data); len(res.Data) < record.HeaderSize || b.BaseOffset() != tc.wantLost[1] {
					t.Fatalf("read at %d in the gap: got %d bytes, want the batch at %d", tc.wantLost[0], len(res.Data), tc.wantLost[1])
				}
			}
			// The log still appends at its end, and a clean reopen changes nothing.
			mustAppend(t, l, batchOf(t, 1, 1, clock.t.UnixMilli(), codec.None))
			end := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertIndexesPointAtBatches(t, dir)
			l2, rep2 := openTestLog(t, vfs.Default, dir, cfg, clock, end)
			defer l2.Close()
			if rep2.BytesTruncated != 0 || rep2.SegmentsDeleted != 0 || l2.LogEndOffset() != end {
				t.Fatalf("reopen: report %+v, end %d, want %d", rep2, l2.LogEndOffset(), end)
			}
			if got := offsetsOf(t, l2); len(got) != len(want)+1 {
				t.Fatalf("reopen read %d records, want %d", len(got), len(want)+1)
			}
		})
	}
}
