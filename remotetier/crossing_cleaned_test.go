package remotetier

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Committed segments that cross the boundary of a cleaned local segment or
// of a range the cleaner emptied: after a leader change the new leader's
// segments are rolled at other offsets than the committed ones (the old
// leader's). Neither the cleaned segment nor the emptied range can replace
// their committed range alone (a replace never cuts a committed segment),
// yet the crossing segment holds records the cleaner dropped.

// ccRecords is one single-record batch per entry, from offset base on:
// "key=value", "key=" (a tombstone), or "-" (no record: the cleaner
// removed it).
func ccRecords(t testing.TB, base int64, recs ...string) []byte {
	t.Helper()
	var enc record.Encoder
	var out []byte
	for i, r := range recs {
		if r == "-" {
			continue
		}
		off := base + int64(i)
		k, v, _ := strings.Cut(r, "=")
		var val []byte
		if v != "" {
			val = []byte(v)
		}
		var err error
		out, err = enc.AppendBatch(out, record.NewBatchSpec(off, codec.None),
			[]record.Record{{Offset: off, Timestamp: upNow.UnixMilli(), Key: []byte(k), Value: val}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// ccSeq is "<prefix><i>=<value>" for i in [from, to).
func ccSeq(prefix string, from, to int, value string) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, prefix+strconv.Itoa(i)+"="+value)
	}
	return out
}

// ccUniformLog is a compacted partition's log not cleaned yet: segments of
// 10 single-record batches from 0 to end, key k<offset>, value value.
func ccUniformLog(t *testing.T, end int64, value string) *memSource {
	t.Helper()
	ms := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	ms.p.CleanedUpTo = 0
	for b := int64(0); b < end; b += 10 {
		ms.p.Segments = append(ms.p.Segments, ms.segment(b, b+10, b+10, ccRecords(t, b, ccSeq("k", int(b), int(b+10), value)...)))
	}
	return ms
}

// ccDeletedKeyLog is a compacted partition's log not cleaned yet, rolled at
// 20: key K's value at 17 in [0, 20), its tombstone at 35 in [20, 40); r0
// and r1 are the two segments' entries (ccRecords).
func ccDeletedKeyLog(t *testing.T) (ms *memSource, r0, r1 []string) {
	t.Helper()
	r0 = append(ccSeq("k", 0, 17, "v"), "K=v", "x18=v", "x19=v")
	r1 = append(append(ccSeq("x", 20, 35, "v"), "K="), ccSeq("y", 36, 40, "v")...)
	ms = &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	ms.p.CleanedUpTo = 0
	ms.p.Segments = []SegmentMeta{
		ms.segment(0, 20, 20, ccRecords(t, 0, r0...)),
		ms.segment(20, 40, 40, ccRecords(t, 20, r1...)),
	}
	return ms, r0, r1
}

// ccCleanDeletedKey makes ms, a ccDeletedKeyLog of entries r0 and r1, the
// log after a cleaning up to 40 past delete.retention.ms: K's value (17)
// and then its tombstone (35) gone, the rolls kept.
func ccCleanDeletedKey(t *testing.T, ms *memSource, r0, r1 []string) {
	t.Helper()
	c0, c1 := slices.Clone(r0), slices.Clone(r1)
	c0[17], c1[15] = "-", "-"
	ms.logs = map[int64][]byte{}
	ms.p.CleanedUpTo = 40
	ms.p.Segments = []SegmentMeta{
		ms.segment(0, 20, 20, ccRecords(t, 0, c0...)),
		ms.segment(20, 40, 40, ccRecords(t, 20, c1...)),
	}
}

// ccOldLeader commits the old leader's log of compacted partition c-0,
// not cleaned yet, rolled at 10, 20 and 25:
//
//	[0, 10)  k0..k9
//	[10, 20) k10..k14, x15, x16, K=v (17), x18, x19
//	[20, 25) x20..x24
//	[25, 40) x15..x24 again (25..34), K's tombstone (35), k36..k39
func ccOldLeader(t *testing.T, mem objstore.Bucket) {
	t.Helper()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	r2 := append(ccSeq("k", 10, 15, "v"), "x15=o", "x16=o", "K=v", "x18=o", "x19=o")
	r4 := append(append(ccSeq("x", 15, 25, "n"), "K="), ccSeq("k", 36, 40, "v")...)
	old.p.Segments = []SegmentMeta{
		old.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...)),
		old.segment(10, 20, 20, ccRecords(t, 10, r2...)),
		old.segment(20, 25, 25, ccRecords(t, 20, ccSeq("x", 20, 25, "o")...)),
		old.segment(25, 40, 40, ccRecords(t, 25, r4...)),
	}
	if rep, err := upUploader(t, mem, old, Options{}).RunOnce(context.Background()); err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("old leader's pass: %+v, %v", rep, err)
	}
}

// ccNewLeader is the new leader's log after a cleaning that also dropped
// K's tombstone (delete.retention.ms passed): rolled at 15 and 25, the
// segment [15, 25) emptied (every record superseded by [25, 35) or the
// tombstone).
//
//	[0, 15)  k0..k14
//	[15, 25) empty
//	[25, 40) x15..x24 (25..34), k36..k39
func ccNewLeader(t *testing.T) *memSource {
	t.Helper()
	lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	lead.p.CleanedUpTo = 40
	l3 := append(append(ccSeq("x", 15, 25, "n"), "-"), ccSeq("k", 36, 40, "v")...)
	lead.p.Segments = []SegmentMeta{
		lead.segment(0, 15, 15, ccRecords(t, 0, ccSeq("k", 0, 15, "v")...)),
		lead.segment(25, 40, 40, ccRecords(t, 25, l3...)),
	}
	lead.p.Emptied = []SegmentMeta{{BaseOffset: 15, NextOffset: 15, NextBase: 25, MaxTimestamp: -1}}
	return lead
}

// ccConsumeNoStale reads the remote tier (ecConsume) and returns its table
// after checking that it serves no K=v at 17, which the cleaner dropped.
func ccConsumeNoStale(t *testing.T, mem objstore.Bucket) map[string]string {
	t.Helper()
	recs, table := ecConsume(t, mem, "c")
	if ecHas(recs, "17:K=v") {
		t.Errorf("the remote tier serves 17:K=v, which the cleaner dropped: %v", recs)
	}
	return table
}

// ccWantTable is the table of the new leader's cleaned log.
func ccWantTable(t *testing.T, table map[string]string) {
	t.Helper()
	if v, ok := table["K"]; ok {
		t.Errorf("the remote tier serves deleted key K (=%s)", v)
	}
	want := map[string]string{}
	for i := range 15 {
		want["k"+strconv.Itoa(i)] = "v"
	}
	for i := 15; i < 25; i++ {
		want["x"+strconv.Itoa(i)] = "n"
	}
	for i := 36; i < 40; i++ {
		want["k"+strconv.Itoa(i)] = "v"
	}
	for k, v := range want {
		if table[k] != v {
			t.Errorf("remote table: %s=%q, want %q", k, table[k], v)
		}
	}
	if len(table) != len(want) {
		t.Errorf("remote table has %d keys, want %d: %v", len(table), len(want), table)
	}
}

// TestCrossingSegmentOfEmptiedRangeReplaced: the committed [10, 19]
// crosses both the new leader's cleaned [0, 14] and the range [15, 24] it
// emptied; the committed [25, 39] is replaced by the cleaned segment
// without K's tombstone. The uploader replaces [0, 24] (every committed
// segment there) by the cleaned [0, 14] in one commit: the remote tier
// serves no record the cleaner dropped and loses none it kept. Before the
// fix both the replace of [0, 14] and the removal of [15, 24] declined for
// the crossing segment, which kept K=v at 17 in the manifest while its
// tombstone was gone: a deleted key served again, for as long as the new
// leader's segments stay as they are.
func TestCrossingSegmentOfEmptiedRangeReplaced(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	ccOldLeader(t, mem)
	if _, table := ecConsume(t, mem, "c"); table["K"] != "" {
		t.Fatalf("before the leader change the remote tier serves K=%s, want it deleted", table["K"])
	}
	lead := ccNewLeader(t)
	u := upUploader(t, mem, lead, Options{})
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Commits != 1 || rep.ReplacedSegments != 3 {
		t.Errorf("pass: %d commits, %d replaced, want 1 and 3 ([0, 14] and [15, 24] emptied, one commit; [25, 39]): %+v",
			rep.Commits, rep.ReplacedSegments, rep.Partitions)
	}
	table := ccConsumeNoStale(t, mem)
	ccWantTable(t, table)
	m := upLoad(t, mem, "c", 0)
	var bases []int64
	for _, s := range upAllSegments(t, mem, m) {
		bases = append(bases, s.BaseOffset)
		if s.BaseOffset <= 24 && s.LastOffset >= 15 {
			t.Errorf("committed segment [%d, %d] holds offsets of the emptied range [15, 24]", s.BaseOffset, s.LastOffset)
		}
	}
	if len(bases) != 2 || bases[0] != 0 || bases[1] != 25 || m.LogStartOffset != 0 || m.NextOffset() != 40 {
		t.Errorf("committed segments at %v, log start %d, end %d; want [0, 14] and [25, 39], 0 and 40", bases, m.LogStartOffset, m.NextOffset())
	}
	upCheckConsistent(t, mem, "c", 0)
	if vr, err := VerifyBucket(ctx, mem, DefaultVerifyOptions()); err != nil || len(vr.Problems) != 0 {
		t.Fatalf("bucket verify: %v, problems %+v", err, vr.Problems)
	}
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 {
		t.Fatalf("a further pass changed the remote tier: %+v, %v", rep, err)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestCrossingSegmentKeptUnlessRunCleaned: a committed segment crossing
// a cleaned segment's boundary is replaced only with the cleaned run that
// covers it whole. When its other part lies in a range the cleaner has not
// been over, or one the source did not list (a segment gone mid-listing),
// nothing is replaced: no committed record the source may still hold is
// removed.
func TestCrossingSegmentKeptUnlessRunCleaned(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Partition)
	}{
		{"emptied range above the cleaner checkpoint", func(p *Partition) { p.CleanedUpTo = 20 }},
		{"emptied range not listed", func(p *Partition) { p.Emptied = nil }},
		{"not compacted", func(p *Partition) { p.Compacted = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			ccOldLeader(t, mem)
			lead := ccNewLeader(t)
			lead.p.Segments = lead.p.Segments[:1] // [0, 15) alone: [25, 40) keeps K's tombstone
			tc.edit(&lead.p)
			if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			bases := upBases(t, mem, upLoad(t, mem, "c", 0))
			if !slices.Equal(bases, []int64{0, 10, 20, 25}) {
				t.Fatalf("committed segments at %v, want the old leader's [0 10 20 25] kept", bases)
			}
			if recs, _ := ecConsume(t, mem, "c"); !ecHas(recs, "14:k14=v") || !ecHas(recs, "35:K=<tombstone>") {
				t.Fatalf("the remote tier serves %v", recs)
			}
		})
	}
}

// ccCrossBoth commits the old leader's [0, 10), [10, 20), [20, 30) and
// [30, 40) and returns the new leader's cleaned log rolled at 15 and 25
// (as ccNewLeader): both boundaries of the emptied [15, 25) are crossed,
// and [20, 30) crosses into [25, 40), so every segment is in one group.
func ccCrossBoth(t *testing.T, mem objstore.Bucket) *memSource {
	t.Helper()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	all := append(append(ccSeq("k", 0, 15, "v"), "x15=o", "x16=o", "K=v", "x18=o", "x19=o"), ccSeq("x", 20, 25, "o")...)
	all = append(append(append(all, ccSeq("x", 15, 25, "n")...), "K="), ccSeq("k", 36, 40, "v")...)
	for b := 0; b < 40; b += 10 {
		old.p.Segments = append(old.p.Segments, old.segment(int64(b), int64(b+10), int64(b+10), ccRecords(t, int64(b), all[b:b+10]...)))
	}
	if rep, err := upUploader(t, mem, old, Options{}).RunOnce(context.Background()); err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("old leader's pass: %+v, %v", rep, err)
	}
	return ccNewLeader(t)
}

// TestCrossingGroupCommitsWhole: the segments and the emptied range of a
// group replace their committed range in one commit or not at all: when
// one of them cannot be stored (gone at the source) nothing is committed
// and the others' objects are deleted; a later pass commits the group in
// one commit (MaxCommitSegments 3, the group's size: a larger group is not
// made, TestCrossingRunLargerThanOneCommitKept).
func TestCrossingGroupCommitsWhole(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	lead := ccCrossBoth(t, mem)
	before := upLoad(t, mem, "c", 0)
	held := lead.logs[25]
	delete(lead.logs, 25)
	u := upUploader(t, mem, lead, Options{MaxCommitSegments: 3})
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 || rep.SegmentsGone != 1 {
		t.Fatalf("pass with [25, 40) gone: %+v, %v", rep, err)
	}
	if m := upLoad(t, mem, "c", 0); m.Generation != before.Generation {
		t.Fatalf("a pass missing a segment of the group committed generation %d", m.Generation)
	}
	if keys := upKeys(t, mem); len(keys) != len(upReferenced(t, mem, manifest.Key{Topic: "c", Partition: 0})) {
		t.Errorf("objects left behind by the group not committed: %v", keys)
	}
	lead.logs[25] = held
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.Commits != 1 || rep.ReplacedSegments != 3 {
		t.Fatalf("pass: %+v, %v; want the group ([0, 14], [15, 24] emptied, [25, 39]) in one commit", rep, err)
	}
	table := ccConsumeNoStale(t, mem)
	ccWantTable(t, table)
	upCheckConsistent(t, mem, "c", 0)
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 {
		t.Fatalf("a further pass changed the remote tier: %+v, %v", rep, err)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestLimitTasksKeepsGroups: a commit's tasks never end inside a group.
func TestLimitTasksKeepsGroups(t *testing.T) {
	one := task{}
	g := func(from int64) task { return task{members: 2, gFrom: from} }
	for _, tc := range []struct {
		tasks []task
		n     int
		want  int
	}{
		{[]task{one, g(1), g(1), one}, 2, 1},   // the group goes to the next commit
		{[]task{g(1), g(1), one}, 1, 2},        // a first group is whole
		{[]task{one, g(1), g(1), one}, 3, 3},   // it ends at the limit
		{[]task{g(1), g(1), g(5), g(5)}, 3, 2}, // the second group waits
		{[]task{one, one}, 5, 2},
	} {
		if got := len(limitTasks(tc.tasks, tc.n)); got != tc.want {
			t.Errorf("limitTasks(%d tasks, %d) kept %d, want %d", len(tc.tasks), tc.n, got, tc.want)
		}
	}
}

// TestCrossingSegmentOfSpanningCleanedSegment: the new leader's cleaned
// segment [15, 30) spans the committed end (20) and the committed [10, 19]
// crosses its base; its cleaner dropped K=v (17) and, later, K's tombstone
// (25). The uploader replaces [0, 19] with the cleaned [0, 14] and
// [15, 29] in one commit that also moves the committed end to 30. Before
// the fix the spanning replace declined for the crossing segment and only
// [20, 29] was appended (cut at the committed end): the committed [10, 19]
// kept K=v with no tombstone after it.
func TestCrossingSegmentOfSpanningCleanedSegment(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	r1 := append(ccSeq("k", 10, 15, "v"), "x15=o", "x16=o", "K=v", "x18=o", "x19=o")
	old.p.Segments = []SegmentMeta{
		old.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...)),
		old.segment(10, 20, 20, ccRecords(t, 10, r1...)),
	}
	if rep, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("old leader's pass: %+v, %v", rep, err)
	}
	lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	lead.p.CleanedUpTo = 30
	l2 := append(append(append([]string{"-", "-", "-", "-", "-"}, ccSeq("x", 15, 20, "n")...), "-"), ccSeq("k", 26, 30, "v")...)
	lead.p.Segments = []SegmentMeta{
		lead.segment(0, 15, 15, ccRecords(t, 0, ccSeq("k", 0, 15, "v")...)),
		lead.segment(15, 30, 30, ccRecords(t, 15, l2...)),
	}
	u := upUploader(t, mem, lead, Options{})
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.Commits != 1 || rep.ReplacedSegments != 2 {
		t.Errorf("pass: %+v, %v; want [0, 14] and [15, 29] replacing [0, 19] in one commit", rep, err)
	}
	table := ccConsumeNoStale(t, mem)
	if _, ok := table["K"]; ok || len(table) != 24 || table["k14"] != "v" || table["x19"] != "n" || table["k29"] != "v" {
		t.Errorf("remote table %v, want k0..k14, x15..x19=n, k26..k29 (no K)", table)
	}
	bases := upBases(t, mem, upLoad(t, mem, "c", 0))
	if m := upLoad(t, mem, "c", 0); !slices.Equal(bases, []int64{0, 15}) || m.NextOffset() != 30 {
		t.Errorf("committed segments at %v, end %d; want [0 15] and 30", bases, m.NextOffset())
	}
	upCheckConsistent(t, mem, "c", 0)
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 {
		t.Fatalf("a further pass changed the remote tier: %+v, %v", rep, err)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestCrossingGroupCommitFaults: a group's replace goes through the
// manifest's commit protocol like any other: a root write that fails
// (before or after it landed, reported as an error or as a lost race) and
// deletions after it that fail leave the bucket before or after the whole
// group, never in between; the next pass finishes it and garbage
// collection takes what was left behind.
func TestCrossingGroupCommitFaults(t *testing.T) {
	for _, tc := range commitFaults() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			lead := ccCrossBoth(t, mem)
			bkt := objstore.WithFaults(mem, objstore.InjectorFunc(tc.fault))
			_, err := upUploader(t, bkt, lead, Options{Retry: Retry{Attempts: 1, Base: 1, Max: 1}}).RunOnce(ctx)
			if !isInjected(err) && !strings.Contains(fmt.Sprint(err), "precondition") {
				t.Fatalf("faulty pass: %v", err)
			}
			upCheckConsistent(t, mem, "c", 0)
			bases := upBases(t, mem, upLoad(t, mem, "c", 0))
			if !slices.Equal(bases, []int64{0, 10, 20, 30}) && !slices.Equal(bases, []int64{0, 25}) {
				t.Fatalf("committed segments at %v: neither before ([0 10 20 30]) nor after ([0 25]) the group", bases)
			}
			if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			ccWantTable(t, ccConsumeNoStale(t, mem))
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}

// TestCrossingRunLargerThanOneCommitKept: a run of cleaned segments and
// emptied ranges is replaced as a group only while it fits one commit
// (MaxCommitSegments pieces). The run [0, 14] + emptied [15, 24] has two
// pieces: with MaxCommitSegments 1 the old leader's crossing segments
// stay (a larger run would upload its whole committed range again, and
// must be stored within the attempt age), with 2 they are replaced.
func TestCrossingRunLargerThanOneCommitKept(t *testing.T) {
	for _, tc := range []struct {
		max       int
		wantBases []int64
	}{
		{1, []int64{0, 10, 20, 25}},
		{2, []int64{0, 25}},
	} {
		t.Run(fmt.Sprint("max=", tc.max), func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			ccOldLeader(t, mem)
			u := upUploader(t, mem, ccNewLeader(t), Options{MaxCommitSegments: tc.max})
			for range 3 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			bases := upBases(t, mem, upLoad(t, mem, "c", 0))
			if !slices.Equal(bases, tc.wantBases) {
				t.Fatalf("committed segments at %v, want %v", bases, tc.wantBases)
			}
			upCheckConsistent(t, mem, "c", 0)
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}
