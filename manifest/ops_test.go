package manifest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOpsProperty runs random appends, replaces and retention against a
// flat model and checks after every commit: the root is valid and within
// policy, what it references equals the model, the keys it stopped
// referencing are exactly Unreferenced, new sub-manifests are new keys, and
// lookups agree with a linear scan. Unreferenced keys are deleted from the
// store after each commit, as garbage collection would, so a wrongly listed
// key breaks a later load.
func TestOpsProperty(t *testing.T) {
	policies := []Policy{{InlineMax: 4, SubSegments: 3}, {InlineMax: 10, SubSegments: 10}, {InlineMax: 1, SubSegments: 1}}
	steps, seeds := 250, uint64(6)
	if raceEnabled {
		steps, seeds = 60, 3
	}
	for seed := range seeds {
		p := policies[seed%uint64(len(policies))]
		t.Run(fmt.Sprintf("seed=%d/inline=%d/sub=%d", seed, p.InlineMax, p.SubSegments), func(t *testing.T) {
			runOps(t, rand.New(rand.NewPCG(seed, 99)), p, steps)
		})
	}
}

func runOps(t *testing.T, rnd *rand.Rand, p Policy, steps int) {
	ctx := context.Background()
	st := newMemStore()
	m := newTestManifest(t, 0)
	var model []Segment
	var ts int64 = 1_000_000
	attempts := 0
	newSeg := func(base, last int64) Segment {
		attempts++
		ts += rnd.Int64N(100) - 10
		return testSegAttempt(t, base, last, ts, fmt.Sprintf("%032x", attempts))
	}
	var prevRefs []string
	stats := map[string]int{}
	for step := range steps {
		var c *Commit
		var err error
		next := m.NextOffset()
		var wantModel []Segment
		wantStart := m.LogStartOffset
		op := rnd.IntN(10)
		switch {
		case op < 5 || len(model) == 0: // append 1..4 segments, maybe after a gap
			base := next + rnd.Int64N(3)*rnd.Int64N(5)
			var segs []Segment
			for k := range 1 + rnd.IntN(4) {
				last := base + rnd.Int64N(20)
				if d := Reconcile(m, Range{base, last}); k == 0 && (d.Action != ActionAppend || d.Next != next || d.Gap != (base > next)) {
					t.Fatalf("step %d: Reconcile([%d, %d]) = %+v, want append", step, base, last, d)
				}
				segs = append(segs, newSeg(base, last))
				next, base = last+1, last+1+rnd.Int64N(2)
			}
			wantModel = append(slices.Clone(model), segs...)
			c, err = Append(m, p, segs...)
			stats["append"]++
		case op < 8: // replace a run of segments, as compaction does
			i := rnd.IntN(len(model))
			j := min(len(model)-1, i+rnd.IntN(6))
			from, to := model[i].BaseOffset, model[j].LastOffset
			if i > 0 && rnd.IntN(2) == 0 {
				from = model[i-1].LastOffset + 1 // include the gap before
			}
			if straddle := rnd.IntN(8) == 0 && model[i].LastOffset > model[i].BaseOffset; straddle {
				from = model[i].BaseOffset + 1
				_, err := Replace(ctx, st, m, p, from, to, nil)
				var ce *ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("step %d: replace cutting [%d, %d] at %d = %v, want conflict", step,
						model[i].BaseOffset, model[i].LastOffset, from, err)
				}
				stats["conflict"]++
				continue
			}
			var segs []Segment
			for b := from; b <= to && len(segs) < 3; {
				if rnd.IntN(3) == 0 {
					b += rnd.Int64N(to - b + 1) // dropped records
					continue
				}
				last := b + rnd.Int64N(to-b+1)
				s := newSeg(b, last)
				s.Compacted = true
				if last >= m.LogStartOffset {
					segs = append(segs, s)
				}
				b = last + 1
			}
			if rnd.IntN(5) == 0 && i == j && model[i].BaseOffset == from {
				segs = []Segment{model[i]} // a no-op replace: keys and sub-manifests survive
			}
			for _, s := range model {
				if s.LastOffset < from {
					wantModel = append(wantModel, s)
				}
			}
			wantModel = append(wantModel, segs...)
			for _, s := range model {
				if s.BaseOffset > to {
					wantModel = append(wantModel, s)
				}
			}
			c, err = Replace(ctx, st, m, p, from, to, segs)
			if lastEnd := wantModel[len(wantModel)-1:]; len(lastEnd) == 0 || lastEnd[0].NextOffset() < next {
				var ce *ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("step %d: replace moving the end back from %d = %v, want conflict", step, next, err)
				}
				stats["conflict"]++
				continue
			}
			stats["replace"]++
		default: // retention
			newStart := m.LogStartOffset + rnd.Int64N(max(1, (next-m.LogStartOffset)/3+2))
			for _, s := range model {
				if s.LastOffset >= newStart {
					wantModel = append(wantModel, s)
				}
			}
			wantStart = newStart
			c, err = RemoveBelow(ctx, st, m, newStart)
			stats["remove"]++
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		prevRefs = checkCommit(t, step, st, p, m, c, prevRefs)
		m, model = c.Root, wantModel
		if m.LogStartOffset != wantStart {
			t.Fatalf("step %d: log start %d, want %d", step, m.LogStartOffset, wantStart)
		}
		got := flatten(t, m, st)
		if len(got) != len(model) {
			t.Fatalf("step %d: %d segments, model has %d", step, len(got), len(model))
		}
		for k := range got {
			if got[k].Log.Key != model[k].Log.Key || got[k].LastOffset != model[k].LastOffset {
				t.Fatalf("step %d: segment %d is [%d, %d] %s, model [%d, %d] %s", step, k, got[k].BaseOffset,
					got[k].LastOffset, got[k].Log.Key, model[k].BaseOffset, model[k].LastOffset, model[k].Log.Key)
			}
		}
		// Lookups against the model.
		for range 5 {
			off := m.LogStartOffset - 1 + rnd.Int64N(m.NextOffset()-m.LogStartOffset+2)
			want, ok := linearOffset(model, m.LogStartOffset, m.NextOffset(), off)
			seg, err := m.FindOffset(ctx, st, off)
			if ok != (err == nil) || ok && seg.Log.Key != want.Log.Key {
				t.Fatalf("step %d: FindOffset(%d) = %d, %v; want %d, %v", step, off, seg.BaseOffset, err, want.BaseOffset, ok)
			}
		}
	}
	t.Logf("ops: %v; final %d segments, %d sealed", stats, m.SegmentCount(), len(m.Sealed))
	if stats["append"] == 0 || stats["replace"] == 0 || stats["remove"] == 0 {
		t.Fatalf("an operation never ran: %v", stats)
	}
}

// checkCommit checks one commit and applies it: sub-manifests, root, then
// deletion of the unreferenced keys.
func checkCommit(t *testing.T, step int, st *memStore, p Policy, prev *Manifest, c *Commit, prevRefs []string) []string {
	t.Helper()
	ctx := context.Background()
	if c.Root.Generation != prev.Generation+1 {
		t.Fatalf("step %d: generation %d after %d", step, c.Root.Generation, prev.Generation)
	}
	if len(c.Root.Segments) > p.InlineMax {
		t.Fatalf("step %d: %d inline segments, policy allows %d", step, len(c.Root.Segments), p.InlineMax)
	}
	prevSet := map[string]bool{}
	for _, k := range prevRefs {
		prevSet[k] = true
	}
	for _, ns := range c.Subs {
		if prevSet[ns.Ref.Key] {
			t.Fatalf("step %d: sub-manifest %s is already referenced, yet listed to write", step, ns.Ref.Key)
		}
	}
	root := st.apply(t, c)
	dec, err := DecodeRoot(c.Root.Key(), root)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	refs, err := dec.ReferencedKeys(ctx, st)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	newSet := map[string]bool{}
	for _, k := range refs {
		newSet[k] = true
	}
	var gone []string
	for _, k := range prevRefs {
		if !newSet[k] {
			gone = append(gone, k)
		}
	}
	if !slices.Equal(gone, c.Unreferenced) {
		t.Fatalf("step %d: Unreferenced = %v, want %v", step, c.Unreferenced, gone)
	}
	for _, k := range c.Unreferenced {
		delete(st.objs, k)
	}
	return refs
}

func TestAppendConflicts(t *testing.T) {
	p := Policy{InlineMax: 2, SubSegments: 2}
	m := newTestManifest(t, 0)
	c, err := Append(m, p, testSeg(t, 0, 9, 1000), testSeg(t, 10, 19, 1000), testSeg(t, 20, 29, 1000))
	if err != nil {
		t.Fatal(err)
	}
	m = c.Root
	cases := map[string][]Segment{
		"overlap_last":    {testSeg(t, 29, 35, 1000)},
		"inside":          {testSeg(t, 12, 15, 1000)},
		"duplicate":       {testSeg(t, 20, 29, 1000)},
		"batch_self":      {testSeg(t, 30, 35, 1000), testSeg(t, 35, 40, 1000)},
		"batch_unordered": {testSeg(t, 40, 45, 1000), testSeg(t, 30, 35, 1000)},
		"inside_sealed":   {testSeg(t, 5, 6, 1000)},
	}
	for name, segs := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Append(m, p, segs...)
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("Append = %v, want *ConflictError", err)
			}
		})
	}
	// Retention removes everything; a segment entirely below the new log
	// start is refused, one straddling it accepted.
	_, err = RemoveBelow(context.Background(), newMemStore(), m, 30)
	if err == nil {
		t.Fatal("RemoveBelow loaded a sub-manifest from an empty store")
	}
	st := newMemStore()
	m2 := build(t, st, p, []Segment{testSeg(t, 0, 9, 1000), testSeg(t, 10, 19, 1000), testSeg(t, 20, 29, 1000)}, 3)
	c, err = RemoveBelow(context.Background(), st, m2, 50)
	if err != nil || c.Root.SegmentCount() != 0 || c.Root.NextOffset() != 50 || len(c.Unreferenced) != 10 {
		t.Fatalf("RemoveBelow(50) = %+v, %v", c, err)
	}
	if _, err := RemoveBelow(context.Background(), st, c.Root, 40); err == nil {
		t.Fatal("log start moved back")
	}
	var ce *ConflictError
	if _, err := Append(c.Root, p, testSeg(t, 30, 49, 1000)); !errors.As(err, &ce) {
		t.Fatalf("Append below log start = %v", err)
	}
	if d := Reconcile(c.Root, Range{30, 49}); d.Action != ActionSkip {
		t.Fatalf("Reconcile below log start = %v", d.Action)
	}
	if d := Reconcile(c.Root, Range{45, 60}); d.Action != ActionAppend || d.Gap {
		t.Fatalf("Reconcile straddling log start = %+v", d)
	}
	c, err = Append(c.Root, p, testSeg(t, 45, 60, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.Root.FindOffset(context.Background(), st, 50); err != nil || s.BaseOffset != 45 {
		t.Fatalf("FindOffset(50) = %+v, %v", s, err)
	}
	if _, err := c.Root.FindOffset(context.Background(), st, 49); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("FindOffset(49) below log start = %v", err)
	}

	if _, err := Append(m, Policy{InlineMax: 1, SubSegments: 2}); err == nil {
		t.Fatal("policy with SubSegments > InlineMax accepted")
	}
	if _, err := Replace(context.Background(), st, m2, p, 10, 5, nil); err == nil {
		t.Fatal("replace of an inverted range accepted")
	}
	if _, err := Replace(context.Background(), st, m2, p, 10, 19, []Segment{testSeg(t, 15, 25, 9)}); !errors.As(err, &ce) {
		t.Fatalf("replacement outside its range = %v", err)
	}
	if _, err := Replace(context.Background(), st, m2, p, 0, 29, []Segment{testSeg(t, 10, 15, 9), testSeg(t, 0, 5, 9)}); !errors.As(err, &ce) {
		t.Fatalf("unordered replacements = %v", err)
	}
}

func TestReconcile(t *testing.T) {
	p := DefaultPolicy()
	m := newTestManifest(t, 0)
	c, err := Append(m, p, testSeg(t, 0, 99, 1000), testSeg(t, 100, 199, 1000))
	if err != nil {
		t.Fatal(err)
	}
	m = c.Root
	cases := []struct {
		name string
		r    Range
		want Action
		gap  bool
	}{
		{"restart_same_segment", Range{100, 199}, ActionSkip, false},
		{"new_leader_inside", Range{50, 150}, ActionSkip, false},
		{"new_leader_ends_at_end", Range{150, 199}, ActionSkip, false},
		{"next", Range{200, 299}, ActionAppend, false},
		{"after_gap", Range{250, 299}, ActionAppend, true},
		{"new_leader_extends", Range{150, 260}, ActionConflict, false},
		{"covers_everything", Range{0, 500}, ActionConflict, false},
		{"last_offset_only", Range{199, 199}, ActionSkip, false},
		{"straddles_end", Range{199, 200}, ActionConflict, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Reconcile(m, tc.r)
			if d.Action != tc.want || d.Next != 200 || d.Gap != tc.gap {
				t.Fatalf("Reconcile(%v) = %+v (%s), want %s gap=%v", tc.r, d, d.Action, tc.want, tc.gap)
			}
			// The verdict agrees with what Append accepts.
			_, err := Append(m, p, testSeg(t, tc.r.Base, tc.r.Last, 1000))
			if (err == nil) != (tc.want == ActionAppend) {
				t.Fatalf("Append after %s: %v", tc.want, err)
			}
		})
	}
	empty := newTestManifest(t, 0)
	if d := Reconcile(empty, Range{0, 10}); d.Action != ActionAppend || d.Gap {
		t.Fatalf("empty manifest: %+v", d)
	}
}
