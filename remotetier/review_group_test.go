package remotetier

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// rgEndGroup commits the old leader's [0, 10) and [10, 20) (T=t at 19)
// and returns the new leader's cleaned log rolled at 15 and 20: [0, 15),
// [15, 20) whose cleaner dropped T=t (19, superseded by T=u at 20) and
// [20, 30). The committed [10, 19] crosses 15, so [0, 14] and [15, 18]
// replace [0, 19] together; the replace ends below the committed end, so
// it needs the append of [20, 29] in the same commit.
func rgEndGroup(t *testing.T, mem objstore.Bucket) *memSource {
	t.Helper()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	old.p.Segments = []SegmentMeta{
		old.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...)),
		old.segment(10, 20, 20, ccRecords(t, 10, append(append(ccSeq("k", 10, 15, "v"), ccSeq("x", 15, 19, "o")...), "T=t")...)),
	}
	if rep, err := upUploader(t, mem, old, Options{}).RunOnce(context.Background()); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("old leader's pass: %+v, %v", rep, err)
	}
	lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	lead.p.CleanedUpTo = 30
	lead.p.Segments = []SegmentMeta{
		lead.segment(0, 15, 15, ccRecords(t, 0, ccSeq("k", 0, 15, "v")...)),
		lead.segment(15, 19, 20, ccRecords(t, 15, ccSeq("x", 15, 19, "n")...)),
		lead.segment(20, 30, 30, ccRecords(t, 20, append([]string{"T=u"}, ccSeq("y", 21, 30, "v")...)...)),
	}
	return lead
}

// TestGroupEndingAtCommittedEndKeepsItsAppend: a group whose replace ends
// below the committed end commits only with the append after it. When
// MaxCommitSegments cut the commit after the group, the replace was
// refused every pass (it would move the end back) and the partition
// uploaded nothing more: [20, 29] never reached the bucket.
func TestGroupEndingAtCommittedEndKeepsItsAppend(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	lead := rgEndGroup(t, mem)
	u := upUploader(t, mem, lead, Options{MaxCommitSegments: 2})
	for range 3 {
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := upLoad(t, mem, "c", 0)
	bases := upBases(t, mem, m)
	if m.NextOffset() != 30 || !slices.Equal(bases, []int64{0, 15, 20}) {
		t.Fatalf("after three passes: committed segments at %v, end %d; want [0 15 20] and 30", bases, m.NextOffset())
	}
	recs, table := ecConsume(t, mem, "c")
	if ecHas(recs, "19:T=t") || table["T"] != "u" || table["x15"] != "n" {
		t.Errorf("the remote tier serves %v", recs)
	}
	upCheckConsistent(t, mem, "c", 0)
	if rep, err := u.RunOnce(ctx); err != nil || rep.Commits != 0 {
		t.Fatalf("a further pass changed the remote tier: %+v, %v", rep, err)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestReplaceEndingAtCommittedEndKeepsItsAppend: the same for one cleaned
// segment (no group) and MaxCommitSegments 1: the replace of [10, 19] by
// the cleaned [10, 18] commits with the append of [20, 29].
func TestReplaceEndingAtCommittedEndKeepsItsAppend(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	lead := rgEndGroup(t, mem)
	lead.p.Segments = []SegmentMeta{
		lead.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...)),
		lead.segment(10, 19, 20, ccRecords(t, 10, append(ccSeq("k", 10, 15, "v"), ccSeq("x", 15, 19, "n")...)...)),
		lead.p.Segments[2],
	}
	u := upUploader(t, mem, lead, Options{MaxCommitSegments: 1})
	for range 3 {
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m := upLoad(t, mem, "c", 0)
	if recs, table := ecConsume(t, mem, "c"); m.NextOffset() != 30 || ecHas(recs, "19:T=t") || table["T"] != "u" {
		t.Fatalf("after three passes the committed end is %d, want 30; the remote tier serves %v", m.NextOffset(), recs)
	}
	upCheckConsistent(t, mem, "c", 0)
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
}

// TestLimitTasksKeepsNeededAppend: a commit ending with a replace that
// needs the append after it keeps that append.
func TestLimitTasksKeepsNeededAppend(t *testing.T) {
	r := task{replace: true}
	ra := task{replace: true, needsAppend: true}
	g := task{replace: true, members: 2, gFrom: 1, needsAppend: true}
	a := task{}
	for _, tc := range []struct {
		tasks []task
		n     int
		want  int
	}{
		{[]task{ra, a, a}, 1, 2},
		{[]task{r, ra, a}, 2, 3},
		{[]task{r, ra, a}, 1, 1},
		{[]task{g, g, a, a}, 1, 3},
		{[]task{r, g, g, a}, 2, 1},
		{[]task{r, g, g, a}, 3, 4},
	} {
		if got := len(limitTasks(tc.tasks, tc.n)); got != tc.want {
			t.Errorf("limitTasks(%d tasks, %d) kept %d, want %d", len(tc.tasks), tc.n, got, tc.want)
		}
	}
}

// rgTxnRecords is ccRecords with "t:key=value" a transactional batch of
// producer 7 and "commit" its commit marker.
func rgTxnRecords(t testing.TB, base int64, recs ...string) []byte {
	t.Helper()
	var enc record.Encoder
	var out []byte
	for i, r := range recs {
		off := base + int64(i)
		spec := record.NewBatchSpec(off, codec.None)
		var rec record.Record
		switch {
		case r == "-":
			continue
		case r == "commit":
			spec.Transactional, spec.Control, spec.ProducerID, spec.ProducerEpoch = true, true, 7, 0
			k, v := record.EndTxnMarker(true, 0)
			rec = record.Record{Key: k, Value: v}
		default:
			if after, ok := strings.CutPrefix(r, "t:"); ok {
				spec.Transactional, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, 7, 0, int32(off)
				r = after
			}
			k, v, _ := strings.Cut(r, "=")
			rec = record.Record{Key: []byte(k), Value: []byte(v)}
		}
		rec.Offset, rec.Timestamp = off, upNow.UnixMilli()
		var err error
		if out, err = enc.AppendBatch(out, spec, []record.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestSpanningReplaceClosesTransactions: a cleaned segment spanning the
// committed end, replacing alone or in a group (the old leader's [10, 19]
// crossing 15), commits its records past the end and with them what they
// do to transactions: the commit marker at 20 closes producer 7's
// transaction open at the committed end (15). Before, the manifest kept
// it open, so the remote log's last stable offset stayed at 15 for as long
// as the producer wrote no other transaction (and the group, which took
// the place of the cut append of [20, 29], regressed the crossing case).
func TestSpanningReplaceClosesTransactions(t *testing.T) {
	for _, tc := range []struct {
		name string
		roll int64 // where the old leader rolled
	}{{"alone", 15}, {"group", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
			old.p.CleanedUpTo = 0
			txn := []string{"t:a=1", "t:b=1", "t:c=1", "t:d=1", "t:e=1"}
			all := append(ccSeq("k", 0, 15, "v"), txn...)
			old.p.Segments = []SegmentMeta{
				old.segment(0, tc.roll, tc.roll, rgTxnRecords(t, 0, all[:tc.roll]...)),
				old.segment(tc.roll, 20, 20, rgTxnRecords(t, tc.roll, all[tc.roll:]...)),
			}
			if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if m := upLoad(t, mem, "c", 0); len(m.OpenTxns) != 1 || m.OpenTxns[0].FirstOffset != 15 {
				t.Fatalf("old leader's commit: open transactions %v, want producer 7's at 15", m.OpenTxns)
			}
			lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
			lead.p.CleanedUpTo = 30
			lead.p.Segments = []SegmentMeta{
				lead.segment(0, 15, 15, rgTxnRecords(t, 0, ccSeq("k", 0, 15, "v")...)),
				lead.segment(15, 30, 30, rgTxnRecords(t, 15, append(append(txn, "commit"), ccSeq("y", 21, 30, "v")...)...)),
			}
			if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			m := upLoad(t, mem, "c", 0)
			bases := upBases(t, mem, m)
			if m.NextOffset() != 30 || !slices.Equal(bases, []int64{0, 15}) {
				t.Fatalf("committed segments at %v, end %d; want [0 15] and 30", bases, m.NextOffset())
			}
			if len(m.OpenTxns) != 0 {
				t.Errorf("open transactions at the committed end %v, want none (the marker at 20 is committed)", m.OpenTxns)
			}
		})
	}
}

// rgSegment is a valid committed segment of m moved to [base, last] under
// keys of its own, for commits built by hand.
func rgSegment(t *testing.T, mem objstore.Bucket, m *manifest.Manifest, base, last int64) manifest.Segment {
	t.Helper()
	seg := upAllSegments(t, mem, m)[0]
	seg.BaseOffset, seg.LastOffset, seg.RecordCount, seg.Compacted = base, last, last-base+1, true
	seg.AttemptID = manifest.NewAttemptID()
	keys, err := manifest.DataKeysID("", "c", "", 0, base, seg.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	seg.Log.Key, seg.Index.Key, seg.TimeIndex.Key = keys.Log, keys.Indexes, keys.Indexes
	if seg.TxnIndex != nil {
		x := *seg.TxnIndex
		x.Key = keys.Indexes
		seg.TxnIndex = &x
	}
	return seg
}

// TestGroupCommitWholeWhenClockMoves: buildCommit decides once whether an
// attempt is too old to commit. It asked the clock twice per attempt (for
// the group's count of members ready, then to keep each), so a member
// turning too old in between was dropped while the others were kept as a
// whole group; with an emptied range's removal after the group (group
// fields zero, as a group starting at 0 has) the whole-group check passed,
// and [0, 29] was replaced without the member's [25, 29]: live records
// gone from the remote tier.
func TestGroupCommitWholeWhenClockMoves(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old := ccUniformLog(t, 40, "v")
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	m := upLoad(t, mem, "c", 0)
	calls := 0
	now := func() time.Time {
		calls++
		if calls > 3 { // after a look at each of the group's three members
			return upNow.Add(2 * time.Second)
		}
		return upNow
	}
	u := upUploader(t, mem, old, Options{Now: now, GCGrace: 2 * time.Hour})
	member := func(base, last int64, started time.Time) uploaded {
		return uploaded{task: task{seg: SegmentMeta{BaseOffset: base, NextOffset: last + 1, NextBase: last + 1}, cut: base,
			replace: true, from: base, to: last, compacted: true, members: 3, gFrom: 0, gTo: 29},
			seg: rgSegment(t, mem, m, base, last), started: started}
	}
	done := []uploaded{
		member(0, 14, upNow),
		member(15, 24, upNow),
		member(25, 29, upNow.Add(-time.Hour+time.Second)), // too old after the clock moves
		{task: task{seg: SegmentMeta{BaseOffset: 30, NextOffset: 30, NextBase: 40}, cut: 30, replace: true, drop: true,
			from: 30, to: 39, compacted: true}, started: upNow},
	}
	var dropped []uploaded
	c, _, err := u.buildCommit(ctx, old.p, m, done, &dropped)
	if err != nil || c == nil {
		return // refused: nothing lost
	}
	var held []int64
	if err := u.store.segmentsIn(ctx, c.Root, 25, 29, func(s manifest.Segment) { held = append(held, s.BaseOffset) }); err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatalf("the commit holds no segment for [25, 29] (dropped %d attempts): the group was committed without a member", len(dropped))
	}
}

// TestDroppedSpanningGroupHoldsAppends: when a group whose last segment
// spans the committed end cannot commit (a member too old to commit: the
// upload took long; its Replace conflicts), the appends after it wait too. Before, they were
// committed past a hole where the spanning segment's records past the old
// end ([20, 29]; its cut append was left out for the group): readers of
// the remote tier skipped them as a compaction gap, live records the
// source holds.
func TestDroppedSpanningGroupHoldsAppends(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
	old.p.CleanedUpTo = 0
	old.p.Segments = []SegmentMeta{
		old.segment(0, 10, 10, ccRecords(t, 0, ccSeq("k", 0, 10, "v")...)),
		old.segment(10, 20, 20, ccRecords(t, 10, ccSeq("k", 10, 20, "v")...)),
	}
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	m := upLoad(t, mem, "c", 0)
	u := upUploader(t, mem, old, Options{GCGrace: 2 * time.Hour})
	for _, tc := range []struct {
		name         string
		gFrom        int64
		firstStarted time.Time
	}{
		{"member too old", 0, upNow.Add(-2 * time.Hour)},
		{"replace conflicts", 5, upNow}, // [5, 29] cuts the committed [0, 9]
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := func(base, last int64, started time.Time) uploaded {
				return uploaded{task: task{seg: SegmentMeta{BaseOffset: base, NextOffset: last + 1, NextBase: last + 1}, cut: base,
					replace: true, from: base, to: last, compacted: true, members: 2, gFrom: tc.gFrom, gTo: 29},
					seg: rgSegment(t, mem, m, base, last), started: started}
			}
			done := []uploaded{
				member(tc.gFrom, 14, tc.firstStarted),
				member(15, 29, upNow),
				{task: task{seg: SegmentMeta{BaseOffset: 30, NextOffset: 40, NextBase: 40}, cut: 30, compacted: true},
					seg: rgSegment(t, mem, m, 30, 39), started: upNow},
			}
			var dropped []uploaded
			c, kept, err := u.buildCommit(ctx, old.p, m, done, &dropped)
			if err != nil {
				t.Fatal(err)
			}
			if c != nil && c.Root.NextOffset() > 20 {
				t.Fatalf("committed end %d past the hole [20, 29] the dropped group was to fill (kept %d attempts)", c.Root.NextOffset(), len(kept))
			}
		})
	}
}
