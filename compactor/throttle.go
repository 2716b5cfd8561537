package compactor

import (
	"context"
	"sync"
	"time"
)

// throttleCheckInterval is how often the throttler compares the observed
// rate with the target (Kafka's Throttler checkIntervalMs, 300 ms).
const throttleCheckInterval = 300 * time.Millisecond

// throttler bounds the I/O rate of all cleaner threads together the way
// Kafka's Throttler does: bytes are counted, and once per check interval,
// if the rate since the interval began is above the target, the caller
// sleeps until it is not.
type throttler struct {
	rate  float64 // bytes per second
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu          sync.Mutex
	periodStart time.Time
	observed    float64
	slept       time.Duration // total, for tests and reports
}

func newThrottler(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *throttler {
	return &throttler{rate: rate, now: now, sleep: sleep, periodStart: now()}
}

// maybeThrottle counts n bytes and sleeps if the rate is above the target.
func (t *throttler) maybeThrottle(ctx context.Context, n int64) error {
	if t == nil || t.rate >= DefaultIOMaxBytesPerSecond {
		return nil
	}
	t.mu.Lock()
	t.observed += float64(n)
	now := t.now()
	elapsed := now.Sub(t.periodStart)
	var wait time.Duration
	if elapsed >= throttleCheckInterval || t.observed > t.rate {
		if need := time.Duration(t.observed / t.rate * float64(time.Second)); need > elapsed {
			wait = need - elapsed
		}
		t.periodStart = now.Add(wait)
		t.observed = 0
		t.slept += wait
	}
	t.mu.Unlock()
	if wait > 0 {
		return t.sleep(ctx, wait)
	}
	return nil
}
