package objstore

import (
	"context"
	"sync"
	"sync/atomic"
)

// DemandGroup counts the reads of one request (a Kafka Fetch naming many
// partitions, read in parallel) that have not yet asked the store for
// their own bytes. While any has not, a RemoteLog asks its caching bucket
// (ReadAheader) for no read-ahead beyond what the read itself is about to
// read (a new stream's own segment, which its read joins; nothing for a
// stream that goes on), and asks for the rest of the window once every
// read of the group has asked: the request's own loads take the store's
// GET slots first, one per partition, and its read-ahead what is left
// (else the first partitions of a cold Fetch read three segments each
// ahead of the last partitions' first, and the whole Fetch waits for
// those). When the last read has asked, the group calls what waits for it
// to settle.
type DemandGroup struct {
	pending atomic.Int64
	mu      sync.Mutex
	settled []func()
}

// NewDemandGroup returns a group of n reads; each is made with a context
// from WithDemand and ends its place in the group (DemandAsked, or the
// release WithDemand returns).
func NewDemandGroup(n int) *DemandGroup {
	g := &DemandGroup{}
	g.pending.Store(int64(n))
	return g
}

// Pending reports whether a read of the group has not yet asked for its
// bytes.
func (g *DemandGroup) Pending() bool { return g.pending.Load() > 0 }

// OnSettled has f called once no read of the group is pending: later, on
// the goroutine of the read that ends the group, and false when the group
// has already settled (f is not called; the caller goes on as if it had).
func (g *DemandGroup) OnSettled(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.Pending() {
		return false
	}
	g.settled = append(g.settled, f)
	return true
}

func (g *DemandGroup) done() {
	if g.pending.Add(-1) != 0 {
		return
	}
	g.mu.Lock()
	fs := g.settled
	g.settled = nil
	g.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// demandToken is one read's place in its group.
type demandToken struct {
	g    *DemandGroup
	once sync.Once
}

type demandKey struct{}

// WithDemand returns ctx carrying a place in g for one read, and its
// release, which the caller calls when the read has ended (a read served
// from the cache, or failed, never asks the store). Only the first of the
// release and DemandAsked counts.
func WithDemand(ctx context.Context, g *DemandGroup) (context.Context, func()) {
	t := &demandToken{g: g}
	return context.WithValue(ctx, demandKey{}, t), t.ask
}

// ask ends the token's place in its group, once.
func (t *demandToken) ask() { t.once.Do(t.g.done) }

// tokenOf is ctx's read's place in a group, nil when none.
func tokenOf(ctx context.Context) *demandToken {
	t, _ := ctx.Value(demandKey{}).(*demandToken)
	return t
}

// DemandAsked tells the group of ctx's read (if any) that the read has
// asked for its bytes: a caching bucket calls it once a load of the read's
// own holds a GET's slot (or ended without one), or when the read finds
// its bytes cached or loading.
func DemandAsked(ctx context.Context) {
	if t := tokenOf(ctx); t != nil {
		t.ask()
	}
}

// WithoutDemand returns ctx without its read's place in a DemandGroup:
// for what a read loads before its own bytes (an index), which must not
// count as its asking for them.
func WithoutDemand(ctx context.Context) context.Context {
	if tokenOf(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, demandKey{}, (*demandToken)(nil))
}

// DemandOf returns the group of ctx's read while a read of it is pending,
// else nil.
func DemandOf(ctx context.Context) *DemandGroup {
	if t := tokenOf(ctx); t != nil && t.g.Pending() {
		return t.g
	}
	return nil
}
