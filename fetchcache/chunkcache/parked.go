package chunkcache

import (
	"io"
	"sync"
	"time"
)

// Continued GETs. A read-ahead run that does not reach its object's end
// asks the store for the object from the run's first byte to the end,
// reads the run's chunks, and parks the open body at the byte where it
// stopped. The next run of the same object that starts at that byte (the
// stream's next read-ahead, usually moments later) reads on from the
// parked body instead of sending a GET. A sequential reader so costs one
// GET per segment, however small its share of the in-flight budget and
// however shallow its read-ahead: a 16 MiB segment read by 32 streams at
// one 4 MiB chunk each is one GET, not four. The store's fixed cost per
// request (MinIO on the same host: about as much CPU as serving 2 MiB) is
// paid once per object.
//
// A parked body holds one connection to the store and no process memory
// beyond it: what the store sent on waits in the kernel's socket buffers
// (TCP stops the sender once they are full; up to net.ipv4.tcp_rmem's
// maximum, which a container's memory cgroup is charged for, outside
// the cache's budgets). Its bytes are not read until a run continues it,
// so the in-flight budget and the gets gate count a continued read like a
// GET: MaxConcurrentGets bounds the GETs transferring, and at most
// ParkedGets more connections wait parked. A GET extended to the object's
// end that is closed early also costs its connection (it cannot be
// reused), and objstore's get_range durations run until a body is closed,
// parked time included. Only runs whose reader goes on past them (read-ahead
// and a stream's own reads) are extended, and only when the chunk after
// them is neither cached (in memory or on disk) nor loading. At most
// ParkedGets bodies are parked, the oldest closed first, and a body parked longer than the idle time
// (the stream's reader went away or fell behind) is closed, as are all at
// Close. A continued read that fails is retried once with a new GET. The
// store bills what it sent; a parked body closed unused wasted at most its
// socket buffers (tiered_fetch_store_gets_parked_unused_total counts them:
// readers slower than a chunk per StreamIdle leave their bodies so).

// parkKey names a parked body: the object version and the byte it is at.
type parkKey struct {
	object, version string
	off             int64
}

// parkedBody is a body parked at a parkKey; it goes on to the object's end.
type parkedBody struct {
	rc io.ReadCloser
	at time.Time
}

// parking holds the parked bodies of one CachingBucket.
type parking struct {
	mu   sync.Mutex
	m    map[parkKey]parkedBody
	max  int
	idle time.Duration
	now  func() time.Time
	// gauge is added the change of len(m) (buckets may share the series)
	// and unused counts the bodies closed without being continued; nil in
	// tests that build a parking alone.
	gauge  func(float64)
	unused func()
}

func newParking(max int, idle time.Duration, gauge func(float64), unused func()) *parking {
	return &parking{m: map[parkKey]parkedBody{}, max: max, idle: idle, now: time.Now, gauge: gauge, unused: unused}
}

// closeUnused closes a parked body no run continued.
func (p *parking) closeUnused(rc io.ReadCloser) {
	_ = rc.Close()
	if p.unused != nil {
		p.unused()
	}
}

func (p *parking) changed(delta int) {
	if p.gauge != nil && delta != 0 {
		p.gauge(float64(delta))
	}
}

// take removes and returns the body parked at k; nil when none is.
func (p *parking) take(k parkKey) io.ReadCloser {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.m[k]
	if !ok {
		return nil
	}
	delete(p.m, k)
	p.changed(-1)
	return b.rc
}

// put parks rc at k, closing the oldest parked body if the parking is
// full, or rc itself when a body is already parked at k (two runs raced
// there; one suffices).
func (p *parking) put(k parkKey, rc io.ReadCloser) {
	var evict io.ReadCloser
	p.mu.Lock()
	if _, dup := p.m[k]; dup {
		p.mu.Unlock()
		p.closeUnused(rc)
		return
	}
	delta := 1
	if len(p.m) >= p.max {
		var oldest parkKey
		var at time.Time
		for pk, b := range p.m {
			if evict == nil || b.at.Before(at) {
				oldest, at, evict = pk, b.at, b.rc
			}
		}
		delete(p.m, oldest)
		delta = 0
	}
	p.m[k] = parkedBody{rc: rc, at: p.now()}
	p.changed(delta)
	p.mu.Unlock()
	if evict != nil {
		p.closeUnused(evict)
	}
}

// sweep closes the bodies parked longer than the idle time; all of them
// with all set.
func (p *parking) sweep(all bool) {
	var stale []io.ReadCloser
	p.mu.Lock()
	now := p.now()
	for k, b := range p.m {
		if all || now.Sub(b.at) > p.idle {
			stale = append(stale, b.rc)
			delete(p.m, k)
		}
	}
	p.changed(-len(stale))
	p.mu.Unlock()
	for _, rc := range stale {
		p.closeUnused(rc)
	}
}

// len is the number of parked bodies.
func (p *parking) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// sweeper closes idle parked bodies every half idle time until the
// bucket closes, and then all of them.
func (c *CachingBucket) sweeper() {
	t := time.NewTicker(max(c.park.idle/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			c.park.sweep(true)
			return
		case <-t.C:
			c.park.sweep(false)
		}
	}
}
