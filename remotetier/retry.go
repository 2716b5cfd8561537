package remotetier

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Retry is the retry policy for transient object-store and source errors:
// exponential backoff with full jitter.
type Retry struct {
	// Attempts is the most tries of one operation (default 6).
	Attempts int
	// Base is the first backoff (default 200ms); each retry doubles it up to Max
	// (default 10s); the wait is uniformly random in [0, backoff].
	Base, Max time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 6
	}
	if r.Base <= 0 {
		r.Base = 200 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 10 * time.Second
	}
	return r
}

// backoff returns the wait before retry number n (1-based).
func (r Retry) backoff(n int) time.Duration {
	d := r.Base
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	d = min(d, r.Max)
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// permanent reports errors that a retry cannot fix.
func permanent(err error) bool {
	var ce *record.CorruptError
	var cie *index.CorruptIndexError
	var cme *manifest.CorruptManifestError
	var uve *manifest.UnsupportedVersionError
	var cut *CutError
	var mce *manifest.ConflictError
	return err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrSegmentGone) || errors.Is(err, objstore.ErrBucketNotFound) ||
		errors.Is(err, objstore.ErrInvalidKey) || errors.Is(err, objstore.ErrPreconditionFailed) ||
		errors.As(err, &ce) || errors.As(err, &cie) || errors.As(err, &cme) || errors.As(err, &uve) ||
		errors.As(err, &cut) || errors.As(err, &mce)
}
