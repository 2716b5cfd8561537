package groups

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestReviewEmptyStateNotWrittenAfterMove: the Empty state a replica
// writes when a group's last member goes is not written over the state of
// the replica the group moved to: not when the members expire here after
// the Ring moved the group (they went to the new coordinator; the fleet's
// Release may come later), nor when the group was Released while the write
// waited and came back with a new member. The new coordinator's object
// (Stable, a later generation) stays as written.
func TestReviewEmptyStateNotWrittenAfterMove(t *testing.T) {
	ctx := context.Background()
	for _, releasedAndBack := range []bool{false, true} {
		b := &putsHeldBack{Bucket: objstore.NewMemory(), reached: make(chan struct{}), released: make(chan struct{})}
		var self atomic.Bool
		self.Store(true)
		h := newHarness(t, b, func(o *Options) { o.Ring = atomicRing{&self} })
		const g = "g"
		h.soleMemberCommitted5(g)
		other := func() {
			// The new coordinator's members form generation 7 and commit.
			if _, err := NewStore(b.Bucket, StoreOptions{}).Update(ctx, g, func(o *Object) error {
				o.State, o.Generation, o.ProtocolType = StateStable, 7, ProtocolTypeConsumer
				return commitOne("t", 0, 20)(o)
			}); err != nil {
				t.Fatal(err)
			}
		}
		if !releasedAndBack {
			self.Store(false)
			other()
			h.clk.Add(session + time.Millisecond)
			h.c.Tick() // the member, gone to the new coordinator, expires here
		} else {
			b.armed.Store(true)
			h.clk.Add(session + time.Millisecond)
			h.c.Tick()
			recv(t, b.reached) // the Empty state's PUT is under way
			self.Store(false)
			h.c.Release(g)
			other()
			self.Store(true) // the group comes back, and a member joins
			_, jx := h.newMember(g)
			recv(t, jx)
			close(b.released)
		}
		h.c.Wait()
		o, err := NewStore(b.Bucket, StoreOptions{}).Load(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if o.State != StateStable || o.EmptySinceMS != 0 || o.Generation != 7 {
			t.Fatalf("released and back %v: the new coordinator's object became %s (empty since %d, generation %d), want Stable in generation 7",
				releasedAndBack, o.State, o.EmptySinceMS, o.Generation)
		}
		if off, _ := o.Lookup("t", 0); off.Offset != 20 {
			t.Fatalf("released and back %v: offset %d, want the new coordinator's 20", releasedAndBack, off.Offset)
		}
	}
}
