package groups

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

// secondGeneration is group "g" with its second generation gen just
// formed (both JoinGroups answered, no SyncGroup sent): a leads, b follows.
func secondGeneration(t *testing.T) (h *harness, a, b string, gen int32) {
	t.Helper()
	h = newHarness(t, nil, nil)
	const g = "g"
	a, ja := h.newMember(g)
	recv(t, ja)
	h.sync(g, a, 1, map[string]string{a: "A"})
	b, jb := h.newMember(g)
	ra := recv(t, h.joinAsync(joinReq(g, a, nil)))
	rb := recv(t, jb)
	gen = ra.Generation
	if rb.Generation != gen || ra.LeaderID != a {
		t.Fatalf("generation: a %+v b %+v", ra, rb)
	}
	return h, a, b, gen
}

// followerWaitingOnSync is group "g" in its second generation gen: a is
// its leader, b a follower whose SyncGroup (sb) waits for a's assignment.
func followerWaitingOnSync(t *testing.T) (h *harness, a, b string, gen int32, sb <-chan *kmsg.SyncGroupResponse) {
	t.Helper()
	h, a, b, gen = secondGeneration(t)
	sb = h.syncAsync("g", b, gen, nil)
	blocked(t, sb, "b's sync before the leader's")
	return h, a, b, gen, sb
}

// TestReviewFollowerSessionRestartsAtAssignment: a follower that sent its
// SyncGroup and waited for the leader's longer than its session timeout
// (within the rebalance timeout) keeps its membership once the assignment
// reaches it: its session restarts when the assignment is propagated, as
// Kafka's propagateAssignment reschedules every member's heartbeat. Without
// that, the next Tick expires it on the spot and the group rebalances again.
func TestReviewFollowerSessionRestartsAtAssignment(t *testing.T) {
	h, a, b, gen, sb := followerWaitingOnSync(t)
	const g = "g"
	// The leader takes longer than b's session (10 s) but less than the
	// rebalance timeout (20 s) to send its assignment; it heartbeats.
	h.clk.Add(session / 2)
	wantCode(t, "a heartbeat", h.heartbeat(g, a, gen, nil), 0)
	h.clk.Add(session/2 + session/4)
	wantCode(t, "a sync", h.sync(g, a, gen, map[string]string{a: "A2", b: "B2"}).ErrorCode, 0)
	if got := recv(t, sb); got.ErrorCode != 0 || string(got.MemberAssignment) != "B2" {
		t.Fatalf("b's assignment %+v", got)
	}
	h.c.Tick()
	wantCode(t, "b heartbeat right after its assignment", h.heartbeat(g, b, gen, nil), 0)
}

// TestReviewFollowerSessionRestartsAtSyncError: a follower waiting on its
// SyncGroup whose rebalance starts over (the leader left) is answered
// REBALANCE_IN_PROGRESS and keeps its membership to rejoin with: its session
// restarts with that answer (Kafka's resetAndPropagateAssignmentError
// reschedules its heartbeat). Without that, a Tick before its JoinGroup
// arrives expires it for the time it spent waiting.
func TestReviewFollowerSessionRestartsAtSyncError(t *testing.T) {
	h, a, b, gen, sb := followerWaitingOnSync(t)
	const g = "g"
	h.clk.Add(session/2 + session/4)
	wantCode(t, "a heartbeat", h.heartbeat(g, a, gen, nil), 0)
	h.clk.Add(session / 2)
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version = 5
	lq.Group = g
	lq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}}
	wantCode(t, "a leaves", h.c.Leave(lq).Members[0].ErrorCode, 0)
	wantCode(t, "b's sync", recv(t, sb).ErrorCode, kerr.RebalanceInProgress.Code)
	h.c.Tick()
	rb := recv(t, h.joinAsync(joinReq(g, b, nil)))
	wantCode(t, "b rejoins", rb.ErrorCode, 0)
	if rb.LeaderID != b {
		t.Fatalf("b's rejoin: %+v", rb)
	}
}

// pausingGets holds a Get, once armed, after it has read the object and
// before it returns, until released: a read overtaken by a write.
type pausingGets struct {
	objstore.Bucket
	armed    atomic.Bool
	read     chan struct{}
	released chan struct{}
}

func (b *pausingGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.Bucket.Get(ctx, key)
	if b.armed.CompareAndSwap(true, false) {
		close(b.read)
		<-b.released
	}
	return rc, err
}

// TestReviewReloadOvertakenByCommitKeepsCommit: a re-read of a group's
// object (the fetch service's /v1/groups describe of an active group, an
// OffsetDelete, an OffsetFetch as the first member joins) that a commit's
// PUT overtakes does not put the older version back in the store's cache:
// OffsetFetch answers an active group from that cache, so a consumer given
// the partition at the next rebalance would start from the older offset
// and read again what was committed.
func TestReviewReloadOvertakenByCommitKeepsCommit(t *testing.T) {
	b := &pausingGets{Bucket: objstore.NewMemory(), read: make(chan struct{}), released: make(chan struct{})}
	h := newHarness(t, b, nil)
	const g = "g"
	a, ja := h.newMember(g)
	ra := recv(t, ja)
	wantCode(t, "a sync", h.sync(g, a, ra.Generation, map[string]string{a: "A"}).ErrorCode, 0)
	wantCode(t, "commit 5", h.commit(g, a, ra.Generation, nil, 5), 0)

	b.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := h.store.Reload(context.Background(), g)
		done <- err
	}()
	recv(t, b.read) // the re-read has the object with offset 5
	wantCode(t, "commit 9", h.commit(g, a, ra.Generation, nil, 9), 0)
	close(b.released)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	o, code := h.c.Committed(context.Background(), g)
	wantCode(t, "offset fetch", code, 0)
	if off, ok := o.Lookup("t", 0); !ok || off.Offset != 9 {
		t.Fatalf("committed %+v, want offset 9 (the last commit)", o.Offsets)
	}
}

// TestReviewSimpleCommitWithInstanceID: a commit with generation -1 to a
// group with no members is accepted whatever member or instance id it
// carries, as Kafka's validateOffsetCommit accepts it first thing:
// librdkafka sends its configured group.instance.id with every commit, so
// a consumer with a group.instance.id that uses assign() commits with
// generation -1, no member id and its instance id.
func TestReviewSimpleCommitWithInstanceID(t *testing.T) {
	h := newHarness(t, nil, nil)
	inst := "pod-0"
	wantCode(t, "generation -1 commit with an instance id", h.commit("g", "", -1, &inst, 5), 0)
	wantCode(t, "generation -1 commit with a member id", h.commit("g", "m", -1, nil, 6), 0)
}

// pausingPuts holds a Put, once armed, after the object is written and
// before the writer hears so, until released.
type pausingPuts struct {
	objstore.Bucket
	armed    atomic.Bool
	written  chan struct{}
	released chan struct{}
}

func (b *pausingPuts) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	attrs, err := b.Bucket.Put(ctx, key, r, size, cond)
	if b.armed.CompareAndSwap(true, false) {
		close(b.written)
		<-b.released
	}
	return attrs, err
}

// TestReviewReleaseDuringCommitForgetsIt: a commit whose PUT is under way
// when the group is released (the fleet moved it to another replica) does
// not leave its version in the store's cache: when the group comes back
// after the other replica's commits, the coordinator answers OffsetFetch of
// the active group from that cache, so the members would restart from the
// older offset and read again what they had committed elsewhere.
func TestReviewReleaseDuringCommitForgetsIt(t *testing.T) {
	ctx := context.Background()
	b := &pausingPuts{Bucket: objstore.NewMemory(), written: make(chan struct{}), released: make(chan struct{})}
	h := newHarness(t, b, nil)
	const g = "g"
	a, gen := h.soleMemberCommitted5(g)

	b.armed.Store(true)
	done := h.commitAsync(g, a, gen, 9)
	recv(t, b.written)
	h.c.Release(g)
	close(b.released)
	wantCode(t, "commit 9 under way at the release", recv(t, done), 0)

	// The other replica coordinates the group and its members commit.
	if _, err := NewStore(b.Bucket, StoreOptions{}).Update(ctx, g, commitOne("t", 0, 20)); err != nil {
		t.Fatal(err)
	}
	// The group comes back here.
	x, jx := h.newMember(g)
	rx := recv(t, jx)
	h.sync(g, x, rx.Generation, map[string]string{x: "X"})
	o, code := h.c.Committed(ctx, g)
	wantCode(t, "offset fetch", code, 0)
	if off, _ := o.Lookup("t", 0); off.Offset != 20 {
		t.Fatalf("offset %d after the group came back, want the other replica's 20", off.Offset)
	}
}

// atomicRing names this replica the coordinator while self is true.
type atomicRing struct{ self *atomic.Bool }

func (r atomicRing) Coordinator(string) (Node, bool, error) {
	return Node{ID: 7, Host: "10.0.0.7", Port: 9092}, r.self.Load(), nil
}

// TestReviewGroupMovedDuringLoadNotKept: a JoinGroup whose group moves to
// another replica while its object is read (the fleet changes the Ring,
// then Releases the group, which is not in memory yet) does not leave the
// group's membership here: the replica would hold members of a group it no
// longer coordinates, and write the group's Empty state over the new
// coordinator's when they expire.
func TestReviewGroupMovedDuringLoadNotKept(t *testing.T) {
	for _, releaseFirst := range []bool{false, true} {
		b := &pausingGets{Bucket: objstore.NewMemory(), read: make(chan struct{}), released: make(chan struct{})}
		var self atomic.Bool
		self.Store(true)
		h := newHarness(t, b, func(o *Options) { o.Ring = atomicRing{&self} })
		const g = "g"
		b.armed.Store(true)
		done := make(chan *kmsg.JoinGroupResponse, 1)
		go func() { done <- h.c.Join(context.Background(), Client{ID: "cl"}, joinReq(g, "", nil)) }()
		recv(t, b.read)
		self.Store(false)
		if releaseFirst {
			h.c.Release(g)
			close(b.released)
		} else {
			close(b.released)
			// The Release comes after the load, as a fleet's may.
			defer h.c.Release(g)
		}
		r := recv(t, done)
		if r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("release first %v: join code %d, want COORDINATOR_NOT_AVAILABLE (the group moved)", releaseFirst, r.ErrorCode)
		}
		h.c.mu.Lock()
		_, held := h.c.groups[g]
		h.c.mu.Unlock()
		if held {
			t.Fatalf("release first %v: the moved group's membership is held here", releaseFirst)
		}
	}
}
