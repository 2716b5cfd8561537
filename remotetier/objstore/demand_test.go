package objstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestDemandGroup: a group settles when each of its reads has asked for
// its bytes (DemandAsked) or ended (its release), whichever comes first,
// each counted once; what waits for it runs once, after the last; a read
// outside any group, and any read once its group settled, has none.
func TestDemandGroup(t *testing.T) {
	ctx := context.Background()
	if DemandOf(ctx) != nil {
		t.Fatal("a read outside any group has one")
	}
	DemandAsked(ctx) // no group: nothing to do
	g := NewDemandGroup(3)
	c1, end1 := WithDemand(ctx, g)
	c2, end2 := WithDemand(ctx, g)
	c3, end3 := WithDemand(ctx, g)
	var calls atomic.Int64
	if !g.OnSettled(func() { calls.Add(1) }) {
		t.Fatal("a pending group refused to call back")
	}
	for _, c := range []context.Context{c1, c2, c3} {
		if DemandOf(c) != g {
			t.Fatal("a read of a pending group does not see it")
		}
	}
	// What a read loads before its own bytes (an index) does not count.
	if idx := WithoutDemand(c1); DemandOf(idx) != nil {
		t.Fatal("a context without the read's place still has its group")
	} else {
		DemandAsked(idx)
		DemandAsked(WithoutDemand(idx))
	}
	if DemandOf(c1) != g {
		t.Fatal("an index load counted as the read's asking")
	}
	DemandAsked(c1)
	end1() // asked already: not counted again
	DemandAsked(c1)
	end2()
	DemandAsked(c2)
	if !g.Pending() || calls.Load() != 0 {
		t.Fatalf("settled (%d calls) with a read yet to ask", calls.Load())
	}
	DemandAsked(c3)
	if g.Pending() || calls.Load() != 1 {
		t.Fatalf("after every read asked: pending %v, %d calls, want settled and 1", g.Pending(), calls.Load())
	}
	end3()
	if calls.Load() != 1 {
		t.Fatalf("%d calls after a late release, want 1", calls.Load())
	}
	if DemandOf(c1) != nil {
		t.Fatal("a settled group is still seen as pending")
	}
	if g.OnSettled(func() { t.Error("called back by a settled group") }) {
		t.Fatal("a settled group took a callback")
	}
}

// TestDemandGroupConcurrent: reads that ask and end at once, with
// callbacks registered meanwhile, settle the group once: every callback
// the group took runs exactly once.
func TestDemandGroupConcurrent(t *testing.T) {
	const n = 64
	for range 20 {
		g := NewDemandGroup(n)
		var took, ran atomic.Int64
		var wg sync.WaitGroup
		for range n {
			c, end := WithDemand(context.Background(), g)
			wg.Go(func() {
				if g.OnSettled(func() { ran.Add(1) }) {
					took.Add(1)
				}
				DemandAsked(c)
				end()
			})
		}
		wg.Wait()
		if g.Pending() || took.Load() != ran.Load() || took.Load() == 0 {
			t.Fatalf("pending %v; %d callbacks taken, %d ran", g.Pending(), took.Load(), ran.Load())
		}
	}
}
