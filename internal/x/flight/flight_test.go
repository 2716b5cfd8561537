package flight

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
)

// TestDoSurvivesTheFirstCallersCancellation: callers share one run; the
// first caller's cancellation ends only its own wait, the others get the
// result, and the run's context is not the caller's.
func TestDoSurvivesTheFirstCallersCancellation(t *testing.T) {
	var g singleflight.Group
	release := make(chan struct{})
	runs := 0
	fn := func(ctx context.Context) (int, error) {
		runs++
		select {
		case <-release:
			return 7, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := Do(first, &g, "k", time.Minute, fn)
		firstErr <- err
	}()
	time.Sleep(20 * time.Millisecond) // the first caller's run is in flight
	second := make(chan int, 1)
	go func() {
		v, err := Do(context.Background(), &g, "k", time.Minute, fn)
		if err != nil {
			t.Error(err)
		}
		second <- v
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller: %v, want context.Canceled", err)
	}
	close(release)
	if v := <-second; v != 7 || runs != 1 {
		t.Fatalf("the other caller got %d after %d runs, want 7 after one", v, runs)
	}
}

// TestDoTimesOut: the shared run is bounded by its timeout.
func TestDoTimesOut(t *testing.T) {
	var g singleflight.Group
	_, err := Do(context.Background(), &g, "k", 10*time.Millisecond, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the run's deadline", err)
	}
}
