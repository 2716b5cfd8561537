package groups

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tiered/tiered/remotetier/objstore"
)

// putsHeldBack holds the first PUT after it is armed until released,
// before it reaches the bucket (a slow PUT).
type putsHeldBack struct {
	objstore.Bucket
	armed    atomic.Bool
	reached  chan struct{}
	released chan struct{}
}

func (b *putsHeldBack) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	if b.armed.CompareAndSwap(true, false) {
		close(b.reached)
		<-b.released
	}
	return b.Bucket.Put(ctx, key, r, size, cond)
}

// soleMemberCommitted5 makes a the only member of group (Stable, in
// generation gen) and commits offset 5 of t/0 as a.
func (h *harness) soleMemberCommitted5(group string) (a string, gen int32) {
	h.t.Helper()
	a, ja := h.newMember(group)
	ra := recv(h.t, ja)
	h.sync(group, a, ra.Generation, map[string]string{a: "A"})
	wantCode(h.t, "commit 5", h.commit(group, a, ra.Generation, nil, 5), 0)
	return a, ra.Generation
}

// commitAsync sends h.commit from its own goroutine.
func (h *harness) commitAsync(group, member string, gen int32, offset int64) <-chan int16 {
	done := make(chan int16, 1)
	go func() { done <- h.commit(group, member, gen, nil, offset) }()
	return done
}

// TestReviewCommitNotReappliedAfterMove: a commit whose PUT is slow while
// the group moves to another replica, whose members commit a later offset
// of the same partition, loses its conditional PUT; it is then not applied
// again on top of the new coordinator's offset (which would roll the
// group's committed offset back to the old member's): it is answered
// NOT_COORDINATOR, as Kafka answers a commit whose append finds the
// coordinator moved.
func TestReviewCommitNotReappliedAfterMove(t *testing.T) {
	ctx := context.Background()
	b := &putsHeldBack{Bucket: objstore.NewMemory(), reached: make(chan struct{}), released: make(chan struct{})}
	var self atomic.Bool
	self.Store(true)
	h := newHarness(t, b, func(o *Options) { o.Ring = atomicRing{&self} })
	const g = "g"
	a, gen := h.soleMemberCommitted5(g)

	b.armed.Store(true)
	done := h.commitAsync(g, a, gen, 7)
	recv(t, b.reached)
	// The group moves; the other replica's member commits 20.
	self.Store(false)
	h.c.Release(g)
	if _, err := NewStore(b.Bucket, StoreOptions{}).Update(ctx, g, commitOne("t", 0, 20)); err != nil {
		t.Fatal(err)
	}
	close(b.released)
	wantCode(t, "the old member's commit after the move", recv(t, done), kerr.NotCoordinator.Code)
	o, err := NewStore(b.Bucket, StoreOptions{}).Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := o.Lookup("t", 0); off.Offset != 20 {
		t.Fatalf("committed offset %d after the move, want the new coordinator's 20", off.Offset)
	}
}
