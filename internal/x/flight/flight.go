// Package flight owns the calls that concurrent callers share
// (singleflight) without sharing the first caller's cancellation.
package flight

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"
)

// Do runs fn once for the concurrent callers of key on g. fn runs under a
// context detached from every caller's cancellation (ctx's values kept)
// and bounded by timeout, so one caller giving up does not fail the
// others; each caller stops waiting when its own ctx ends.
func Do[T any](ctx context.Context, g *singleflight.Group, key string, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return fn(fctx)
	})
	var zero T
	select {
	case r := <-ch:
		if r.Err != nil {
			return zero, r.Err
		}
		return r.Val.(T), nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
