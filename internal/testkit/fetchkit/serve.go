package fetchkit

import (
	"context"
	"testing"
)

// Serve runs serve in the background until the test ends, then cancels its
// context and fails the test if it returned an error.
func Serve(t testing.TB, serve func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}
