package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tiered/tiered/remotetier/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRendezvous(t *testing.T) {
	members := []string{"10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092"}
	const groups = 3000
	owner := map[string]string{}
	count := map[string]int{}
	for i := range groups {
		g := fmt.Sprintf("group-%d", i)
		a, ok := Rendezvous(members, g)
		if !ok {
			t.Fatal("no owner among three members")
		}
		// Order of the members does not matter.
		if b, _ := Rendezvous([]string{members[2], members[0], members[1]}, g); b != a {
			t.Fatalf("%s: owner %s depends on member order (%s)", g, a, b)
		}
		owner[g] = a
		count[a]++
	}
	for _, m := range members {
		if count[m] < groups/5 {
			t.Errorf("%s owns %d of %d groups; rendezvous should spread them (counts %v)", m, count[m], groups, count)
		}
	}
	// Removing a member moves exactly its groups.
	rest := []string{members[0], members[2]}
	for g, a := range owner {
		b, _ := Rendezvous(rest, g)
		if a != members[1] && b != a {
			t.Fatalf("%s moved from %s to %s though %s is still live", g, a, b, a)
		}
		if a == members[1] && b == a {
			t.Fatalf("%s stayed on the removed member", g)
		}
	}
	if _, ok := Rendezvous(nil, "g"); ok {
		t.Fatal("an owner among no members")
	}
}

func TestNodeIDStableAndPositive(t *testing.T) {
	a, b := NodeID("127.0.0.1:9092"), NodeID("127.0.0.1:9093")
	if a < 0 || b < 0 || a == b {
		t.Fatalf("node ids %d, %d: want distinct non-negative ids", a, b)
	}
	if NodeID("127.0.0.1:9092") != a {
		t.Fatal("node id not stable")
	}
}

func TestNewRejects(t *testing.T) {
	b := objstore.NewMemory()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"not a member", Options{Bucket: b, Self: "127.0.0.1:1", Peers: []string{"127.0.0.1:2", "127.0.0.1:3"}}, "not among fetch.peers"},
		{"bad peer", Options{Bucket: b, Self: "127.0.0.1:1", Peers: []string{"127.0.0.1:1", "nope"}}, `peer "nope"`},
		{"bad self", Options{Bucket: b, Self: "nope"}, "advertised address"},
		{"short lease", Options{Bucket: b, Self: "127.0.0.1:1", Lease: time.Millisecond}, "shorter than"},
		{"no bucket", Options{Self: "127.0.0.1:1", Peers: []string{"127.0.0.1:1", "127.0.0.1:2"}}, "need a bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAloneCoordinatesEverything(t *testing.T) {
	f, err := New(Options{Self: "127.0.0.1:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"a", "b", "billing"} {
		if m, ok := f.Owner(g); !ok || !m.Self || m.Addr != "127.0.0.1:9092" {
			t.Fatalf("alone: coordinator of %s = %+v, %v", g, m, ok)
		}
	}
}

// killable is a bucket whose operations all fail once killed: a replica killed with -9
// stops renewing and leaves its lease behind.
type killable struct {
	objstore.Bucket
	dead atomic.Bool
}

var errKilled = errors.New("replica killed")

func (k *killable) Put(ctx context.Context, key string, r io.Reader, size int64, c objstore.Condition) (objstore.Attrs, error) {
	if k.dead.Load() {
		return objstore.Attrs{}, errKilled
	}
	return k.Bucket.Put(ctx, key, r, size, c)
}

func (k *killable) Delete(ctx context.Context, key string) error {
	if k.dead.Load() {
		return errKilled
	}
	return k.Bucket.Delete(ctx, key)
}

func (k *killable) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.Bucket.Get(ctx, key)
}

// replica is one running fleet member of a test.
type replica struct {
	f      *Fleet
	bucket *killable
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, b objstore.Bucket, self string, peers []string, lease time.Duration, res Resolver) *replica {
	t.Helper()
	return startReplicaWith(t, b, Options{Self: self, Peers: peers, Lease: lease, Resolver: res})
}

func startReplicaWith(t *testing.T, b objstore.Bucket, o Options) *replica {
	t.Helper()
	r := &replica{bucket: &killable{Bucket: b}, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	o.Bucket, o.Registerer = r.bucket, r.reg
	var err error
	r.f, err = New(o)
	if err == nil {
		r.f.SetHTTPURL("http://" + o.Self + "/api")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := r.f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.f.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop is SIGTERM: Run returns after releasing the lease.
func (r *replica) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	return <-r.done
}

func liveAddrs(f *Fleet) []string {
	ms, _ := f.Live()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Addr
	}
	return out
}

// waitLive waits until f sees exactly want, and returns how long that took.
// waitClaimable waits until each fleet may coordinate the groups it wins (a lease after
// its own lease became visible), at most limit.
func waitClaimable(t *testing.T, limit time.Duration, fs ...*Fleet) {
	t.Helper()
	start := time.Now()
	for _, f := range fs {
		for {
			f.mu.Lock()
			ok := f.claimable(time.Now())
			f.mu.Unlock()
			if ok {
				break
			}
			if time.Since(start) > limit {
				t.Fatalf("%s cannot coordinate its groups %s after its start", f.self, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func waitLive(t *testing.T, f *Fleet, want []string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := liveAddrs(f)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s sees %v after %s, want %v", f.self, got, limit, want)
		}
		select {
		case <-f.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestTwoReplicasAgreeAndTakeOver(t *testing.T) {
	const lease = 600 * time.Millisecond
	for _, tc := range []struct {
		name  string
		kill  bool // kill -9 (lease left behind) instead of SIGTERM (released)
		bound time.Duration
	}{
		{"kill -9", true, TakeoverBound(lease)},
		{"SIGTERM", false, 3 * Interval(lease)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := objstore.NewMemory()
			peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
			a := startReplica(t, b, peers[0], peers, lease, nil)
			c := startReplica(t, b, peers[1], peers, lease, nil)
			waitLive(t, a.f, peers, 2*lease)
			waitLive(t, c.f, peers, 2*lease)
			waitClaimable(t, 2*lease, a.f, c.f)
			if got := c.f.HTTPURL(peers[0]); got != "http://"+peers[0]+"/api" {
				t.Fatalf("HTTP URL of %s in its lease: %q", peers[0], got)
			}
			var onA []string
			for i := range 200 {
				g := fmt.Sprintf("g%d", i)
				ma, ok1 := a.f.Owner(g)
				mc, ok2 := c.f.Owner(g)
				if !ok1 || !ok2 || ma.Addr != mc.Addr || ma.NodeID != mc.NodeID || ma.Self == mc.Self {
					t.Fatalf("%s: replicas disagree: %+v on one, %+v on the other", g, ma, mc)
				}
				if ma.Self {
					onA = append(onA, g)
				}
			}
			if len(onA) == 0 || len(onA) == 200 {
				t.Fatalf("%d of 200 groups on one replica: want both to coordinate some", len(onA))
			}
			killedAt := time.Now()
			if tc.kill {
				a.bucket.dead.Store(true)
			} else if err := a.stop(); err != nil {
				t.Fatalf("release: %v", err)
			}
			waitLive(t, c.f, peers[1:], tc.bound+lease)
			// The bound, plus the poll's own GETs (slow under -race on a busy machine).
			took := time.Since(killedAt)
			if took > tc.bound+Interval(lease) {
				t.Fatalf("takeover took %s, beyond the bound %s", took, tc.bound)
			}
			t.Logf("takeover after %s (bound %s)", took, tc.bound)
			for _, g := range onA {
				if !c.f.Owns(g) {
					t.Fatalf("%s not taken over", g)
				}
			}
			if !tc.kill {
				if _, err := b.Attributes(context.Background(), LeaseKey(peers[0])); !errors.Is(err, objstore.ErrNotFound) {
					t.Fatalf("lease after SIGTERM: %v, want it deleted", err)
				}
				if ms, _ := a.f.Live(); len(ms) != 0 {
					t.Fatalf("a released replica still sees %v", ms)
				}
			}
			if got := testutil.ToFloat64(c.f.metrics.live); got != 1 {
				t.Fatalf("tiered_fetch_fleet_live_replicas = %v, want 1", got)
			}
		})
	}
}

// TestOnLoseOnlyMovedGroups: when a replica joins, the one already running is told exactly
// which of the groups it holds state for (Held) moved away (it drops their state, so that a
// group coming back is read from the bucket again), and of no group a client only asked
// about; Coordinator names the owner as FindCoordinator must.
func TestOnLoseOnlyMovedGroups(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	var mu sync.Mutex
	var lost, held []string
	a := startReplicaWith(t, b, Options{Self: peers[0], Peers: peers, Lease: lease, OnLose: func(g string) {
		mu.Lock()
		defer mu.Unlock()
		lost = append(lost, g)
	}, Held: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(held)
	}})
	waitLive(t, a.f, peers[:1], 2*lease)
	waitClaimable(t, 2*lease, a.f)
	var all []string
	for i := range 100 {
		g := fmt.Sprintf("g%d", i)
		node, self, err := a.f.Coordinator(g)
		if err != nil || !self || node.ID != NodeID(peers[0]) || node.Host != "127.0.0.1" || node.Port != 9001 {
			t.Fatalf("alone in its view: Coordinator(%s) = %v, %v, %v", g, node, self, err)
		}
		all = append(all, g)
	}
	// The coordinator holds state for these (a client asked about the
	// others only).
	mu.Lock()
	held = all[:60]
	mu.Unlock()
	c := startReplica(t, b, peers[1], peers, lease, nil)
	waitLive(t, a.f, peers, 2*lease)
	waitLive(t, c.f, peers, 2*lease)
	var want []string
	for i, g := range all {
		if owner, _ := Rendezvous(peers, g); owner == peers[1] && i < 60 {
			want = append(want, g)
		}
		node, self, err := a.f.Coordinator(g)
		if owner, _ := Rendezvous(peers, g); err != nil || self != (owner == peers[0]) || node.ID != NodeID(owner) {
			t.Fatalf("Coordinator(%s) = %v, %v, %v; the owner is %s", g, node, self, err, owner)
		}
	}
	slices.Sort(want)
	var got []string
	for deadline := time.Now().Add(lease); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got = slices.Sorted(slices.Values(lost))
		mu.Unlock()
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("OnLose for %v, want exactly the groups now on %s: %v", got, peers[1], want)
	}
	if v := testutil.ToFloat64(a.f.metrics.moves); v != float64(len(want)) {
		t.Fatalf("tiered_fetch_fleet_group_moves_total = %v, want %d", v, len(want))
	}
}

func TestOwnRenewalFailureStepsDown(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	a := startReplica(t, b, peers[0], peers, lease, nil)
	c := startReplica(t, b, peers[1], peers, lease, nil)
	waitLive(t, a.f, peers, 2*lease)
	// a's writes fail (its bucket access is gone) but it keeps running: after a lease it
	// no longer counts itself, so it agrees with c that c coordinates everything.
	a.bucket.dead.Store(true)
	waitLive(t, a.f, nil, TakeoverBound(lease)+lease) // a cannot read c's lease either
	waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease)
	if _, self, err := a.f.Coordinator("g"); !errors.Is(err, ErrNoCoordinator) || self {
		t.Fatal("a replica with no fresh lease names a coordinator")
	}
	if got := testutil.ToFloat64(a.f.metrics.renewals.WithLabelValues("error")); got == 0 {
		t.Fatal("failed renewals not counted")
	}
	a.bucket.dead.Store(false)
	waitLive(t, a.f, peers, 2*lease)
	waitLive(t, c.f, peers, 2*lease)
}

// TestLeftBehindLeaseExpiresALeaseAfterFirstSight: a lease left by a replica killed an
// hour ago, still listed in a static fetch.peers, counts as changed when first seen (the
// time it names is not compared with the reader's clock, which need not agree): its groups
// stay without a coordinator for a Lease after a replica starts, then it is dead.
func TestLeftBehindLeaseExpiresALeaseAfterFirstSight(t *testing.T) {
	const lease = time.Second
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	// A lease left by a replica killed an hour ago.
	old := &Fleet{o: Options{Bucket: b, Lease: lease, Now: func() time.Time { return time.Now().Add(-time.Hour) }, Logger: discard()},
		self: peers[0], seen: map[string]*peerState{}, changed: make(chan struct{}), metrics: newMetrics(nil)}
	if err := old.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := startReplica(t, b, peers[1], peers, lease, nil)
	if got := liveAddrs(c.f); !slices.Equal(got, peers) {
		t.Fatalf("right after start with an hour-old lease of %s: live %v, want %v (first sight counts as a change)", peers[0], got, peers)
	}
	took := waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease)
	if took < lease-Interval(lease) {
		t.Fatalf("the left-behind lease expired %s after start, want a Lease (%s) after first sight", took, lease)
	}
	// The same replica coming back renews: it is live at once.
	old.o.Now = time.Now
	if err := old.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLive(t, c.f, peers, 3*Interval(lease))
}

type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]string
}

func (r *fakeResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = ips
}

func (r *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ips, ok := r.hosts[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	return ips, nil
}

func TestDNSPeers(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	res := &fakeResolver{hosts: map[string][]string{}}
	res.set("fetch-headless.tiered.svc", "10.1.0.7", "10.1.0.5")
	res.set("fetch-0.fetch-headless.tiered.svc", "10.1.0.5")
	peers := []string{"fetch-headless.tiered.svc:9092"}
	// One advertises its pod name, the other its IP: both find themselves in the answers.
	a := startReplica(t, b, "fetch-0.fetch-headless.tiered.svc:9092", peers, lease, res)
	c := startReplica(t, b, "10.1.0.7:9092", peers, lease, res)
	want := []string{"10.1.0.5:9092", "10.1.0.7:9092"}
	waitLive(t, a.f, want, 2*lease)
	waitLive(t, c.f, want, 2*lease)
	waitClaimable(t, 2*lease, a.f, c.f)
	if a.f.Self().Addr != "10.1.0.5:9092" {
		t.Fatalf("self in DNS mode = %s, want the IP the peers' name gives", a.f.Self().Addr)
	}
	m, _ := a.f.Owner("billing")
	if m.Host() != "10.1.0.5" && m.Host() != "10.1.0.7" || m.Port() != 9092 {
		t.Fatalf("coordinator %+v is not one of the answers", m)
	}
	// A scale-down removes an address from the DNS answers: it leaves the view even while
	// its lease is fresh.
	res.set("fetch-headless.tiered.svc", "10.1.0.7")
	waitLive(t, c.f, want[1:], 3*Interval(lease))
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
