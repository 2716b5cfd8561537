package workers

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// goid is the calling goroutine's id, from its stack trace's header.
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// reusedAfterIdle reports whether work sent after a worker went idle runs
// on that worker.
func reusedAfterIdle(p *Pool) bool {
	ids := make(chan uint64, 1)
	run := func() { ids <- goid() }
	p.Go(run)
	first := <-ids
	for range 200 {
		time.Sleep(time.Millisecond)
		p.Go(run)
		if <-ids == first {
			return true
		}
	}
	return false
}

func TestPool(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle time.Duration
	}{{"stay until Close", 0}, {"idle timeout", time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.idle, 0)
			if !reusedAfterIdle(p) {
				t.Fatal("every function ran on a new goroutine; want the idle worker to take it")
			}
			// Many at once: each runs, the busy ones do not hold the others.
			var wg sync.WaitGroup
			release := make(chan struct{})
			for range 32 {
				wg.Add(1)
				p.Go(func() { defer wg.Done(); <-release })
			}
			close(release)
			wg.Wait()
			p.Close()
			p.Close()
		})
	}
}

// A worker leaves after waiting idle as long as the pool says.
func TestPoolIdleWorkerLeaves(t *testing.T) {
	p := New(5*time.Millisecond, 0)
	defer p.Close()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	left := make(chan struct{})
	go func() { p.wg.Wait(); close(left) }()
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Fatal("an idle worker stayed past its idle time")
	}
}

// Close waits for a busy worker's function.
func TestPoolCloseWaitsForWork(t *testing.T) {
	p := New(0, 0)
	var finished bool
	started := make(chan struct{})
	p.Go(func() { close(started); time.Sleep(20 * time.Millisecond); finished = true })
	<-started
	p.Close()
	if !finished {
		t.Fatal("Close returned before the running function")
	}
}

// After a burst, at most maxIdle workers stay waiting; the others leave.
func TestPoolMaxIdle(t *testing.T) {
	p := New(time.Minute, 2)
	defer p.Close()
	var wg sync.WaitGroup
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before Close: a failed check leaves no worker blocked
	started := make(chan struct{}, 8)
	for range 8 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); started <- struct{}{}; <-release })
	}
	for range 8 {
		<-started
	}
	if n := p.live.Load(); n != 8 {
		t.Fatalf("%d workers for 8 blocked functions, want 8", n)
	}
	free()
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for p.live.Load() > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers stayed after the burst, want at most 2", p.live.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if !reusedAfterIdle(p) {
		t.Fatal("the workers that stayed took no new work")
	}
}

func TestNilPool(t *testing.T) {
	var p *Pool
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	p.Close()
}
