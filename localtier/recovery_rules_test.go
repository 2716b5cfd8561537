package localtier

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/checkpoint"
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
	segs := appendFourSegments(t, l, clock)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 4 {
		t.Fatalf("built %d segments, want 4", len(segs))
	}
	return dir, segs
}

// appendFourSegments appends 40 batches of 5 records to l, rolling every
// 10 batches, and returns the 4 segments.
func appendFourSegments(t *testing.T, l *Log, clock *fakeClock) []SegmentInfo {
	t.Helper()
	for i := 0; i < 40; i++ {
		if i > 0 && i%10 == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, l, batchOf(t, 5, 100, clock.t.UnixMilli()+int64(i), codec.None))
	}
	return l.Segments()
}

// offsetsOf reads every record with Read from the log start, stepping over
// gaps (a read at an offset a damaged segment lost returns the next
// segment's first batch, as Kafka's does).
func offsetsOf(t *testing.T, l *Log) []int64 {
	t.Helper()
	out, err := readOffsets(l)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readOffsets(l *Log) ([]int64, error) {
	var out []int64
	var d record.Decoder
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			return out, fmt.Errorf("read at %d: %w", off, err)
		}
		if len(res.Data) == 0 {
			return out, fmt.Errorf("read at %d returned nothing before the log end %d", off, l.LogEndOffset())
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
				return out, err
			}
			for _, r := range recs {
				if r.Offset >= off {
					out = append(out, r.Offset)
				}
			}
			off = max(off, b.NextOffset())
		}
		if err := it.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
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
			name: "base_offset_reaching_the_next_segment",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// Batch 3 of segment 1 claims offsets of segment 2 (its
				// baseOffset is outside the CRC) and the index is gone, so
				// the segment is rebuilt: it ends before that batch.
				f, err := os.OpenFile(segs[1].Path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				var off [8]byte
				binary.BigEndian.PutUint64(off[:], uint64(segs[2].BaseOffset+10))
				if _, err := f.WriteAt(off[:], 3*batchBytes); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(SegmentPath(dir, segs[1].BaseOffset, IndexSuffix)); err != nil {
					t.Fatal(err)
				}
			},
			rp:       func(segs []SegmentInfo) int64 { return segs[3].NextOffset },
			wantLost: [2]int64{65, 100}, wantEnd: 200, wantGap: 35,
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

// fourSegmentDataDir makes a data dir with topic "t" whose partition 0 has
// 4 segments of 50 records each (offsets 0..199), closed cleanly.
func fourSegmentDataDir(t *testing.T, clock *fakeClock) (string, []SegmentInfo) {
	t.Helper()
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("t", 1, map[string]string{"segment.bytes": "1048576", "index.interval.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	l, err := d.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	segs := appendFourSegments(t, l, clock)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, segs
}

// treeSums maps every file under dir but the lock file to its SHA-256.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == lockFile {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[path] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadOnlyOpenRecoversInMemory: a data dir opened read-only recovers by
// the same rules in memory, deletes nothing (so it continues at the next
// good segment, above the recovery point too), and leaves every file byte
// for byte as it was.
func TestReadOnlyOpenRecoversInMemory(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	batchBytes := int64(len(batchOf(t, 5, 100, 0, codec.None)))
	tests := []struct {
		name      string
		damage    func(t *testing.T, dir string, segs []SegmentInfo)
		wantLost  [][2]int64
		wantSwaps int
	}{
		{
			name: "flushed_segment_0_truncated",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				if err := os.Truncate(segs[0].Path, 3*batchBytes+50); err != nil {
					t.Fatal(err)
				}
			},
			wantLost: [][2]int64{{15, 50}},
		},
		{
			name: "index_missing_and_bad_checksum",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				f, err := os.OpenFile(segs[2].Path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt([]byte{0xee}, 2*batchBytes+100); err != nil {
					t.Fatal(err)
				}
				for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
					if err := os.Remove(SegmentPath(filepath.Dir(segs[2].Path), segs[2].BaseOffset, suf)); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantLost: [][2]int64{{110, 150}},
		},
		{
			name: "unflushed_torn_segments_and_leftovers",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// Nothing flushed: a writer would delete everything after
				// segment 1's tear. The reader keeps segments 2 and 3.
				rp := map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 0}
				if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, RecoveryPointCheckpoint), rp); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(segs[1].Path, 4*batchBytes+9); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(segs[3].Path, segs[3].Size-3); err != nil {
					t.Fatal(err)
				}
				pdir := filepath.Dir(segs[0].Path)
				for _, name := range []string{FilenamePrefix(7) + LogSuffix + DeletedSuffix, FilenamePrefix(999) + IndexSuffix,
					FilenamePrefix(0) + LogSuffix + CleanedSuffix, FilenamePrefix(123) + SnapshotSuffix} {
					if err := os.WriteFile(filepath.Join(pdir, name), []byte("leftover"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantLost: [][2]int64{{70, 100}, {195, 200}},
		},
		{
			name: "interrupted_compaction_swap",
			damage: func(t *testing.T, dir string, segs []SegmentInfo) {
				// A compaction merged segments 0 and 1 into a .swap and
				// stopped before replacing them: completed in memory.
				a, _ := os.ReadFile(segs[0].Path)
				b, _ := os.ReadFile(segs[1].Path)
				swap := SegmentPath(filepath.Dir(segs[0].Path), segs[0].BaseOffset, LogSuffix+SwapSuffix)
				if err := os.WriteFile(swap, append(a, b...), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantSwaps: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, segs := fourSegmentDataDir(t, clock)
			tc.damage(t, dir, segs)
			before := treeSums(t, dir)
			d, rep, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			l, err := d.Partition("t", 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			lost := int64(0)
			for o := int64(0); o < 200; o++ {
				in := false
				for _, r := range tc.wantLost {
					in = in || (o >= r[0] && o < r[1])
				}
				if in {
					lost++
				} else {
					want = append(want, o)
				}
			}
			got := offsetsOf(t, l)
			if !slices.Equal(got, want) {
				t.Fatalf("read-only open reads %d records (%v…), want %d (report %+v)", len(got), got[:min(len(got), 5)], len(want), rep.Recovery)
			}
			if rep.Recovery.SegmentsDeleted != 0 || (rep.Recovery.BytesTruncated > 0) != (len(tc.wantLost) > 0) {
				t.Fatalf("report %+v: want truncation in memory (%v), nothing deleted", rep.Recovery, len(tc.wantLost) > 0)
			}
			if rep.Recovery.SwapsCompleted != tc.wantSwaps {
				t.Fatalf("report %+v: want %d swaps completed in memory", rep.Recovery, tc.wantSwaps)
			}
			if _, err := l.Append(batchOf(t, 1, 1, clock.t.UnixMilli(), codec.None)); err == nil {
				t.Fatal("append to a read-only log succeeded")
			}
			if _, err := d.CreateTopic("other", 1, nil); err == nil {
				t.Fatal("create topic in a read-only data dir succeeded")
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if after := treeSums(t, dir); !maps.Equal(before, after) {
				t.Fatalf("a read-only open changed the data dir:\nbefore %v\nafter  %v", before, after)
			}
			// A second read-only open finds the same damage and reads the same.
			d2, rep2, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d2.Close()
			if rep2.Recovery.BytesTruncated != rep.Recovery.BytesTruncated {
				t.Fatalf("second read-only open truncated %d bytes, first %d", rep2.Recovery.BytesTruncated, rep.Recovery.BytesTruncated)
			}
		})
	}
}

// A create a crash interrupted is skipped by a read-only open, which leaves
// its files as they are; the next writing open removes them.
func TestReadOnlyOpenSkipsInterruptedCreate(t *testing.T) {
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("half", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// What a crash before the commit point leaves: the intent beside the dirs.
	intent := filepath.Join(dir, metaDir, "creating", "half.json")
	if err := os.MkdirAll(filepath.Dir(intent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(intent, []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeSums(t, dir)

	ro, rep, err := OpenLogDir(vfs.Default, dir, LogDirOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ro.Topic("half"); ok || len(rep.CreatesRolledBack) != 1 {
		t.Fatalf("read-only open: topic loaded %v, rolled back %v; want it skipped", ok, rep.CreatesRolledBack)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := treeSums(t, dir); !maps.Equal(before, after) {
		t.Fatalf("read-only open changed the files:\nbefore %v\nafter  %v", before, after)
	}

	rw, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, ok := rw.Topic("half"); ok {
		t.Fatal("writing open loaded the interrupted create")
	}
	for _, p := range []string{"half-0", "half-1", filepath.Join(metaDir, "creating", "half.json")} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Fatalf("%s survived the writing open: %v", p, err)
		}
	}
}
