// Package gate owns the fetch service's admission control: weighted gates
// that admit work up to a capacity and wait a bounded time, and the overload
// errors (ErrOverloaded, *OverloadedError with a retry delay) every interface
// turns into HTTP 429 + Retry-After or Kafka's throttle_time_ms.
package gate

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
)

// ErrOverloaded is matched (errors.Is) by every overload answer of this
// package: a gate could not admit the work within its wait bound. The
// concrete error is an *OverloadedError carrying a suggested retry delay.
var ErrOverloaded = errors.New("fetch service overloaded")

// OverloadedError says which gate refused, how long the request waited, and
// when to retry. The HTTP layer answers 429 with Retry-After (whole seconds,
// rounded up); the Kafka layer sets throttle_time_ms.
type OverloadedError struct {
	Gate       string        // gate name: "gets", "bytes", or a caller's own
	Waited     time.Duration // time spent waiting before giving up
	RetryAfter time.Duration // suggested delay before retrying, > 0
}

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("%v: gate %q full after waiting %v, retry after %v",
		ErrOverloaded, e.Gate, e.Waited.Round(time.Millisecond), e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) true.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// DefaultRetryAfter is the retry delay a gate suggests when its options
// name none, and the delay of an overload error that carries no delay.
const DefaultRetryAfter = time.Second

// RetryAfter reports whether err is an overload answer and the delay it
// suggests before retrying: an *OverloadedError from a Gate, any error in
// the chain with a RetryAfter() time.Duration method (an HTTP client's 429,
// or a partition from another package signalling overload), or one that
// only matches ErrOverloaded (DefaultRetryAfter). The delay is at least one
// millisecond.
func RetryAfter(err error) (time.Duration, bool) {
	var d time.Duration
	var oe *OverloadedError
	var ra interface{ RetryAfter() time.Duration }
	switch {
	case errors.As(err, &oe):
		d = oe.RetryAfter
	case errors.As(err, &ra):
		d = ra.RetryAfter()
	case errors.Is(err, ErrOverloaded):
		d = DefaultRetryAfter
	default:
		return 0, false
	}
	return max(d, time.Millisecond), true
}

// Gate names of the caching bucket's own gates (fetchcache/chunkcache).
const (
	Gets  = "gets"  // concurrent GETs against the store
	Bytes = "bytes" // bytes being brought into memory (store or disk)
)

// Options configures a Gate.
type Options struct {
	// Name is the value of the {gate} label.
	Name string
	// Capacity is the total weight admitted at once (> 0).
	Capacity int64
	// MaxWait bounds how long Start waits before ErrOverloaded (> 0).
	MaxWait time.Duration
	// RetryAfter is the delay suggested in OverloadedError (default 1 s).
	RetryAfter time.Duration
	// Registerer receives the tiered_fetch_gate_* series; nil keeps them
	// unregistered. Several gates may share one registry.
	Registerer prometheus.Registerer
}

// Gate admits weighted work up to a capacity, thanos pkg/gate style with a
// weight: Start waits at most MaxWait (or until a deadline, or ctx) and
// then fails with *OverloadedError; Done returns the weight. A count gate
// is a Gate used with weight 1. Safe for concurrent use.
//
// Waiters are admitted in order, a waiter that does not fit holding back
// those behind it (as golang.org/x/sync/semaphore), except that work
// already admitted and asking for more (Grow) goes before every new
// admission: a body being read that needs more memory must not wait
// behind a new body that waits for it to finish. When all the weight
// admitted is held by work waiting in Grow, none of it can finish: the
// newest of those is refused at once (*OverloadedError), so that the
// weight it returns lets the others go on, rather than all waiting out
// their bound to be refused together.
type Gate struct {
	name       string
	capacity   int64
	maxWait    time.Duration
	retryAfter time.Duration
	inFlight   atomic.Int64
	m          Series

	mu      sync.Mutex
	cur     int64     // weight admitted (the semaphore's count)
	waiters list.List // of *waiter: every Grow before every Start
	grows   int       // Grow waiters at the front of waiters
	// growHeld is the weight held by the work of the Grow waiters.
	growHeld int64
}

// waiter is one admission waiting for weight.
type waiter struct {
	n       int64
	grow    bool
	held    int64         // a Grow's: the weight its work holds
	refused bool          // set before ready is closed: refused, not admitted
	ready   chan struct{} // closed when admitted or refused
}

// errStuck is acquire's refusal of a Grow that could only wait for
// weight held by other Grows waiting.
var errStuck = errors.New("every admitted weight waits to grow")

// New returns a gate; it panics on a non-positive capacity or wait,
// which is a programming error (options are validated before).
func New(o Options) *Gate {
	if o.Capacity <= 0 || o.MaxWait <= 0 {
		panic(fmt.Sprintf("gate: %q needs capacity > 0 and wait > 0, got %d and %v", o.Name, o.Capacity, o.MaxWait))
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	return &Gate{
		name: o.Name, capacity: o.Capacity, maxWait: o.MaxWait, retryAfter: o.RetryAfter,
		m: newGateMetrics(o.Registerer).series(o.Name),
	}
}

// Name returns the gate's label value.
func (g *Gate) Name() string { return g.name }

// Capacity returns the total weight the gate admits at once.
func (g *Gate) Capacity() int64 { return g.capacity }

// InFlight returns the weight admitted and not yet returned.
func (g *Gate) InFlight() int64 { return g.inFlight.Load() }

// Series are the gate's own tiered_fetch_gate_* series (its {gate} label).
func (g *Gate) Series() Series { return g.m }

// Start admits weight, waiting at most MaxWait. It returns ctx's error when
// ctx ends first, and *OverloadedError when the wait runs out. A weight
// above the capacity is clamped to it (it then waits for an empty gate).
func (g *Gate) Start(ctx context.Context, weight int64) error {
	return g.StartBy(ctx, weight, time.Now().Add(g.maxWait))
}

// StartBy is Start with an absolute deadline for the wait instead of
// MaxWait, so that the several gate passes of one request share one wait
// budget. When the deadline has passed it still admits the weight if it is
// free at once.
func (g *Gate) StartBy(ctx context.Context, weight int64, deadline time.Time) error {
	return g.start(ctx, weight, deadline, false, 0)
}

// Grow is Start for weight more to work the gate already admitted, which
// holds held of it (a produce body whose records turn out larger than the
// body): it waits only for the weight to be free, ahead of every new
// admission waiting, so that the work it is part of can finish and return
// its weight rather than wait for admissions that wait for it. It is
// refused at once when all the admitted weight is held by such work
// waiting (the newest is refused).
func (g *Gate) Grow(ctx context.Context, held, weight int64) error {
	return g.start(ctx, weight, time.Now().Add(g.maxWait), true, held)
}

func (g *Gate) start(ctx context.Context, weight int64, deadline time.Time, grow bool, held int64) error {
	weight = g.clamp(weight)
	if g.tryAcquire(weight, grow) {
		g.admitted(weight)
		g.m.Wait.Observe(0)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g.m.Waits.Inc()
	start := time.Now()
	wctx, cancel := context.WithDeadline(ctx, deadline)
	err := g.acquire(wctx, weight, grow, held)
	cancel()
	waited := time.Since(start)
	g.m.Wait.Observe(waited.Seconds())
	if err == nil {
		g.admitted(weight)
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	g.m.Rejections.Inc()
	return &OverloadedError{Gate: g.name, Waited: waited, RetryAfter: g.retryAfter}
}

// TryStart admits weight only if it is free now; it never waits and counts
// nothing as a wait or rejection (read-ahead uses it: it yields to clients).
func (g *Gate) TryStart(weight int64) bool {
	weight = g.clamp(weight)
	if !g.tryAcquire(weight, false) {
		return false
	}
	g.admitted(weight)
	return true
}

// Done returns weight admitted by Start, StartBy, Grow or TryStart.
func (g *Gate) Done(weight int64) {
	weight = g.clamp(weight)
	g.inFlight.Add(-weight)
	g.m.InFlight.Sub(float64(weight))
	g.mu.Lock()
	g.cur -= weight
	if g.cur < 0 {
		g.mu.Unlock()
		panic(fmt.Sprintf("gate: %q returned more weight than it admitted", g.name))
	}
	g.admitWaiters()
	g.refuseStuck()
	g.mu.Unlock()
}

// tryAcquire takes n if it is free and no waiter it must not pass waits: a
// new admission passes none, a Grow passes the new admissions waiting.
func (g *Gate) tryAcquire(n int64, grow bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tryAcquireLocked(n, grow)
}

// acquire waits in line for n until ctx ends; a Grow's work holds held.
func (g *Gate) acquire(ctx context.Context, n int64, grow bool, held int64) error {
	g.mu.Lock()
	if g.tryAcquireLocked(n, grow) {
		g.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, grow: grow, held: held, ready: make(chan struct{})}
	var e *list.Element
	if grow {
		// Behind the Grows already waiting, before every Start.
		e = g.waiters.Front()
		for range g.grows {
			e = e.Next()
		}
		if e == nil {
			e = g.waiters.PushBack(w)
		} else {
			e = g.waiters.InsertBefore(w, e)
		}
		g.grows++
		g.growHeld += held
		g.refuseStuck()
	} else {
		e = g.waiters.PushBack(w)
	}
	g.mu.Unlock()

	select {
	case <-w.ready:
		if w.refused {
			return errStuck
		}
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready:
		if !w.refused {
			// Admitted as ctx ended: give the weight back.
			g.cur -= n
		}
	default:
		g.remove(e)
	}
	// Its leaving may let the waiters behind it in.
	g.admitWaiters()
	g.refuseStuck()
	return ctx.Err()
}

// tryAcquireLocked is tryAcquire with g.mu held.
func (g *Gate) tryAcquireLocked(n int64, grow bool) bool {
	ahead := g.waiters.Len()
	if grow {
		ahead = g.grows
	}
	if ahead > 0 || g.capacity-g.cur < n {
		return false
	}
	g.cur += n
	return true
}

// admitWaiters admits waiters in order while the first fits. g.mu held.
func (g *Gate) admitWaiters() {
	for {
		e := g.waiters.Front()
		if e == nil {
			return
		}
		w := e.Value.(*waiter)
		if g.capacity-g.cur < w.n {
			return
		}
		g.cur += w.n
		g.remove(e)
		close(w.ready)
	}
}

// remove takes a waiter out of the line. g.mu held.
func (g *Gate) remove(e *list.Element) {
	w := g.waiters.Remove(e).(*waiter)
	if w.grow {
		g.grows--
		g.growHeld -= w.held
	}
}

// refuseStuck refuses the newest Grow waiting while all the admitted
// weight is held by the work of Grows waiting: nothing else can return
// weight, so none of them would be admitted before its bound. Called
// after admitWaiters (the first waiter does not fit); the waiters behind a
// refused one are admitted if they fit. g.mu held.
func (g *Gate) refuseStuck() {
	for g.grows > 0 && g.cur <= g.growHeld {
		e := g.waiters.Front()
		for range g.grows - 1 {
			e = e.Next()
		}
		w := e.Value.(*waiter)
		g.remove(e)
		w.refused = true
		close(w.ready)
		// A refused Grow at the front may have held back waiters that
		// fit: they go in now, not at the next Done.
		g.admitWaiters()
	}
}

func (g *Gate) admitted(weight int64) {
	g.inFlight.Add(weight)
	g.m.InFlight.Add(float64(weight))
}

func (g *Gate) clamp(w int64) int64 {
	if w > g.capacity {
		return g.capacity
	}
	if w < 1 {
		return 1
	}
	return w
}

// gateMetrics are the tiered_fetch_gate_* vectors; several gates share them.
type gateMetrics struct {
	inFlight   *prometheus.GaugeVec
	waits      *prometheus.CounterVec
	rejections *prometheus.CounterVec
	wait       *prometheus.HistogramVec
}

// Series are one gate's metrics: in-flight weight, admissions that waited,
// rejections, and the wait histogram.
type Series struct {
	InFlight   prometheus.Gauge
	Waits      prometheus.Counter
	Rejections prometheus.Counter
	Wait       prometheus.Observer
}

func newGateMetrics(reg prometheus.Registerer) *gateMetrics {
	m := &gateMetrics{
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tiered_fetch_gate_in_flight",
			Help: "Weight admitted by a gate and not yet returned (GETs for gets, bytes for bytes).",
		}, []string{"gate"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_gate_waits_total",
			Help: "Gate admissions that had to wait.",
		}, []string{"gate"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_gate_rejections_total",
			Help: "Gate admissions refused with an overload error after the wait bound.",
		}, []string{"gate"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tiered_fetch_gate_wait_seconds",
			Help:    "Time spent waiting for a gate (0 when admitted at once).",
			Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5},
		}, []string{"gate"}),
	}
	if reg != nil {
		m.inFlight = promreg.RegisterOrReuse(reg, m.inFlight)
		m.waits = promreg.RegisterOrReuse(reg, m.waits)
		m.rejections = promreg.RegisterOrReuse(reg, m.rejections)
		m.wait = promreg.RegisterOrReuse(reg, m.wait)
	}
	return m
}

func (m *gateMetrics) series(name string) Series {
	return Series{
		InFlight:   m.inFlight.WithLabelValues(name),
		Waits:      m.waits.WithLabelValues(name),
		Rejections: m.rejections.WithLabelValues(name),
		Wait:       m.wait.WithLabelValues(name),
	}
}
