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

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// splitBrain returns a group both fleets claim to coordinate ("" if none among n groups).
func splitBrain(a, c *Fleet, n int) string {
	for i := range n {
		g := fmt.Sprintf("g%d", i)
		if a.Owns(g) && c.Owns(g) {
			return g
		}
	}
	return ""
}

// pausedReplica is a replica started (its lease written once, the leases read once) whose
// Run loop never runs: paused.
func pausedReplica(t *testing.T, b objstore.Bucket, self string, peers []string, lease time.Duration) *Fleet {
	t.Helper()
	f, err := New(Options{Bucket: b, Self: self, Peers: peers, Lease: lease, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

// takenOver is a replica a started alone in its view and then paused (pausedReplica:
// its Run loop neither renews nor polls), and its peer c, which saw a's fresh lease and
// then declared a dead (a's lease stopped changing), taking every group.
func takenOver(t *testing.T, lease time.Duration) (a *Fleet, c *replica, peers []string) {
	t.Helper()
	b := objstore.NewMemory()
	peers = []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	a = pausedReplica(t, b, peers[0], peers, lease)
	c = startReplica(t, b, peers[1], peers, lease, nil)
	waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease)
	return a, c, peers
}

// TestReviewPausedReplicaStopsCoordinating: a replica paused for longer than its lease
// (SIGSTOP, a long GC or VM stall) has had its groups taken over by its peers. When it
// resumes, goroutines serving Kafka requests run before (or beside) its Run loop's next
// renewal and poll; they must not find it still coordinating the groups it held, or two
// replicas coordinate one group. The package doc: "A replica whose own renewals fail for a
// Lease stops counting itself" — a paused replica renewed nothing for a lease.
func TestReviewPausedReplicaStopsCoordinating(t *testing.T) {
	const lease = 600 * time.Millisecond
	a, c, peers := takenOver(t, lease)
	time.Sleep(Interval(lease)) // a's own lease is now over a lease old in every reading
	if g := splitBrain(a, c.f, 200); g != "" {
		ma, _ := a.Owner(g)
		t.Fatalf("group %s has two coordinators: the paused replica %s still claims it (its last renewal over %s ago; live view %v), and %s took it over",
			g, ma.Addr, lease, liveAddrs(a), peers[1])
	}
}

// TestReviewReplicaMissingFromDNSDoesNotCoordinate: with a DNS peer name, a replica whose
// address is not (yet, or no longer) among the name's answers is in no peer's view (the
// peers poll only the answers). It must not count itself either: otherwise it coordinates
// the groups rendezvous hashing gives it, while the peers, which do not see it, coordinate
// the same groups. (DNS caches lag pod changes by up to their TTL; fleet.go expects this
// state: "Not yet in DNS ... take the first address and let polls find it".)
func TestReviewReplicaMissingFromDNSDoesNotCoordinate(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	res := &fakeResolver{hosts: map[string][]string{}}
	res.set("fetch-headless.tiered.svc", "10.1.0.7") // 10.1.0.5 not published yet
	peers := []string{"fetch-headless.tiered.svc:9092"}
	a := startReplica(t, b, "10.1.0.5:9092", peers, lease, res)
	c := startReplica(t, b, "10.1.0.7:9092", peers, lease, res)
	waitLive(t, c.f, []string{"10.1.0.7:9092"}, 2*lease)
	time.Sleep(2 * Interval(lease))
	if g := splitBrain(a.f, c.f, 200); g != "" {
		t.Fatalf("group %s has two coordinators: 10.1.0.5 (not among the DNS answers, live view %v) and 10.1.0.7 (live view %v)",
			g, liveAddrs(a.f), liveAddrs(c.f))
	}
}

// blindBucket fails every Get (S3 503 SlowDown, a read-only outage of a prefix, a
// policy without s3:GetObject) while Puts succeed: the replica keeps renewing its own
// lease but cannot read its peers'.
type blindBucket struct {
	objstore.Bucket
	blind atomic.Bool
}

func (b *blindBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if b.blind.Load() {
		return nil, errors.New("503 SlowDown")
	}
	return b.Bucket.Get(ctx, key)
}

// TestReviewUnreadablePeerLeasesDoNotSplitBrain: a replica that cannot read its peers'
// leases (but still renews its own) knows nothing about them. Judging each by "its last
// change" alone would declare them all dead after a lease and coordinate every group,
// while the peers, which see its lease renewed, keep coordinating theirs: every group of
// theirs would have two coordinators for as long as the reads fail.
func TestReviewUnreadablePeerLeasesDoNotSplitBrain(t *testing.T) {
	const lease = 600 * time.Millisecond
	mem := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	blind := &blindBucket{Bucket: mem}
	a := startReplica(t, blind, peers[0], peers, lease, nil)
	c := startReplica(t, mem, peers[1], peers, lease, nil)
	waitLive(t, a.f, peers, 2*lease)
	waitLive(t, c.f, peers, 2*lease)
	blind.blind.Store(true)
	time.Sleep(TakeoverBound(lease) + lease)
	if g := splitBrain(a.f, c.f, 200); g != "" {
		t.Fatalf("group %s has two coordinators while %s cannot read leases: its view %v, %s's view %v",
			g, peers[0], liveAddrs(a.f), peers[1], liveAddrs(c.f))
	}
}

// TestReviewReadFailuresAndStepDown drives observe with chosen monotonic times: one failed
// read of a peer's lease does not make a replica step down, a Lease without a complete read
// does, and a peer whose lease has not been read since it was live is not taken over while
// the replica still counts itself (its renewals may have gone on unseen).
func TestReviewReadFailuresAndStepDown(t *testing.T) {
	const lease = time.Second
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	f, err := New(Options{Bucket: objstore.NewMemory(), Self: peers[0], Peers: peers, Lease: lease, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	peer := peers[1]
	read := func(etag string) map[string]observation {
		return map[string]observation{peer: {present: true, etag: etag}}
	}
	failed := map[string]observation{peer: {unknown: true}}
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	view := func(now time.Time) []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Sorted(slices.Values(f.current(now)))
	}
	step := Interval(lease)
	for _, s := range []struct {
		at   time.Duration
		obs  map[string]observation
		read bool // every read answered
		want []string
	}{
		{0, read("1"), true, peers},
		{step, failed, false, peers},           // one failed read: no step-down
		{2 * step, read("2"), true, peers},     // renewed
		{3 * step, read("2"), true, peers},     // not renewed as seen by this poll
		{4 * step, failed, false, peers},       // reads fail from here on
		{2*step + lease, failed, false, peers}, // the peer's last seen change is a Lease old, but it was live when last read
		{3*step + lease, failed, false, nil},   // a Lease since the last complete read: neither counts
	} {
		now := at(s.at)
		f.mu.Lock()
		f.selfOK = now // the replica's own renewals succeed throughout
		f.mu.Unlock()
		var readAt time.Time
		if s.read {
			readAt = now
		}
		f.observe(now, s.obs, true, readAt)
		if got := view(now); !slices.Equal(got, s.want) {
			t.Fatalf("at +%s: view %v, want %v", s.at, got, s.want)
		}
	}
	// Between polls, too: self is dropped once the last complete read is a Lease old.
	f.observe(at(4*step+lease), read("3"), true, at(4*step+lease))
	if got := view(at(5*step + lease)); !slices.Equal(got, peers) {
		t.Fatalf("a poll after a complete read: view %v, want %v", got, peers)
	}
	f.mu.Lock()
	f.selfOK = at(4*step + 2*lease)
	f.mu.Unlock()
	if got := view(at(4*step + 2*lease)); slices.Contains(got, peers[0]) {
		t.Fatalf("a Lease after the last complete read, its own lease renewed: view %v still counts %s", got, peers[0])
	}
}

// TestReviewInvalidLeaseJudgedByETag: a peer lease object that is not valid JSON (a
// truncated write by some other tool, a wrong version of the format) is judged by whether
// its ETag changes, with a WARN naming the key; reading it counts as a read, so the
// replica goes on counting itself.
func TestReviewInvalidLeaseJudgedByETag(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	ctx := context.Background()
	put := func(n int) {
		data := fmt.Sprintf("{not json %d", n)
		if _, err := b.Put(ctx, LeaseKey(peers[0]), strings.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	var logs fetchkit.LogCapture
	c := startReplicaWith(t, b, Options{Self: peers[1], Peers: peers, Lease: lease,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(Interval(lease))
		defer tk.Stop()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-tk.C:
				put(n)
			}
		}
	}()
	waitLive(t, c.f, peers, lease)
	time.Sleep(2 * lease)
	if got := liveAddrs(c.f); !slices.Equal(got, peers) {
		close(stop)
		<-done
		t.Fatalf("a changing lease that does not parse: view %v, want %v", got, peers)
	}
	close(stop)
	<-done
	waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease)
	if out := logs.String(); !strings.Contains(out, "not valid JSON") || !strings.Contains(out, LeaseKey(peers[0])) {
		t.Fatalf("no WARN naming %s: %q", LeaseKey(peers[0]), out)
	}
}

// TestReviewSkewedClockDoesNotHidePeers: the package promises liveness "measured on the
// reader's monotonic clock (so clocks need not agree)". A replica whose wall clock runs a
// minute ahead of its peer's must not take the peer's fresh lease, at first sight, for one
// left behind long ago: it would start with a view of itself alone and coordinate every
// group, the peer's included, until the peer's next renewal.
func TestReviewSkewedClockDoesNotHidePeers(t *testing.T) {
	const lease = 2 * time.Second // Interval 400ms: far longer than the check below
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	a := startReplica(t, b, peers[0], peers, lease, nil)
	waitLive(t, a.f, peers[:1], lease)
	ahead := func() time.Time { return time.Now().Add(time.Minute) }
	c := startReplicaWith(t, b, Options{Self: peers[1], Peers: peers, Lease: lease, Now: ahead, Logger: discard()})
	// Right after Start (Start reads the peers once "so the first answers already see the
	// fleet"): a renewed its lease within the last Interval.
	if got := liveAddrs(c.f); len(got) != 2 {
		t.Fatalf("a replica whose clock is 1m ahead starts with live view %v: %s, renewing every %s, is hidden", got, peers[0], Interval(lease))
	}
}

// TestReviewResumedReplicaDropsStateOfGroupsTakenOver: while a replica was paused past
// its lease, its peers coordinated all its groups (new generations, new commits). When it
// resumes, renews and polls, it sees the fleet again and rendezvous hands some of those
// groups back to it; OnLose exists so that "a takeover's commits are never hidden by an old
// cache", and must be called for those groups too, not only for the groups that move away
// in the new view, or they keep the state and cached object from before the pause.
func TestReviewResumedReplicaDropsStateOfGroupsTakenOver(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := objstore.NewMemory()
	peers := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	var held []string
	for i := range 50 {
		held = append(held, fmt.Sprintf("g%d", i))
	}
	lost := map[string]bool{}
	var mu sync.Mutex
	a, err := New(Options{Bucket: b, Self: peers[0], Peers: peers, Lease: lease, Logger: discard(),
		Held: func() []string { return held },
		OnLose: func(g string) {
			mu.Lock()
			defer mu.Unlock()
			lost[g] = true
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// a is paused; c takes everything over.
	c := startReplica(t, b, peers[1], peers, lease, nil)
	waitLive(t, c.f, peers[1:], TakeoverBound(lease)+lease)
	for _, g := range held {
		if !c.f.Owns(g) {
			t.Fatalf("%s not taken over by %s", g, peers[1])
		}
	}
	// a resumes: its Run loop's next tick renews and polls.
	if err := a.renew(ctx); err != nil {
		t.Fatal(err)
	}
	a.poll(ctx)
	mu.Lock()
	defer mu.Unlock()
	for _, g := range held {
		if !lost[g] {
			t.Fatalf("%s was coordinated by %s while %s was paused, yet %s kept its state (OnLose not called; OnLose for %d of %d held groups)",
				g, peers[1], peers[0], peers[0], len(lost), len(held))
		}
	}
}
