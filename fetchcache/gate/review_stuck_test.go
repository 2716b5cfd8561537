package gate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGateStuckRefusalAdmitsBehind: refusing a stuck Grow at the front of
// the line lets the waiters behind it in when they fit, at once, not only
// at the next Done (which the refused work may not send for a while: it
// still has to answer its request).
func TestGateStuckRefusalAdmitsBehind(t *testing.T) {
	for _, tc := range []struct {
		name string
		// how the stall forms: another work's Done, or the Grow's ctx
		// of another waiter leaving.
		byDone bool
	}{
		{"by another work's Done", true},
		{"by a Grow inserted", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := New(Options{Name: "produce", Capacity: 10, MaxWait: time.Minute})
			if err := g.Start(ctx, 3); err != nil { // a's work
				t.Fatal(err)
			}
			if tc.byDone {
				if err := g.Start(ctx, 5); err != nil { // x's work
					t.Fatal(err)
				}
			}
			a := make(chan error, 1)
			s := make(chan error, 1)
			if tc.byDone {
				go func() { a <- g.Grow(ctx, 3, 8) }() // 3+5+8 > 10: waits
				waitQueued(t, g, 1)
				go func() { s <- g.Start(ctx, 2) }() // fits, but behind a's Grow
				waitQueued(t, g, 2)
				g.Done(5) // x ends: a's Grow is stuck (all admitted weight is a's)
			} else {
				// s waits behind a large waiter that then leaves.
				big, cancel := context.WithCancel(ctx)
				bc := make(chan error, 1)
				go func() { bc <- g.Start(big, 9) }()
				waitQueued(t, g, 1)
				go func() { s <- g.Start(ctx, 2) }()
				waitQueued(t, g, 2)
				go func() { a <- g.Grow(ctx, 3, 8) }() // refused at once: stuck
				if err := <-a; !errors.Is(err, ErrOverloaded) {
					t.Fatalf("grow: %v, want overloaded", err)
				}
				cancel()
				<-bc
				a <- nil
			}
			if err := <-a; tc.byDone && !errors.Is(err, ErrOverloaded) {
				t.Fatalf("stuck grow: %v, want overloaded", err)
			}
			select {
			case err := <-s:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("a Start of 2 that fits (in flight %d of 10) is still waiting after the Grow ahead of it was refused", g.InFlight())
			}
			g.Done(3)
			g.Done(2)
			if g.InFlight() != 0 || g.cur != 0 || g.grows != 0 || g.growHeld != 0 {
				t.Fatalf("in flight %d, cur %d, grows %d, held %d", g.InFlight(), g.cur, g.grows, g.growHeld)
			}
		})
	}
}
