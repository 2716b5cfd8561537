package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrInjected is the default error of an injected fault. Tests that drive a
// workload through Faulty check that every failure they see is this one
// (the pebble errorfs pattern: fail call i for i = 0, 1, 2, ... until the
// workload succeeds).
var ErrInjected = errors.New("injected fault")

// Call describes one call through a Faulty bucket.
type Call struct {
	Op  string // one of Operations
	Key string // the key, or the prefix for list
	Seq int64  // 0-based index of this call among all calls of the bucket
}

// Fault is what an Injector decides for a call.
type Fault struct {
	// Err is returned by the call (ErrInjected when nil). Ignored when
	// Truncate is set.
	Err error
	// After makes the call go through to the bucket first and fail only
	// afterwards: the write happened but the caller sees an error, as when
	// a connection drops before the response arrives.
	After bool
	// Truncate (get and get_range only) lets the call succeed but makes
	// its reader fail with ErrInjected and io.ErrUnexpectedEOF after
	// TruncateAfter bytes.
	Truncate      bool
	TruncateAfter int64
}

// Injector decides, per call, whether to inject a fault (nil: none).
type Injector interface {
	Inject(Call) *Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(Call) *Fault

// Inject implements Injector.
func (f InjectorFunc) Inject(c Call) *Fault { return f(c) }

// FailNth fails call number n (0-based, counting every call) with
// ErrInjected and lets all others through.
func FailNth(n int64) Injector {
	return InjectorFunc(func(c Call) *Fault {
		if c.Seq == n {
			return &Fault{}
		}
		return nil
	})
}

// FailMatching fails every call for which match is true with err
// (ErrInjected when nil).
func FailMatching(match func(Call) bool, err error) Injector {
	return InjectorFunc(func(c Call) *Fault {
		if match(c) {
			return &Fault{Err: err}
		}
		return nil
	})
}

// TruncateReads makes the readers of matching get/get_range calls fail
// after n bytes.
func TruncateReads(match func(Call) bool, n int64) Injector {
	return InjectorFunc(func(c Call) *Fault {
		if (c.Op == OpGet || c.Op == OpGetRange) && match(c) {
			return &Fault{Truncate: true, TruncateAfter: n}
		}
		return nil
	})
}

// Faulty is a Bucket that injects faults. It embeds the bucket and
// overrides every call except Close.
type Faulty struct {
	Bucket
	inj Injector

	mu       sync.Mutex
	seq      int64
	injected int64
}

// WithFaults wraps b so that inj can fail its calls.
func WithFaults(b Bucket, inj Injector) *Faulty { return &Faulty{Bucket: b, inj: inj} }

// Injected returns how many faults were injected so far.
func (f *Faulty) Injected() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Calls returns how many calls went through so far.
func (f *Faulty) Calls() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

func (f *Faulty) decide(op, key string) *Fault {
	f.mu.Lock()
	c := Call{Op: op, Key: key, Seq: f.seq}
	f.seq++
	f.mu.Unlock()
	fault := f.inj.Inject(c)
	if fault == nil {
		return nil
	}
	if fault.Truncate && op != OpGet && op != OpGetRange {
		return nil // truncation means nothing for other calls
	}
	f.mu.Lock()
	f.injected++
	f.mu.Unlock()
	return fault
}

func (fault *Fault) err(c string, key string) error {
	err := fault.Err
	if err == nil {
		err = ErrInjected
	}
	return fmt.Errorf("%s %q: %w", c, key, err)
}

// Get implements BucketReader.
func (f *Faulty) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return f.read(OpGet, key, func() (io.ReadCloser, error) { return f.Bucket.Get(ctx, key) })
}

// GetRange implements BucketReader.
func (f *Faulty) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	return f.read(OpGetRange, key, func() (io.ReadCloser, error) { return f.Bucket.GetRange(ctx, key, off, length) })
}

func (f *Faulty) read(op, key string, call func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	fault := f.decide(op, key)
	if fault != nil && !fault.Truncate && !fault.After {
		return nil, fault.err(op, key)
	}
	rc, err := call()
	if err != nil || fault == nil {
		return rc, err
	}
	if !fault.Truncate { // After
		rc.Close()
		return nil, fault.err(op, key)
	}
	return keepAttrs(rc, &truncReader{rc: rc, left: fault.TruncateAfter}), nil
}

// Attributes implements BucketReader.
func (f *Faulty) Attributes(ctx context.Context, key string) (Attrs, error) {
	fault := f.decide(OpAttributes, key)
	if fault != nil && !fault.After {
		return Attrs{}, fault.err(OpAttributes, key)
	}
	a, err := f.Bucket.Attributes(ctx, key)
	if fault != nil && err == nil {
		return Attrs{}, fault.err(OpAttributes, key)
	}
	return a, err
}

// List implements BucketReader.
func (f *Faulty) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	fault := f.decide(OpList, prefix)
	if fault != nil && !fault.After {
		return fault.err(OpList, prefix)
	}
	err := f.Bucket.List(ctx, prefix, fn)
	if fault != nil && err == nil {
		return fault.err(OpList, prefix)
	}
	return err
}

// Put implements Bucket. A fault without After fails before reading r.
func (f *Faulty) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error) {
	fault := f.decide(OpPut, key)
	if fault != nil && !fault.After {
		return Attrs{}, fault.err(OpPut, key)
	}
	a, err := f.Bucket.Put(ctx, key, r, size, cond)
	if fault != nil && err == nil {
		return Attrs{}, fault.err(OpPut, key)
	}
	return a, err
}

// Delete implements Bucket.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	fault := f.decide(OpDelete, key)
	if fault != nil && !fault.After {
		return fault.err(OpDelete, key)
	}
	err := f.Bucket.Delete(ctx, key)
	if fault != nil && err == nil {
		return fault.err(OpDelete, key)
	}
	return err
}

type truncReader struct {
	rc   io.ReadCloser
	left int64
}

func (t *truncReader) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, fmt.Errorf("%w: %w", ErrInjected, io.ErrUnexpectedEOF)
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.rc.Read(p)
	t.left -= int64(n)
	return n, err
}

func (t *truncReader) Close() error { return t.rc.Close() }
