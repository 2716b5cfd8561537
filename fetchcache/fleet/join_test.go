package fleet

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
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
	a, c, peers := takenOver(t, lease)
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

// TestListedLaterWaitsBeforeCoordinating: a replica missing from the DNS answers (a pod not
// ready yet) renews its lease, but its peers read only the answers' leases. When it first
// appears there, its peers have not read its lease yet: it must not claim its groups at once,
// however long it has been renewing.
func TestListedLaterWaitsBeforeCoordinating(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	res := &fakeResolver{hosts: map[string][]string{}}
	res.set("fetch-headless.tiered.svc", "10.1.0.7")
	peers := []string{"fetch-headless.tiered.svc:9092"}
	mk := func(self string) *Fleet {
		t.Helper()
		f, err := New(Options{Bucket: b, Self: self, Peers: peers, Lease: lease, Resolver: res, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, c := mk("10.1.0.5:9092"), mk("10.1.0.7:9092")
	ctx := context.Background()
	for end := time.Now().Add(lease + Interval(lease)); time.Now().Before(end); time.Sleep(Interval(lease) / 2) {
		for _, f := range []*Fleet{a, c} {
			if err := f.renew(ctx); err != nil {
				t.Fatal(err)
			}
			f.poll(ctx)
		}
	}
	res.set("fetch-headless.tiered.svc", "10.1.0.7", "10.1.0.5")
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	a.poll(ctx) // c has not polled since
	if g := splitBrain(a, c, 200); g != "" {
		t.Fatalf("group %s has two coordinators right after 10.1.0.5 appeared in the DNS answers (views %v and %v)", g, liveAddrs(a), liveAddrs(c))
	}
}

// slowPut delays every Put while slow is set.
type slowPut struct {
	objstore.Bucket
	slow  atomic.Bool
	delay time.Duration
}

func (b *slowPut) Put(ctx context.Context, key string, r io.Reader, size int64, c objstore.Condition) (objstore.Attrs, error) {
	if b.slow.Load() {
		time.Sleep(b.delay)
	}
	return b.Bucket.Put(ctx, key, r, size, c)
}

// TestLateRenewalIsALapse: a renewal that starts in time but lands after the lease its peers
// judge it by has let them declare the replica dead and take its groups. It is a lapse: the
// replica drops its groups' state and does not claim them back at once.
func TestLateRenewalIsALapse(t *testing.T) {
	const lease = time.Second
	mem := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	sa := &slowPut{Bucket: mem, delay: 350 * time.Millisecond}
	a, c := pausedReplica(t, sa, peers[0], peers, lease), pausedReplica(t, mem, peers[1], peers, lease)
	ctx := context.Background()
	step := func(fs ...*Fleet) {
		for _, f := range fs {
			_ = f.renew(ctx)
			f.poll(ctx)
		}
	}
	for end := time.Now().Add(lease + 300*time.Millisecond); time.Now().Before(end); time.Sleep(Interval(lease)) {
		step(a, c)
	}
	step(a, c)
	t0 := time.Now()
	time.Sleep(800 * time.Millisecond)
	sa.slow.Store(true)
	done := make(chan error, 1)
	go func() { done <- a.renew(ctx) }() // starts 0.8 lease after the last, lands about 1.15
	step(c)
	time.Sleep(time.Until(t0.Add(1050 * time.Millisecond)))
	step(c) // c: a's lease unchanged for a lease: c takes everything
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sa.slow.Store(false)
	a.poll(ctx)
	if g := splitBrain(a, c, 200); g != "" {
		t.Fatalf("group %s has two coordinators after a late renewal (views %v and %v)", g, liveAddrs(a), liveAddrs(c))
	}
}

// slowStore delays every Put and Get by d.
type slowStore struct {
	objstore.Bucket
	d time.Duration
}

func (b *slowStore) Put(ctx context.Context, key string, r io.Reader, size int64, c objstore.Condition) (objstore.Attrs, error) {
	time.Sleep(b.d)
	return b.Bucket.Put(ctx, key, r, size, c)
}

func (b *slowStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(b.d)
	return b.Bucket.Get(ctx, key)
}

// TestSlowStoreIsNoLapse: every store request takes 1.5 poll intervals (within the
// renewal's timeout): the renewals land well within a lease of each other, so none is a
// lapse, and the replicas coordinate their groups a lease after they start.
func TestSlowStoreIsNoLapse(t *testing.T) {
	const lease = time.Second
	mem := objstore.NewMemory()
	slow := &slowStore{Bucket: mem, d: 3 * Interval(lease) / 2}
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	var drops atomic.Int64
	a := startReplicaWith(t, slow, Options{Self: peers[0], Peers: peers, Lease: lease,
		Held: func() []string { return []string{"g"} }, OnLose: func(string) { drops.Add(1) }})
	c := startReplica(t, slow, peers[1], peers, lease, nil)
	waitClaimable(t, 4*lease, a.f, c.f)
	time.Sleep(2 * lease)
	if n := drops.Load(); n != 0 {
		t.Fatalf("%d lapses seen with a slow store whose renewals all landed in time", n)
	}
}

// TestFlappingDNSStillCoordinates: answers that leave the replica out every other lookup
// (a resolver truncating its answers) do not keep restarting its wait: it coordinates.
func TestFlappingDNSStillCoordinates(t *testing.T) {
	const lease = 600 * time.Millisecond
	res := &flappingResolver{all: []string{"10.1.0.5", "10.1.0.7"}, some: []string{"10.1.0.7"}}
	a := startReplica(t, objstore.NewMemory(), "10.1.0.5:9092", []string{"fetch-headless.tiered.svc:9092"}, lease, res)
	waitClaimable(t, 5*lease, a.f)
}

// flappingResolver answers all, then some, in turn.
type flappingResolver struct {
	all, some []string
	n         atomic.Int64
}

func (r *flappingResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	if r.n.Add(1)%2 == 0 {
		return r.some, nil
	}
	return r.all, nil
}
