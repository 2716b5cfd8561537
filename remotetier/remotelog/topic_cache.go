package remotelog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/flight"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TopicCache shares the reads of topic objects (ResolveTopic) among the
// RemoteLogs opened over one bucket within TTL of each other: a client
// that lists the offsets of a 128-partition topic opens 128 partitions at
// once, and each would otherwise read the same topic object first. Only
// opens use it; a log's refresh reads the topic object itself, so a
// re-created topic is seen by the refresh that would have seen it without
// the cache. Safe for concurrent use.
type TopicCache struct {
	ttl time.Duration
	now func() time.Time
	sf  singleflight.Group

	mu  sync.Mutex
	lru *simplelru.LRU[string, topicEntry]
}

// topicEntry is one resolution: its answer and when it was read. Only a
// served lineage or a deleted topic is kept; other errors are not.
type topicEntry struct {
	keyID, topicID string
	deleted        bool
	superseded     []string // the superseded lineages' topic IDs
	at             time.Time
}

// Defaults of NewTopicCache.
const (
	DefaultTopicCacheTTL     = time.Second
	DefaultTopicCacheEntries = 4096
)

// NewTopicCache returns a cache of at most entries topics (default
// DefaultTopicCacheEntries), each trusted for ttl (default
// DefaultTopicCacheTTL).
func NewTopicCache(ttl time.Duration, entries int) *TopicCache {
	if ttl <= 0 {
		ttl = DefaultTopicCacheTTL
	}
	if entries <= 0 {
		entries = DefaultTopicCacheEntries
	}
	l, err := simplelru.NewLRU[string, topicEntry](entries, nil)
	if err != nil {
		panic(err) // entries is positive
	}
	return &TopicCache{ttl: ttl, now: time.Now, lru: l}
}

// Resolve is ResolveTopic through the cache.
func (c *TopicCache) Resolve(ctx context.Context, b objstore.BucketReader, prefix, topic string) (keyID, topicID string, err error) {
	e, err := c.entry(ctx, b, prefix, topic)
	if err != nil {
		return "", "", err
	}
	return e.answer(topic)
}

// Superseded is Resolve's answer with the topic IDs of the topic's
// superseded lineages (deleted, or replaced by a re-creation), through the
// cache.
func (c *TopicCache) Superseded(ctx context.Context, b objstore.BucketReader, prefix, topic string) (topicID string, deleted bool, superseded []string, err error) {
	e, err := c.entry(ctx, b, prefix, topic)
	if err != nil {
		return "", false, nil, err
	}
	return e.topicID, e.deleted, e.superseded, nil
}

// entry is the topic's cached entry, read (once for concurrent callers)
// when missing or older than the TTL.
func (c *TopicCache) entry(ctx context.Context, b objstore.BucketReader, prefix, topic string) (topicEntry, error) {
	k := prefix + "\x00" + topic
	if e, ok := c.get(k); ok {
		return e, nil
	}
	return flight.Do(ctx, &c.sf, k, sharedTimeout, func(ctx context.Context) (topicEntry, error) {
		if e, ok := c.get(k); ok {
			return e, nil
		}
		return c.read(ctx, b, prefix, topic)
	})
}

// Reread is Resolve from the topic object itself, whatever the cache holds;
// the answer replaces the cached one, so the next opens share it. A log
// pinned to a lineage (OpenRemoteLogLineage) whose cached answer names
// another re-reads so: the cached one may be up to the TTL old, and the
// pinned lineage current since. Concurrent re-reads of a topic share one
// read, and one asked after another's read began takes its answer: the
// partitions of a topic opened side by side (a listing's end checks) cost
// one GET, not one each.
func (c *TopicCache) Reread(ctx context.Context, b objstore.BucketReader, prefix, topic string) (keyID, topicID string, err error) {
	k := prefix + "\x00" + topic
	asked := c.now()
	e, err := flight.Do(ctx, &c.sf, k+"\x00reread", sharedTimeout, func(ctx context.Context) (topicEntry, error) {
		c.mu.Lock()
		e, ok := c.lru.Get(k)
		c.mu.Unlock()
		if ok && !e.at.Before(asked) {
			return e, nil
		}
		return c.read(ctx, b, prefix, topic)
	})
	if err != nil {
		return "", "", err
	}
	return e.answer(topic)
}

// read reads the topic object and caches the answer: a served lineage or
// a deleted topic (other errors are returned, not kept).
func (c *TopicCache) read(ctx context.Context, b objstore.BucketReader, prefix, topic string) (topicEntry, error) {
	s, err := ReadTopic(ctx, b, prefix, topic)
	if err != nil {
		return topicEntry{}, err
	}
	e := topicEntry{at: c.now()}
	if s != nil {
		var ok bool
		e.keyID, e.topicID, ok = s.Serving()
		e.deleted = !ok
		for _, l := range s.Superseded {
			e.superseded = append(e.superseded, l.TopicID)
		}
	}
	c.mu.Lock()
	c.lru.Add(prefix+"\x00"+topic, e)
	c.mu.Unlock()
	return e, nil
}

func (c *TopicCache) get(k string) (topicEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(k)
	if !ok || c.now().Sub(e.at) >= c.ttl {
		return topicEntry{}, false
	}
	return e, true
}

func (e topicEntry) answer(topic string) (string, string, error) {
	if e.deleted {
		return "", "", fmt.Errorf("%s: %w", topic, ErrTopicDeleted)
	}
	return e.keyID, e.topicID, nil
}
