package gate

import (
	"context"
	"errors"
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
