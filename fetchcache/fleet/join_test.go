package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// noSplitBrainFor fails the test if any of 200 groups has two coordinators, a and c,
// within d.
func noSplitBrainFor(t *testing.T, a, c *Fleet, d time.Duration, what string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; time.Sleep(5 * time.Millisecond) {
		if g := splitBrain(a, c, 200); g != "" {
			t.Fatalf("group %s has two coordinators %s after %s (views %v and %v)", g, time.Since(start), what, liveAddrs(a), liveAddrs(c))
		}
	}
}

// TestJoinNeverTwoCoordinators: a replica that joins wins groups its peer coordinates
// until the peer next reads its lease (a poll interval later), or, when the peer's reads
// fail, until the peer stops counting itself (a lease later). It must not coordinate
// them meanwhile: both would accept the group's joins and commits, and the stale one's
// commits would roll back the other's. Once the peer has handed them over, it does.
func TestJoinNeverTwoCoordinators(t *testing.T) {
	const lease = 600 * time.Millisecond
	for _, blind := range []bool{false, true} {
		name := "peer reads"
		if blind {
			name = "peer's reads fail"
		}
		t.Run(name, func(t *testing.T) {
			mem := objstore.NewMemory()
			peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
			bb := &blindBucket{Bucket: mem}
			a := startReplica(t, bb, peers[0], peers, lease, nil)
			waitLive(t, a.f, peers[:1], 2*lease)
			waitClaimable(t, 2*lease, a.f)
			bb.blind.Store(blind)
			n := startReplica(t, mem, peers[1], peers, lease, nil)
			noSplitBrainFor(t, a.f, n.f, 3*lease, "a replica joined")
			if blind {
				return
			}
			waitClaimable(t, 2*lease, n.f)
			won := 0
			for i := range 200 {
				if n.f.Owns(fmt.Sprintf("g%d", i)) {
					won++
				}
			}
			if won == 0 {
				t.Fatal("the replica that joined coordinates no group a lease after it joined")
			}
		})
	}
}

// TestResumedReplicaWaitsBeforeCoordinating: a replica whose lease lapsed (paused past its
// lease) has had its groups taken over. When it renews again, its peer still coordinates
// them until it next reads the lease: the resumed replica must not claim them back at once.
func TestResumedReplicaWaitsBeforeCoordinating(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	a := pausedReplica(t, b, peers[0], peers, lease)
	c := startReplica(t, b, peers[1], peers, lease, nil)
	waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease) // a is paused: c took everything
	waitClaimable(t, 2*lease, c.f)
	// a resumes: it renews and reads the leases, and c has not read its new lease yet.
	ctx := context.Background()
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	a.poll(ctx)
	if g := splitBrain(a, c.f, 200); g != "" {
		t.Fatalf("group %s has two coordinators right after %s resumed (views %v and %v)", g, peers[0], liveAddrs(a), liveAddrs(c.f))
	}
}
