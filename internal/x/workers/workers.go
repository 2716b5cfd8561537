// Package workers runs functions on goroutines that stay for more work
// after their function returns, instead of a new goroutine per function.
//
// A goroutine starts with a small stack and grows it by copying, every
// time a call chain goes deeper than it has been; work that runs deep call
// stacks (the S3 client's middleware, a Fetch's read and batch checks)
// pays for that copying again on every new goroutine. A worker keeps the
// stack it grew. (The Go runtime starts goroutines at the average stack
// size it saw at the last garbage collection, which a process that keeps
// its heap, such as the pretouched fetch process, rarely runs.)
package workers

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool hands functions to idle workers. The zero value is not usable;
// a nil *Pool runs each function on a new goroutine.
type Pool struct {
	work    chan func() // unbuffered: a send succeeds only when a worker waits
	stop    chan struct{}
	idle    time.Duration
	maxIdle int64
	waiting atomic.Int64 // workers waiting for work
	live    atomic.Int64 // workers started and not yet gone
	wg      sync.WaitGroup
	once    sync.Once
}

// New returns a pool whose workers leave after waiting idle for more work
// (0: they stay until Close), and at once when maxIdle others already
// wait (0: no bound), so that a burst of work does not leave its workers'
// stacks behind.
func New(idle time.Duration, maxIdle int) *Pool {
	return &Pool{work: make(chan func()), stop: make(chan struct{}), idle: idle, maxIdle: int64(maxIdle)}
}

// Go runs fn on a worker waiting for work, or on a new one. It does not
// wait for fn. It must not be called after Close.
func (p *Pool) Go(fn func()) {
	if p == nil {
		go fn()
		return
	}
	select {
	case p.work <- fn:
	default:
		p.wg.Go(func() { p.worker(fn) })
	}
}

func (p *Pool) worker(fn func()) {
	p.live.Add(1)
	defer p.live.Add(-1)
	var timeout <-chan time.Time
	var t *time.Timer
	if p.idle > 0 {
		t = time.NewTimer(p.idle)
		defer t.Stop()
	}
	for {
		fn()
		if n := p.waiting.Add(1); p.maxIdle > 0 && n > p.maxIdle {
			p.waiting.Add(-1)
			return
		}
		if t != nil {
			t.Reset(p.idle)
			timeout = t.C
		}
		select {
		case fn = <-p.work:
			p.waiting.Add(-1)
		case <-timeout:
			p.waiting.Add(-1)
			return
		case <-p.stop:
			p.waiting.Add(-1)
			return
		}
	}
}

// Close makes idle workers leave and waits until every worker has (a busy
// one after its function returns). Safe to call more than once.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}
