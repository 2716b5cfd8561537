package daemon

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestHeapPressure: no pressure without a soft memory limit or with the
// live heap well under it; over it by about what the live heap exceeds
// the limit less the margin.
func TestHeapPressure(t *testing.T) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	p := HeapPressure()
	keep := make([]byte, 64<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	runtime.GC()
	if got := p(); got != 0 {
		t.Fatalf("no limit: pressure %d", got)
	}
	debug.SetMemoryLimit(1 << 40)
	time.Sleep(11 * time.Millisecond)
	if got := p(); got != 0 {
		t.Fatalf("a limit far above the heap: pressure %d", got)
	}
	debug.SetMemoryLimit(48 << 20)
	runtime.GC()
	time.Sleep(11 * time.Millisecond)
	// live ≥ 64 MiB, limit - margin = 16 MiB
	if got := p(); got < 48<<20 {
		t.Fatalf("64 MiB live under a 48 MiB limit: pressure %d, want at least 48 MiB", got)
	}
	runtime.KeepAlive(keep)
}
