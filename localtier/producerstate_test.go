package localtier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

func fixtureSnapshots(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"kafka-tester/*/kraft-combined-logs/*/*.snapshot", "kafka-connect-spooldir-fork/*/kafka-data/*/*.snapshot"} {
		m, _ := filepath.Glob(filepath.Join(fixtureRoot, pat))
		out = append(out, m...)
	}
	if len(out) < 60 {
		t.Fatalf("found only %d fixture snapshots", len(out))
	}
	return out
}

// Every snapshot a real broker wrote decodes with a valid CRC and encodes
// back to the same bytes.
func TestProducerSnapshotFixtures(t *testing.T) {
	withEntries := 0
	for _, p := range fixtureSnapshots(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := ReadProducerSnapshot(vfs.Default, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(data) != snapshotHeaderSize+snapshotEntrySize*len(entries) {
			t.Fatalf("%s: %d bytes for %d entries", p, len(data), len(entries))
		}
		if got := AppendProducerSnapshot(nil, entries); !bytes.Equal(got, data) {
			t.Fatalf("%s: re-encoding differs:\n got %x\nwant %x", p, got, data)
		}
		if len(entries) > 0 {
			withEntries++
		}
	}
	if withEntries == 0 {
		t.Fatal("no fixture snapshot holds a producer")
	}
	// The worked example of docs/format/producer-snapshot.md.
	p := filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs/foo-0/00000000000000000003.snapshot")
	entries, err := ReadProducerSnapshot(vfs.Default, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerEntry{{ProducerID: 0, ProducerEpoch: 0, LastSequence: 2, LastOffset: 2, OffsetDelta: 0,
		Timestamp: 1725272041932, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}}
	if !slices.Equal(entries, want) {
		t.Fatalf("entries %+v, want %+v", entries, want)
	}
	// A snapshot with no producers: 10 bytes, the CRC of 00000000.
	if got := AppendProducerSnapshot(nil, nil); !bytes.Equal(got, []byte{0, 1, 0x48, 0x67, 0x4b, 0xc7, 0, 0, 0, 0}) {
		t.Fatalf("empty snapshot %x", got)
	}
}

// Our producer state, derived from a broker's log alone, equals the broker's
// own clean-shutdown snapshot; opened with the snapshot, the log loads it.
func TestProducerStateMatchesBrokerSnapshots(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	compared := 0
	for _, src := range brokerPartitionDirs(t) {
		snaps, _ := filepath.Glob(filepath.Join(src, "*.snapshot"))
		if len(snaps) == 0 {
			continue
		}
		slices.Sort(snaps)
		newest := snaps[len(snaps)-1]
		want, err := ReadProducerSnapshot(vfs.Default, newest)
		if err != nil {
			t.Fatal(err)
		}
		snapOff, _, _ := ParseSegmentName(filepath.Base(newest))
		slices.SortFunc(want, func(a, b ProducerEntry) int { return int(a.ProducerID - b.ProducerID) })

		withSnap := copyDir(t, src)
		l, _ := openTestLog(t, vfs.Default, withSnap, testConfig(t, nil), clock, -1)
		end := l.LogEndOffset()
		loaded := l.Producers()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if snapOff != end {
			continue // not a clean-shutdown snapshot: state moved on since
		}
		if !slices.Equal(loaded, want) && !(len(loaded) == 0 && len(want) == 0) {
			t.Errorf("%s: loaded %+v, snapshot holds %+v", src, loaded, want)
		}
		scanned := copyDir(t, src)
		for _, s := range snaps {
			if err := os.Remove(filepath.Join(scanned, filepath.Base(s))); err != nil {
				t.Fatal(err)
			}
		}
		l, _ = openTestLog(t, vfs.Default, scanned, testConfig(t, nil), clock, -1)
		got := l.Producers()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: rebuilt from the log %+v, broker's snapshot %+v", src, got, want)
		}
		// Our clean-close snapshot is the broker's, byte for byte (one entry
		// at most, so the order of entries cannot differ).
		if len(want) <= 1 {
			ours, err := os.ReadFile(filepath.Join(scanned, filepath.Base(newest)))
			theirs, _ := os.ReadFile(newest)
			if err != nil || !bytes.Equal(ours, theirs) {
				t.Errorf("%s: our close snapshot %x (%v), broker's %x", src, ours, err, theirs)
			}
		}
		compared++
	}
	if compared < 5 {
		t.Fatalf("compared only %d partitions", compared)
	}
}

func randomEntries(r *rand.Rand, n int) []ProducerEntry {
	out := make([]ProducerEntry, n)
	for i := range out {
		out[i] = ProducerEntry{ProducerID: r.Int64(), ProducerEpoch: int16(r.Uint32()), LastSequence: int32(r.Uint32()),
			LastOffset: r.Int64() - r.Int64(), OffsetDelta: int32(r.Uint32()), Timestamp: r.Int64(),
			CoordinatorEpoch: int32(r.Uint32()), CurrentTxnFirstOffset: -1 + r.Int64N(3)}
	}
	return out
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 17, 1000} {
		entries := randomEntries(r, n)
		data := AppendProducerSnapshot([]byte("prefix"), entries)[len("prefix"):]
		got, err := DecodeProducerSnapshot(data)
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if !slices.Equal(got, entries) && n > 0 {
			t.Fatalf("%d entries: round trip differs", n)
		}
		if again := AppendProducerSnapshot(nil, got); !bytes.Equal(again, data) {
			t.Fatalf("%d entries: re-encoding differs", n)
		}
	}
}

func TestProducerSnapshotCorrupt(t *testing.T) {
	good := AppendProducerSnapshot(nil, randomEntries(rand.New(rand.NewPCG(3, 4)), 3))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	withCount := func(n uint32) []byte {
		b := AppendProducerSnapshot(nil, nil)
		binary.BigEndian.PutUint32(b[6:], n)
		binary.BigEndian.PutUint32(b[2:], 0)
		return b
	}
	cases := map[string][]byte{
		"empty":         {},
		"short_header":  good[:9],
		"truncated":     good[:len(good)-1],
		"torn_entry":    good[:snapshotHeaderSize+snapshotEntrySize+10],
		"trailing_byte": append(bytes.Clone(good), 0),
		"bad_crc":       mut(func(b []byte) []byte { b[20] ^= 1; return b }),
		"crc_field":     mut(func(b []byte) []byte { b[3] ^= 0x80; return b }),
		"version_0":     mut(func(b []byte) []byte { b[1] = 0; return b }),
		"version_2":     mut(func(b []byte) []byte { b[1] = 2; return b }),
		"hostile_count": withCount(math.MaxInt32),
		"negative":      withCount(0xffffffff),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			entries, err := DecodeProducerSnapshot(data)
			runtime.ReadMemStats(&after)
			var ce *CorruptSnapshotError
			if !errors.As(err, &ce) || entries != nil {
				t.Fatalf("got %d entries, err %v; want a *CorruptSnapshotError", len(entries), err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
				t.Fatalf("decoding a bad snapshot allocated %d bytes", n)
			}
		})
	}
	// The file reader names the file.
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/s/00000000000000000005.snapshot", cases["bad_crc"]); err != nil {
		t.Fatal(err)
	}
	_, err := ReadProducerSnapshot(mem, "/s/00000000000000000005.snapshot")
	var ce *CorruptSnapshotError
	if !errors.As(err, &ce) || ce.Path != "/s/00000000000000000005.snapshot" || !strings.Contains(err.Error(), "crc") {
		t.Fatalf("err %v", err)
	}
}

func FuzzProducerSnapshot(f *testing.F) {
	f.Add(AppendProducerSnapshot(nil, nil))
	f.Add(AppendProducerSnapshot(nil, randomEntries(rand.New(rand.NewPCG(5, 6)), 2)))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	if data, err := os.ReadFile(filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs/foo-0/00000000000000000003.snapshot")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeProducerSnapshot(data)
		if err != nil {
			var ce *CorruptSnapshotError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(entries) > len(data)/snapshotEntrySize {
			t.Fatalf("%d entries from %d bytes", len(entries), len(data))
		}
		if again := AppendProducerSnapshot(nil, entries); !bytes.Equal(again, data) {
			t.Fatalf("accepted snapshot does not re-encode to its bytes")
		}
	})
}

// txnBatchOf encodes n records of producer pid (transactional or only
// idempotent) starting at sequence seq.
func txnBatchOf(t testing.TB, pid int64, epoch int16, seq int32, txn bool, n int, ts int64) []byte {
	t.Helper()
	spec := record.NewBatchSpec(0, codec.None)
	spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = txn, pid, epoch, seq
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: ts + int64(i), Key: []byte("k"), Value: []byte("v")}
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func snapshotOffsets(t testing.TB, fsys vfs.FS, dir string) []int64 {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if off, suf, ok := ParseSegmentName(e.Name()); ok && suf == SnapshotSuffix {
			out = append(out, off)
		} else if strings.Contains(e.Name(), SnapshotSuffix) {
			t.Fatalf("leftover %s", e.Name())
		}
	}
	return out
}

// buildTxnLog writes, across four segments: producer 7's transaction from
// offset 0 (left open), idempotent producer 9, producer 8's transaction
// from offset 4 (left open), plain records. It returns the producer state
// the log must report.
func buildTxnLog(t *testing.T, l *Log) []ProducerEntry {
	t.Helper()
	mustAppend(t, l, txnBatchOf(t, 7, 0, 0, true, 2, 1000)) // 0-1
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, txnBatchOf(t, 9, 3, math.MaxInt32, false, 2, 2000)) // 2-3, sequence wraps to 0
	mustAppend(t, l, txnBatchOf(t, 8, 1, 0, true, 1, 3000))              // 4
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, txnBatchOf(t, 7, 0, 2, true, 3, 4000)) // 5-7, same transaction
	mustAppend(t, l, batchOf(t, 2, 10, 5000, codec.None))   // 8-9
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(t, 1, 10, 6000, codec.None)) // 10
	return []ProducerEntry{
		{ProducerID: 7, ProducerEpoch: 0, LastSequence: 4, LastOffset: 7, OffsetDelta: 2, Timestamp: 4002, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 0},
		{ProducerID: 8, ProducerEpoch: 1, LastSequence: 0, LastOffset: 4, OffsetDelta: 0, Timestamp: 3000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 4},
		{ProducerID: 9, ProducerEpoch: 3, LastSequence: 0, LastOffset: 3, OffsetDelta: 1, Timestamp: 2001, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}
}

// checkAbortAfterRestart aborts producer 7's transaction on a reopened log:
// the .txnindex entry spans [0, marker] with producer 8's open transaction
// as its last stable offset.
func checkAbortAfterRestart(t *testing.T, l *Log, want []ProducerEntry) {
	t.Helper()
	if got := l.Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers after restart\n got %+v\nwant %+v", got, want)
	}
	if got := l.LastStableOffset(); got != 0 {
		t.Fatalf("LSO after restart %d, want 0", got)
	}
	at, err := l.AppendEndTxnMarker(7, 0, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	got := l.AbortedTxns(0, at+1)
	if len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != 0 || got[0].LastOffset != at || got[0].LastStableOffset != 4 {
		t.Fatalf("aborted txns %+v, want producer 7 [0, %d] with LSO 4", got, at)
	}
	if lso := l.LastStableOffset(); lso != 4 {
		t.Fatalf("LSO after the abort %d, want 4 (producer 8 still open)", lso)
	}
	p := l.Producers()[0]
	if p.CurrentTxnFirstOffset != -1 || p.CoordinatorEpoch != 5 || p.LastOffset != 7 || p.Timestamp != clockMs(l) {
		t.Fatalf("producer 7 after its abort marker %+v", p)
	}
}

func clockMs(l *Log) int64 { return l.now().UnixMilli() }

// An open transaction spanning segments survives a clean restart (close
// snapshot), an unclean one (roll snapshots + replay), and a restart with
// every snapshot corrupt or gone (replay from the log start).
func TestOpenTxnSurvivesRestart(t *testing.T) {
	cfg := testConfig(t, nil)
	for _, mode := range []string{"clean", "crash", "corrupt_newest", "corrupt_all", "no_snapshots"} {
		t.Run(mode, func(t *testing.T) {
			clock := &fakeClock{t: time.UnixMilli(9000)}
			mem := vfs.NewMem()
			l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
			want := buildTxnLog(t, l)
			if got := l.Producers(); !slices.Equal(got, want) {
				t.Fatalf("producers %+v, want %+v", got, want)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp := l.RecoveryPoint()
			fsys := mem
			if mode == "crash" {
				fsys = mem.CrashClone()
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			snaps := snapshotOffsets(t, fsys, "/d/t-0")
			wantSnaps := []int64{2, 5, 10, 11}
			if mode == "crash" {
				wantSnaps = []int64{2, 5, 10}
			}
			if !slices.Equal(snaps, wantSnaps) {
				t.Fatalf("snapshots %v, want %v", snaps, wantSnaps)
			}
			corrupt := func(off int64) {
				p := SnapshotPath("/d/t-0", off)
				f, err := fsys.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte{0xff}, 12); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			}
			switch mode {
			case "corrupt_newest":
				corrupt(11)
			case "corrupt_all":
				for _, off := range snaps {
					corrupt(off)
				}
			case "no_snapshots":
				for _, off := range snaps {
					if err := fsys.Remove(SnapshotPath("/d/t-0", off)); err != nil {
						t.Fatal(err)
					}
				}
			}
			l2, _ := openTestLog(t, fsys, "/d/t-0", cfg, clock, rp)
			defer l2.Close()
			switch mode {
			case "corrupt_newest":
				if got := snapshotOffsets(t, fsys, "/d/t-0"); !slices.Equal(got, []int64{2, 5, 10}) {
					t.Fatalf("snapshots after loading past a corrupt one %v", got)
				}
			case "corrupt_all":
				if got := snapshotOffsets(t, fsys, "/d/t-0"); len(got) != 0 {
					t.Fatalf("corrupt snapshots left %v", got)
				}
			}
			checkAbortAfterRestart(t, l2, want)
		})
	}
}

// crashInjector simulates a power cut just before operation `at` (counted
// once armed): it keeps the durable state of the filesystem and fails the
// operation and every later one.
type crashInjector struct {
	mem   *vfs.MemFS
	armed bool
	at    int
	n     int
	image *vfs.MemFS
}

func (c *crashInjector) MaybeError(vfs.Op) error {
	if !c.armed {
		return nil
	}
	if c.image == nil && c.n == c.at {
		c.image = c.mem.CrashClone()
	}
	c.n++
	if c.image != nil {
		return vfs.ErrInjected
	}
	return nil
}

// A crash at every filesystem step of a roll snapshot and of the
// clean-close snapshot leaves a directory that opens to the right producer
// state.
func TestProducerSnapshotCrashAtEveryStep(t *testing.T) {
	cfg := testConfig(t, nil)
	for _, phase := range []string{"roll", "close"} {
		t.Run(phase, func(t *testing.T) {
			sawSnapshot := false
			for at := 0; ; at++ {
				clock := &fakeClock{t: time.UnixMilli(9000)}
				mem := vfs.NewMem()
				inj := &crashInjector{mem: mem, at: at}
				efs := vfs.NewErrorFS(mem, inj)
				l, _ := openTestLog(t, efs, "/d/t-0", cfg, clock, 0)
				want := buildTxnLog(t, l)
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				rp := l.RecoveryPoint()
				inj.armed = true
				var err error
				if phase == "roll" {
					err = l.Roll()
				}
				err = errors.Join(err, l.Close())
				if inj.image == nil {
					if err != nil {
						t.Fatal(err)
					}
					if !sawSnapshot {
						t.Fatal("no crash image ever held the new snapshot")
					}
					t.Logf("%d crash points", at)
					return
				}
				if !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("crash at step %d: %v", at, err)
				}
				snaps := snapshotOffsets(t, inj.image, "/d/t-0")
				sawSnapshot = sawSnapshot || slices.Contains(snaps, 11)
				l2, _ := openTestLog(t, inj.image, "/d/t-0", cfg, clock, rp)
				if got := l2.Producers(); !slices.Equal(got, want) {
					t.Fatalf("crash at step %d: producers %+v, want %+v", at, got, want)
				}
				if got := l2.LastStableOffset(); got != 0 {
					t.Fatalf("crash at step %d: LSO %d", at, got)
				}
				if err := l2.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A roll snapshot lies past the log end when the data below it is lost
// after all (here a torn tail: the disk kept only part of what a flush
// wrote): the snapshot is removed (durably), never taken for the state of
// data appended later.
func TestSnapshotPastLogEndRemoved(t *testing.T) {
	cfg := testConfig(t, nil)
	clock := &fakeClock{t: time.UnixMilli(9000)}
	mem := vfs.NewMem()
	l, _ := openTestLog(t, mem, "/d/t-0", cfg, clock, 0)
	mustAppend(t, l, txnBatchOf(t, 9, 0, 0, false, 2, 1000)) // 0-1
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	seg0 := SegmentPath("/d/t-0", 0, LogSuffix)
	fi, err := mem.Stat(seg0)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, txnBatchOf(t, 7, 0, 0, true, 3, 2000)) // 2-4
	if err := l.Roll(); err != nil {                        // snapshot 5: producer 7 open at 2
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	f, err := crashed.OpenFile(seg0, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size() + 20); err != nil { // batch 2-4 torn
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, crashed, "/d/t-0"); !slices.Equal(got, []int64{5}) {
		t.Fatalf("snapshots in the crash image %v", got)
	}
	l2, _ := openTestLog(t, crashed, "/d/t-0", cfg, clock, 2)
	if l2.LogEndOffset() != 2 {
		t.Fatalf("log end %d after losing the unflushed batch", l2.LogEndOffset())
	}
	if got := snapshotOffsets(t, crashed, "/d/t-0"); len(got) != 0 {
		t.Fatalf("snapshot past the log end kept: %v", got)
	}
	if got := snapshotOffsets(t, crashed.CrashClone(), "/d/t-0"); len(got) != 0 {
		t.Fatalf("removal of the snapshot past the log end is not durable: %v", got)
	}
	// Offsets 2-6 now hold other data: no transaction is open.
	mustAppend(t, l2, batchOf(t, 5, 10, 3000, codec.None))
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3, _ := openTestLog(t, crashed, "/d/t-0", cfg, clock, 7)
	defer l3.Close()
	if lso, n := l3.LastStableOffset(), len(l3.Producers()); lso != 7 || n != 1 {
		t.Fatalf("LSO %d with %d producers, want 7 and only producer 9", lso, n)
	}
}

// Retention removes the snapshots below the new log start offset; the log
// reopens from the ones left.
func TestRetentionRemovesSnapshots(t *testing.T) {
	cfg := testConfig(t, nil)
	clock := &fakeClock{t: time.UnixMilli(9000)}
	dir := t.TempDir()
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	want := buildTxnLog(t, l)
	if _, err := l.DeleteSegments(5); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, vfs.Default, dir); !slices.Equal(got, []int64{5, 10}) {
		t.Fatalf("snapshots after retention %v", got)
	}
	if got := l.LastStableOffset(); got != 5 {
		t.Fatalf("LSO %d, want the log start offset 5 (the open transactions began below it)", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _, err := OpenLog(vfs.Default, dir, LogOptions{Config: cfg, RecoveryPoint: 11, LogStartOffset: 5, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.Producers(); !slices.Equal(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
}

var kafkaPartitionFile = regexp.MustCompile(`^(\d{20}\.(log|index|timeindex|txnindex|snapshot)|leader-epoch-checkpoint|partition\.metadata)$`)

// The partition directory our engine leaves looks like a broker's: segment
// files and snapshots named by 20-digit offsets, one snapshot per segment
// base plus the clean-close one, each a valid snapshot.
func TestPartitionDirLooksLikeKafka(t *testing.T) {
	cfg := testConfig(t, nil)
	clock := &fakeClock{t: time.UnixMilli(9000)}
	dir := t.TempDir()
	l, _ := openTestLog(t, vfs.Default, dir, cfg, clock, 0)
	buildTxnLog(t, l)
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	bases := map[int64]bool{}
	for _, s := range l.Segments() {
		bases[s.BaseOffset] = true
	}
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var snaps int
	for _, e := range ents {
		if !kafkaPartitionFile.MatchString(e.Name()) {
			t.Errorf("%s is not a name a Kafka partition directory holds", e.Name())
		}
		off, suf, _ := ParseSegmentName(e.Name())
		if suf != SnapshotSuffix {
			continue
		}
		snaps++
		if off != 0 && !bases[off] && off != end {
			t.Errorf("snapshot %s is neither at a segment base nor at the log end %d", e.Name(), end)
		}
		if _, err := ReadProducerSnapshot(vfs.Default, filepath.Join(dir, e.Name())); err != nil {
			t.Error(err)
		}
	}
	if snaps != 4 {
		t.Fatalf("%d snapshots, want 4 (3 rolls + close)", snaps)
	}
	// The Kafka-written .snapshot loaded by our engine: a partition of the
	// real broker's dir reopens with the broker's producer.
	l2, _ := openTestLog(t, vfs.Default, copyDir(t, filepath.Join(fixtureRoot, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs/foo-0")), cfg, clock, -1)
	defer l2.Close()
	if got := l2.Producers(); len(got) != 1 || got[0].LastSequence != 2 || got[0].Timestamp != 1725272041932 {
		t.Fatalf("producers of the broker's foo-0 %+v", got)
	}
}

// A marker with a bumped epoch (a coordinator abort after a timeout)
// forgets the producer's batches, as Kafka's maybeUpdateProducerEpoch does;
// a commit writes no .txnindex entry.
func TestMarkerEpochBumpAndCommit(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(9000)}
	l, _ := openTestLog(t, vfs.NewMem(), "/d/t-0", testConfig(t, nil), clock, 0)
	defer l.Close()
	mustAppend(t, l, txnBatchOf(t, 7, 0, 0, true, 2, 1000))
	mustAppend(t, l, txnBatchOf(t, 8, 0, 0, true, 1, 1000))
	if _, err := l.AppendEndTxnMarker(7, 1, false, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(8, 0, true, 2); err != nil {
		t.Fatal(err)
	}
	got := l.Producers()
	want := []ProducerEntry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: -1, LastOffset: -1, Timestamp: 9000, CoordinatorEpoch: 2, CurrentTxnFirstOffset: -1},
		{ProducerID: 8, ProducerEpoch: 0, LastSequence: 0, LastOffset: 2, Timestamp: 9000, CoordinatorEpoch: 2, CurrentTxnFirstOffset: -1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("producers\n got %+v\nwant %+v", got, want)
	}
	if a := l.AbortedTxns(0, 10); len(a) != 1 || a[0].ProducerID != 7 || a[0].LastStableOffset != 2 {
		t.Fatalf("aborted %+v", a)
	}
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d, log end %d", lso, l.LogEndOffset())
	}
}

func TestNextSequenceWraps(t *testing.T) {
	for _, c := range []struct{ seq, inc, want int32 }{
		{0, 0, 0}, {5, 3, 8}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32 - 1, 2, 0}, {math.MaxInt32, 1, 0}, {math.MaxInt32, 5, 4},
	} {
		if got := nextSequence(c.seq, c.inc); got != c.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", c.seq, c.inc, got, c.want)
		}
	}
}
