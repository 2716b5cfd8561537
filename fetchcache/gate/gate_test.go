package gate

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGate(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := New(Options{Name: "requests", Capacity: 10, MaxWait: 30 * time.Millisecond,
		RetryAfter: 250 * time.Millisecond, Registerer: reg})
	ctx := context.Background()

	if err := g.Start(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if g.InFlight() != 10 || testutil.ToFloat64(g.m.InFlight) != 10 {
		t.Fatalf("in flight %d / gauge %v, want 10", g.InFlight(), testutil.ToFloat64(g.m.InFlight))
	}
	if g.TryStart(1) {
		t.Fatal("TryStart admitted weight over capacity")
	}

	// Full: Start waits MaxWait, then overload with the retry hint.
	start := time.Now()
	err := g.Start(ctx, 1)
	if took := time.Since(start); took < 30*time.Millisecond || took > 2*time.Second {
		t.Fatalf("rejected after %v", took)
	}
	var oe *OverloadedError
	if !errors.Is(err, ErrOverloaded) || !errors.As(err, &oe) || oe.Gate != "requests" || oe.RetryAfter != 250*time.Millisecond {
		t.Fatalf("got %v", err)
	}

	// The caller's ctx wins over the wait bound and is not a rejection.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := g.Start(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}

	// A deadline already past still admits free weight at once.
	g.Done(4)
	if err := g.StartBy(ctx, 3, time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("free weight with a past deadline: %v", err)
	}
	if err := g.StartBy(ctx, 2, time.Now().Add(-time.Hour)); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("full gate with a past deadline: %v", err)
	}

	// A waiter is admitted when weight is returned.
	done := make(chan error)
	go func() { done <- g.StartBy(ctx, 2, time.Now().Add(time.Minute)) }()
	time.Sleep(5 * time.Millisecond)
	g.Done(3)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Weight above capacity is clamped, so it can still pass an empty gate.
	g.Done(6)
	g.Done(2)
	if g.InFlight() != 0 {
		t.Fatalf("in flight %d after returning everything", g.InFlight())
	}
	if err := g.Start(ctx, 1000); err != nil || g.InFlight() != 10 {
		t.Fatalf("oversized weight: %v, in flight %d", err, g.InFlight())
	}
	g.Done(1000)

	if r := testutil.ToFloat64(g.m.Rejections); r != 2 {
		t.Fatalf("rejections %v, want 2", r)
	}
	// Waits: the rejected Start, the past-deadline StartBy, and the
	// waiter unless it came after the Done (a canceled ctx is not a wait).
	if w := testutil.ToFloat64(g.m.Waits); w < 2 || w > 3 {
		t.Fatalf("waits %v, want 2 or 3", w)
	}
	if n := testutil.CollectAndCount(reg, "tiered_fetch_gate_wait_seconds"); n != 1 {
		t.Fatalf("%d wait histograms", n)
	}
}

func TestRetryAfterNotOverload(t *testing.T) {
	if _, ok := RetryAfter(errors.New("x")); ok {
		t.Fatal("plain error has a retry hint")
	}
	if !errors.Is(&OverloadedError{Gate: "g", RetryAfter: time.Second}, ErrOverloaded) {
		t.Fatal("OverloadedError is not ErrOverloaded")
	}
}

// waitQueued blocks until the gate has n waiters.
func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		l := g.waiters.Len()
		g.mu.Unlock()
		if l == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", l, n)
		}
	}
}

// TestGateGrowGoesFirst: more weight for admitted work (Grow) passes new
// admissions that wait, and waits itself ahead of them; new admissions
// keep their order and do not pass each other, nor a Grow.
func TestGateGrowGoesFirst(t *testing.T) {
	g := New(Options{Name: "produce", Capacity: 10, MaxWait: time.Minute})
	ctx := context.Background()
	// Work x holds 4, work a 2.
	if err := g.Start(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx, 2); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	start := func(name string, n int64) {
		if err := g.Start(ctx, n); err != nil {
			t.Error(err)
		}
		order <- name
	}
	go start("big", 8) // 4 free: waits
	waitQueued(t, g, 1)
	if g.TryStart(1) {
		t.Fatal("TryStart passed a waiter")
	}
	// 4 are free: a's Grow of 2 passes the waiting Start at once.
	if err := g.Grow(ctx, 2, 2); err != nil || g.InFlight() != 8 {
		t.Fatalf("Grow with room beside a waiting Start: %v, in flight %d", err, g.InFlight())
	}
	go start("small", 2) // fits, but behind "big"
	waitQueued(t, g, 2)
	grown := make(chan error, 1)
	go func() { grown <- g.Grow(ctx, 4, 5) }() // 2 free: waits, ahead of both
	waitQueued(t, g, 3)
	g.Done(4) // x ends; 6 free: a's Grow, not "big" (8) nor "small" (2)
	if err := <-grown; err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-order:
		t.Fatalf("%q admitted before the weight it waits for was free", n)
	case <-time.After(20 * time.Millisecond):
	}
	g.Done(9) // a ends: "big", and "small" behind it
	got := []string{<-order, <-order}
	slices.Sort(got)
	if !slices.Equal(got, []string{"big", "small"}) {
		t.Fatalf("admitted %v", got)
	}
	g.Done(8 + 2)
	if g.InFlight() != 0 {
		t.Fatalf("in flight %d", g.InFlight())
	}
}

// TestGateGrowStuck: when all the admitted weight is held by work waiting
// in Grow, the newest of those Grows is refused at once, whether the
// last Grow or the last other work's Done makes it so, and the others go
// on once it returns its weight.
func TestGateGrowStuck(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		starts []int64 // works admitted: a, b, then others
		done   int64   // the others' weight returned after both Grows wait
	}{
		{"by the last Grow", []int64{5, 5}, 0},
		{"by the last other work's Done", []int64{4, 4, 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{Name: "produce", Capacity: 10, MaxWait: time.Minute})
			for _, n := range tc.starts {
				if err := g.Start(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			c := make(chan error, 1)
			go func() { c <- g.Start(ctx, 3) }() // a new admission, in line
			waitQueued(t, g, 1)
			a, b := make(chan error, 1), make(chan error, 1)
			go func() { a <- g.Grow(ctx, tc.starts[0], 3) }()
			waitQueued(t, g, 2)
			begin := time.Now()
			go func() { b <- g.Grow(ctx, tc.starts[1], 3) }()
			if tc.done > 0 {
				waitQueued(t, g, 3)
				g.Done(tc.done)
			}
			err := <-b
			if !errors.Is(err, ErrOverloaded) || time.Since(begin) > 10*time.Second {
				t.Fatalf("newest Grow, every admitted weight waiting to grow: %v after %v, want overloaded at once", err, time.Since(begin))
			}
			select {
			case err := <-a:
				t.Fatalf("older Grow answered before any weight was returned: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			g.Done(tc.starts[1]) // b's work ends, refused
			if err := <-a; err != nil {
				t.Fatalf("older Grow after the newest's work returned its weight: %v", err)
			}
			g.Done(tc.starts[0] + 3) // a's work ends
			if err := <-c; err != nil {
				t.Fatal(err)
			}
			g.Done(3)
			if g.InFlight() != 0 || g.growHeld != 0 || g.grows != 0 {
				t.Fatalf("in flight %d, grow held %d, %d grows", g.InFlight(), g.growHeld, g.grows)
			}
		})
	}
}

// TestGateWaiterLeaving: a waiter at the front that gives up (its wait
// bound, its ctx) lets the smaller waiters behind it in, and a Grow that
// gives up is no longer ahead of anyone.
func TestGateWaiterLeaving(t *testing.T) {
	g := New(Options{Name: "produce", Capacity: 10, MaxWait: 30 * time.Millisecond})
	ctx := context.Background()
	if err := g.Start(ctx, 7); err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() { big <- g.Start(ctx, 5) }()
	waitQueued(t, g, 1)
	small := make(chan error, 1)
	go func() { small <- g.StartBy(ctx, 2, time.Now().Add(time.Minute)) }()
	waitQueued(t, g, 2)
	if err := <-big; !errors.Is(err, ErrOverloaded) {
		t.Fatalf("big: %v", err)
	}
	if err := <-small; err != nil {
		t.Fatalf("small behind a big waiter that left: %v", err)
	}
	// A Grow whose ctx ends leaves the line; a Start behind it goes in.
	// On a gate in the same state whose wait bound cannot run out first
	// (30 ms can pass before waitQueued sees a waiter on a loaded machine).
	g = New(Options{Name: "produce", Capacity: 10, MaxWait: time.Minute})
	if err := g.Start(ctx, 7+2); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	grown := make(chan error, 1)
	go func() { grown <- g.Grow(cctx, 2, 5) }()
	waitQueued(t, g, 1)
	after := make(chan error, 1)
	go func() { after <- g.StartBy(ctx, 1, time.Now().Add(time.Minute)) }()
	waitQueued(t, g, 2)
	cancel()
	if err := <-grown; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Grow: %v", err)
	}
	if err := <-after; err != nil {
		t.Fatalf("Start behind a Grow that left: %v", err)
	}
	g.Done(7 + 2 + 1)
	if g.InFlight() != 0 || g.grows != 0 || g.waiters.Len() != 0 {
		t.Fatalf("in flight %d, %d grows, %d waiters", g.InFlight(), g.grows, g.waiters.Len())
	}
}

// TestGateConcurrent: starts, grows and try-starts of every size from
// many goroutines, some giving up, never admit more than the capacity
// and leave the gate empty.
func TestGateConcurrent(t *testing.T) {
	const capacity = 16
	g := New(Options{Name: "stress", Capacity: capacity, MaxWait: 2 * time.Millisecond})
	var held atomic.Int64
	check := func(n int64) {
		if h := held.Add(n); h > capacity {
			t.Errorf("%d admitted, capacity %d", h, capacity)
		}
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range 300 {
				n := 1 + rng.Int64N(capacity)
				var err error
				switch rng.IntN(3) {
				case 0:
					err = g.Start(context.Background(), n)
				case 1:
					if !g.TryStart(n) {
						err = ErrOverloaded
					}
				default:
					n = max(n, 2) // Grow(n-1): a weight under 1 counts 1
					if err = g.Start(context.Background(), 1); err == nil {
						check(1)
						if err := g.Grow(context.Background(), 1, n-1); err == nil {
							check(n - 1)
							held.Add(-n)
							g.Done(n)
							continue
						}
						held.Add(-1)
						g.Done(1)
						continue
					}
				}
				if err == nil {
					check(n)
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					held.Add(-n)
					g.Done(n)
				}
			}
		})
	}
	wg.Wait()
	if g.InFlight() != 0 || g.cur != 0 || g.waiters.Len() != 0 || g.grows != 0 {
		t.Fatalf("in flight %d, cur %d, %d waiters, %d grows", g.InFlight(), g.cur, g.waiters.Len(), g.grows)
	}
}
