package objstore

import (
	"context"
	"testing"
)

// TestCacheMarks: WithPrefetch marks a context cached-only and prefetch;
// WithoutPrefetch clears only the prefetch mark, WithoutCacheMarks both,
// and each leaves an unmarked context as it is.
func TestCacheMarks(t *testing.T) {
	bg := context.Background()
	for _, tt := range []struct {
		name               string
		ctx                context.Context
		cachedOnly, prefet bool
	}{
		{"none", bg, false, false},
		{"cached_only", WithCachedOnly(bg), true, false},
		{"prefetch", WithPrefetch(bg), true, true},
		{"prefetch_without_prefetch", WithoutPrefetch(WithPrefetch(bg)), true, false},
		{"prefetch_without_cache_marks", WithoutCacheMarks(WithPrefetch(bg)), false, false},
		{"cached_only_without_cache_marks", WithoutCacheMarks(WithCachedOnly(bg)), false, false},
		{"cleared_then_marked", WithPrefetch(WithoutCacheMarks(WithPrefetch(bg))), true, true},
	} {
		if got := CachedOnly(tt.ctx); got != tt.cachedOnly {
			t.Errorf("%s: CachedOnly %v, want %v", tt.name, got, tt.cachedOnly)
		}
		if got := Prefetch(tt.ctx); got != tt.prefet {
			t.Errorf("%s: Prefetch %v, want %v", tt.name, got, tt.prefet)
		}
	}
	if WithoutPrefetch(bg) != bg || WithoutCacheMarks(bg) != bg {
		t.Error("clearing the marks of an unmarked context made a new one")
	}
}
