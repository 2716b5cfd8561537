package manifest

import (
	"container/list"
	"context"
	"sync"
)

// SubCache is a Resolver that keeps the most recently used decoded and
// verified sub-manifests, so repeated lookups skip fetching and decoding.
// Sealed sub-manifests never change (a key names its content), so entries
// never go stale. Safe for concurrent use; returned sub-manifests are shared
// and must not be modified.
type SubCache struct {
	r   Resolver
	max int

	mu    sync.Mutex
	order *list.List // of SubRef, most recent first
	items map[SubRef]cacheEntry
}

type cacheEntry struct {
	sub *SubManifest
	el  *list.Element
}

// NewSubCache returns a cache of at most entries sub-manifests loaded
// through r.
func NewSubCache(r Resolver, entries int) *SubCache {
	return &SubCache{r: r, max: max(entries, 1), order: list.New(), items: map[SubRef]cacheEntry{}}
}

// Load passes through to the underlying Resolver.
func (c *SubCache) Load(ctx context.Context, key string, size int64) ([]byte, error) {
	return c.r.Load(ctx, key, size)
}

func (c *SubCache) get(ref SubRef) (*SubManifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[ref]
	if ok {
		c.order.MoveToFront(e.el)
	}
	return e.sub, ok
}

func (c *SubCache) put(ref SubRef, s *SubManifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[ref]; ok {
		return
	}
	c.items[ref] = cacheEntry{sub: s, el: c.order.PushFront(ref)}
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(SubRef)
		delete(c.items, old)
	}
}

// Len is the number of cached sub-manifests.
func (c *SubCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
