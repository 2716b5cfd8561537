package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
		max  time.Duration
	}{
		{"waits", context.Background(), 20 * time.Millisecond, nil, time.Minute},
		{"zero returns at once", context.Background(), 0, nil, time.Second},
		{"cancelled stops the wait", cancelled, time.Hour, context.Canceled, 10 * time.Second},
		{"cancelled with zero", cancelled, 0, context.Canceled, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := Sleep(tc.ctx, tc.d)
			took := time.Since(start)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Sleep: %v, want %v", err, tc.want)
			}
			if tc.want == nil && took < tc.d {
				t.Fatalf("returned after %v, want at least %v", took, tc.d)
			}
			if took > tc.max {
				t.Fatalf("took %v, want at most %v", took, tc.max)
			}
		})
	}
}
