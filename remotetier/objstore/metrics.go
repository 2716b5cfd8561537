package objstore

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
)

// Operation label values of the objstore metrics.
const (
	OpGet        = "get"
	OpGetRange   = "get_range"
	OpPut        = "put"
	OpDelete     = "delete"
	OpList       = "list"
	OpAttributes = "attributes"
)

// Operations lists every operation label value.
var Operations = []string{OpGet, OpGetRange, OpPut, OpDelete, OpList, OpAttributes}

// byteOps are the operations that move object bytes.
var byteOps = []string{OpGet, OpGetRange, OpPut}

// Metrics are the per-operation series of the object store:
//
//	tiered_objstore_operations_total{operation}
//	tiered_objstore_operation_failures_total{operation}
//	tiered_objstore_operation_duration_seconds{operation}
//	tiered_objstore_bytes_total{operation}    (get, get_range, put)
//
// A not-found answer and a lost precondition are outcomes, not failures,
// and a caller's own cancellation is not the store's failure either; none
// of them counts in failures_total. For get and get_range the duration runs
// until the reader is closed and bytes count what was read; a read error
// counts as a failure.
type Metrics struct {
	ops      *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
}

// NewMetrics registers the objstore metrics with reg, or reuses them when
// they are already registered there, so several buckets can share one
// registry. Every label value starts at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_objstore_operations_total",
			Help: "Object store calls, by operation.",
		}, []string{"operation"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_objstore_operation_failures_total",
			Help: "Object store calls that failed (not counting not-found, lost preconditions and caller cancellation), by operation.",
		}, []string{"operation"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tiered_objstore_operation_duration_seconds",
			Help:    "Object store call latency; for reads, until the reader is closed.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1ms .. ~65s
		}, []string{"operation"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_objstore_bytes_total",
			Help: "Object bytes read (get, get_range) and written (put).",
		}, []string{"operation"}),
	}
	if reg != nil {
		m.ops = promreg.RegisterOrReuse(reg, m.ops)
		m.failures = promreg.RegisterOrReuse(reg, m.failures)
		m.duration = promreg.RegisterOrReuse(reg, m.duration)
		m.bytes = promreg.RegisterOrReuse(reg, m.bytes)
	}
	for _, op := range Operations {
		m.ops.WithLabelValues(op)
		m.failures.WithLabelValues(op)
		m.duration.WithLabelValues(op)
	}
	for _, op := range byteOps {
		m.bytes.WithLabelValues(op)
	}
	return m
}

// Metered is a Bucket that records Metrics. It embeds the bucket and
// overrides every call except Close.
type Metered struct {
	Bucket
	m *Metrics
}

// WithMetrics wraps b so every call is counted and timed in reg.
func WithMetrics(b Bucket, reg prometheus.Registerer) *Metered {
	return &Metered{Bucket: b, m: NewMetrics(reg)}
}

func isFailure(err error) bool {
	return err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPreconditionFailed) &&
		!errors.Is(err, context.Canceled)
}

func (w *Metered) done(op string, start time.Time, err error) {
	w.m.ops.WithLabelValues(op).Inc()
	if isFailure(err) {
		w.m.failures.WithLabelValues(op).Inc()
	}
	w.m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Get implements BucketReader.
func (w *Metered) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return w.read(OpGet, func() (io.ReadCloser, error) { return w.Bucket.Get(ctx, key) })
}

// GetRange implements BucketReader.
func (w *Metered) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	return w.read(OpGetRange, func() (io.ReadCloser, error) { return w.Bucket.GetRange(ctx, key, off, length) })
}

func (w *Metered) read(op string, call func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := call()
	if err != nil {
		w.done(op, start, err)
		return nil, err
	}
	return keepAttrs(rc, &meteredReader{rc: rc, w: w, op: op, start: start}), nil
}

// Attributes implements BucketReader.
func (w *Metered) Attributes(ctx context.Context, key string) (Attrs, error) {
	start := time.Now()
	a, err := w.Bucket.Attributes(ctx, key)
	w.done(OpAttributes, start, err)
	return a, err
}

// List implements BucketReader.
func (w *Metered) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	start := time.Now()
	var fnErr error
	err := w.Bucket.List(ctx, prefix, func(info ObjectInfo) error {
		fnErr = fn(info)
		return fnErr
	})
	if err != nil && errors.Is(err, fnErr) {
		w.done(OpList, start, nil) // the caller stopped the listing
	} else {
		w.done(OpList, start, err)
	}
	return err
}

// Put implements Bucket.
func (w *Metered) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error) {
	start := time.Now()
	a, err := w.Bucket.Put(ctx, key, r, size, cond)
	w.done(OpPut, start, err)
	if err == nil {
		w.m.bytes.WithLabelValues(OpPut).Add(float64(a.Size))
	}
	return a, err
}

// Delete implements Bucket.
func (w *Metered) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := w.Bucket.Delete(ctx, key)
	w.done(OpDelete, start, err)
	return err
}

type meteredReader struct {
	rc      io.ReadCloser
	w       *Metered
	op      string
	start   time.Time
	readErr error
	once    sync.Once
}

func (r *meteredReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.w.m.bytes.WithLabelValues(r.op).Add(float64(n))
	}
	if err != nil && err != io.EOF && r.readErr == nil {
		r.readErr = err
	}
	return n, err
}

func (r *meteredReader) Close() error {
	err := r.rc.Close()
	r.once.Do(func() { r.w.done(r.op, r.start, errors.Join(r.readErr, err)) })
	return err
}
