package groups

import (
	"context"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

// clock is a settable time for the coordinator's deadlines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t     *testing.T
	clk   *clock
	b     objstore.Bucket
	c     *Coordinator
	store *Store
	start time.Time
}

func newHarness(t *testing.T, b objstore.Bucket, mod func(*Options)) *harness {
	t.Helper()
	clk := &clock{t: time.Now().Truncate(time.Millisecond)}
	start := clk.t
	if b == nil {
		b = objstore.NewMemory()
	}
	store := NewStore(b, StoreOptions{Now: clk.Now})
	o := Options{Store: store, Now: clk.Now, InitialRebalanceDelay: -1, Logger: testLogger(t)}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Wait)
	return &harness{t: t, clk: clk, b: b, c: c, store: store, start: start}
}

const (
	session   = 10 * time.Second
	rebalance = 20 * time.Second
)

func joinReq(group, member string, instance *string, protocols ...string) *kmsg.JoinGroupRequest {
	q := kmsg.NewPtrJoinGroupRequest()
	q.Version = 9
	q.Group, q.MemberID, q.InstanceID = group, member, instance
	q.SessionTimeoutMillis, q.RebalanceTimeoutMillis = int32(session/time.Millisecond), int32(rebalance/time.Millisecond)
	q.ProtocolType = ProtocolTypeConsumer
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		q.Protocols = append(q.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte("meta-" + p)})
	}
	return q
}

// joinAsync sends a JoinGroup from its own goroutine.
func (h *harness) joinAsync(q *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- h.c.Join(context.Background(), Client{ID: "cl", Host: "127.0.0.1"}, q) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no response")
		panic("unreachable")
	}
}

// blocked checks that nothing has arrived on ch yet.
func blocked[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s answered early: %+v", what, v)
	case <-time.After(30 * time.Millisecond):
	}
}

// newMember does the KIP-394 dance: MEMBER_ID_REQUIRED, then the join
// with the id; it returns the channel of the second join.
func (h *harness) newMember(group string) (string, <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	r := h.c.Join(context.Background(), Client{ID: "cl"}, joinReq(group, "", nil))
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		h.t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	ch := h.joinAsync(joinReq(group, r.MemberID, nil))
	h.waitJoined(group, r.MemberID)
	return r.MemberID, ch
}

// waitJoined waits until member's JoinGroup has reached the coordinator
// (it is a member; its join may have completed already).
func (h *harness) waitJoined(group, member string) {
	h.t.Helper()
	for range 500 {
		h.c.mu.Lock()
		g := h.c.groups[group]
		_, ok := g.members[member]
		h.c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.t.Fatalf("member %s never joined", member)
}

// waitMembers waits until group has n members (their JoinGroups reached
// the coordinator).
func (h *harness) waitMembers(group string, n int) {
	h.t.Helper()
	for range 500 {
		h.c.mu.Lock()
		got := 0
		if g := h.c.groups[group]; g != nil {
			got = len(g.members)
		}
		h.c.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.t.Fatalf("group %s never had %d members", group, n)
}

func (h *harness) sync(group, member string, gen int32, assign map[string]string) *kmsg.SyncGroupResponse {
	q := kmsg.NewPtrSyncGroupRequest()
	q.Version = 5
	q.Group, q.MemberID, q.Generation = group, member, gen
	for m, a := range assign {
		q.GroupAssignment = append(q.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	return h.c.Sync(context.Background(), q)
}

func (h *harness) syncAsync(group, member string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.sync(group, member, gen, assign) }()
	return ch
}

func (h *harness) heartbeat(group, member string, gen int32, instance *string) int16 {
	q := kmsg.NewPtrHeartbeatRequest()
	q.Version = 4
	q.Group, q.MemberID, q.Generation, q.InstanceID = group, member, gen, instance
	return h.c.Heartbeat(q).ErrorCode
}

func (h *harness) commit(group, member string, gen int32, instance *string, offset int64) int16 {
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version = 9
	q.Group, q.MemberID, q.Generation, q.InstanceID = group, member, gen, instance
	md := "md"
	q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: 4, Metadata: &md}}}}
	return h.c.Commit(context.Background(), q, nil).Topics[0].Partitions[0].ErrorCode
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %s, want %s", what, codeName(got), codeName(want))
	}
}

// TestRebalanceAndFencing walks a group through its generations: two
// members form generation 1, a third joins (rebalance: the others are told
// by heartbeat and rejoin), one leaves; commits of a fenced generation or
// an unknown member are refused, current ones are durable.
func TestRebalanceAndFencing(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "billing"
	a, ja := h.newMember(g)
	// Alone, a's join completes at once (no initial delay here).
	ra := recv(t, ja)
	wantCode(t, "a join", ra.ErrorCode, 0)
	if ra.Generation != 1 || ra.LeaderID != a || len(ra.Members) != 1 || *ra.Protocol != "range" {
		t.Fatalf("generation 1: %+v", ra)
	}
	wantCode(t, "a sync", h.sync(g, a, 1, map[string]string{a: "A1"}).ErrorCode, 0)
	wantCode(t, "commit gen 1", h.commit(g, a, 1, nil, 5), 0)

	b, jb := h.newMember(g)
	blocked(t, jb, "b's join while a has not rejoined")
	wantCode(t, "a heartbeat during rebalance", h.heartbeat(g, a, 1, nil), kerr.RebalanceInProgress.Code)
	// Generation 1 still commits while PreparingRebalance (Kafka allows it:
	// a cooperative member keeps committing what it still owns).
	wantCode(t, "commit gen 1 while preparing", h.commit(g, a, 1, nil, 6), 0)
	ja = h.joinAsync(joinReq(g, a, nil))
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("generation 2: a %+v b %+v", ra, rb)
	}
	wantCode(t, "commit gen 2 before sync", h.commit(g, a, 2, nil, 7), kerr.RebalanceInProgress.Code)
	sb := h.syncAsync(g, b, 2, nil)
	blocked(t, sb, "b's sync before the leader's")
	wantCode(t, "a sync", h.sync(g, a, 2, map[string]string{a: "A2", b: "B2"}).ErrorCode, 0)
	if got := recv(t, sb); got.ErrorCode != 0 || string(got.MemberAssignment) != "B2" {
		t.Fatalf("b's assignment %+v", got)
	}
	wantCode(t, "commit fenced generation 1", h.commit(g, a, 1, nil, 8), kerr.IllegalGeneration.Code)
	wantCode(t, "commit unknown member", h.commit(g, "nobody", 2, nil, 8), kerr.UnknownMemberID.Code)
	wantCode(t, "commit without membership while the group has members", h.commit(g, "", -1, nil, 8), kerr.UnknownMemberID.Code)
	wantCode(t, "heartbeat old generation", h.heartbeat(g, b, 1, nil), kerr.IllegalGeneration.Code)
	wantCode(t, "commit gen 2", h.commit(g, b, 2, nil, 9), 0)

	// a leaves: b is told to rejoin and forms generation 3 alone, as leader.
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version = 5
	lq.Group = g
	lq.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: "ghost"}}
	lr := h.c.Leave(lq)
	wantCode(t, "leave a", lr.Members[0].ErrorCode, 0)
	wantCode(t, "leave ghost", lr.Members[1].ErrorCode, kerr.UnknownMemberID.Code)
	wantCode(t, "b heartbeat after a left", h.heartbeat(g, b, 2, nil), kerr.RebalanceInProgress.Code)
	rb = recv(t, h.joinAsync(joinReq(g, b, nil)))
	if rb.Generation != 3 || rb.LeaderID != b {
		t.Fatalf("generation 3: %+v", rb)
	}
	wantCode(t, "a's commit after leaving", h.commit(g, a, 2, nil, 10), kerr.UnknownMemberID.Code)

	// Durable: a fresh store over the bucket has b's commit.
	o, err := NewStore(h.b, StoreOptions{}).Load(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := o.Lookup("t", 0); !ok || off.Offset != 9 || off.LeaderEpoch != 4 || off.Metadata != "md" || o.Generation != 2 {
		t.Fatalf("bucket holds %+v (generation %d), want offset 9 epoch 4 md, generation 2", o.Offsets, o.Generation)
	}
}

// TestTimeouts: a member whose session expires is removed; a member that
// does not rejoin within the rebalance timeout is dropped from the
// generation; one that sends no SyncGroup in time is removed and the
// rebalance starts over.
func TestTimeouts(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	a, ja := h.newMember(g)
	recv(t, ja)
	h.sync(g, a, 1, map[string]string{a: "x"})
	b, jb := h.newMember(g)
	// a keeps heartbeating (told to rejoin) but never rejoins: after the
	// rebalance timeout b forms generation 2 alone.
	for range 2 {
		h.clk.Add(rebalance / 2)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, 1, nil), kerr.RebalanceInProgress.Code)
		h.c.Tick()
		if h.clk.Now().Sub(h.start) < rebalance {
			blocked(t, jb, "b's join before the rebalance timeout")
		}
	}
	rb := recv(t, jb)
	if rb.Generation != 2 || rb.LeaderID != b || len(rb.Members) != 1 {
		t.Fatalf("after the rebalance timeout: %+v", rb)
	}
	wantCode(t, "a after being dropped", h.heartbeat(g, a, 1, nil), kerr.UnknownMemberID.Code)
	// b never syncs: after the rebalance timeout it is removed.
	h.clk.Add(rebalance)
	h.c.Tick()
	wantCode(t, "b after missing SyncGroup", h.heartbeat(g, b, 2, nil), kerr.UnknownMemberID.Code)

	// Session expiry of a Stable member.
	c, jc := h.newMember(g)
	rc := recv(t, jc)
	h.sync(g, c, rc.Generation, map[string]string{c: "x"})
	h.clk.Add(session / 2)
	wantCode(t, "heartbeat in time", h.heartbeat(g, c, rc.Generation, nil), 0)
	h.clk.Add(session / 2)
	h.c.Tick()
	wantCode(t, "heartbeat still in time", h.heartbeat(g, c, rc.Generation, nil), 0)
	h.clk.Add(session + time.Millisecond)
	h.c.Tick()
	wantCode(t, "heartbeat after the session expired", h.heartbeat(g, c, rc.Generation, nil), kerr.UnknownMemberID.Code)
	if st := h.c.Describe(context.Background(), g).State; st != StateEmpty {
		t.Fatalf("state %s after the last member expired, want Empty", st)
	}
}

// TestInitialRebalanceDelay: the first rebalance of an empty group waits
// the initial delay, extended while members keep coming, so members that
// start together form a single generation.
func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.InitialRebalanceDelay = 3 * time.Second })
	const g = "g"
	_, ja := h.newMember(g)
	h.clk.Add(2 * time.Second)
	h.c.Tick()
	blocked(t, ja, "join inside the initial delay")
	_, jb := h.newMember(g)
	h.clk.Add(time.Second) // the first delay ends; b came in it: extend
	h.c.Tick()
	blocked(t, ja, "join inside the extended delay")
	h.clk.Add(3 * time.Second)
	h.c.Tick()
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("generations %d and %d, want both 1", ra.Generation, rb.Generation)
	}
}

// TestStaticMembership: a static member restarted within its session
// timeout (new connection, no member id) gets its assignment back with no
// rebalance; the old member id is fenced.
func TestStaticMembership(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.InitialRebalanceDelay = time.Second })
	const g = "g"
	ia, ib := "inst-a", "inst-b"
	// Static members get an id at once: no MEMBER_ID_REQUIRED.
	ja := h.joinAsync(joinReq(g, "", &ia))
	jb := h.joinAsync(joinReq(g, "", &ib))
	h.waitMembers(g, 2)
	for range 2 { // b came within the delay: it is extended once
		h.clk.Add(time.Second)
		h.c.Tick()
	}
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 {
		t.Fatalf("static joins: %s %s", codeName(ra.ErrorCode), codeName(rb.ErrorCode))
	}
	gen := ra.Generation
	if rb.Generation != gen {
		t.Fatalf("generations %d and %d", ra.Generation, rb.Generation)
	}
	leader, follower, finst := ra, rb, &ib
	if rb.LeaderID == rb.MemberID {
		leader, follower, finst = rb, ra, &ia
	}
	sf := h.syncAsync(g, follower.MemberID, gen, nil)
	h.sync(g, leader.MemberID, gen, map[string]string{leader.MemberID: "L", follower.MemberID: "F"})
	recv(t, sf)
	rebalancesBefore := testutilCount(h.c.m.rebalances)

	// The follower restarts: same instance id, no member id.
	h.clk.Add(session / 2)
	r := h.c.Join(context.Background(), Client{ID: "cl"}, joinReq(g, "", finst))
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == follower.MemberID {
		t.Fatalf("restart join: %s gen %d member %q (old %q)", codeName(r.ErrorCode), r.Generation, r.MemberID, follower.MemberID)
	}
	s := h.sync(g, r.MemberID, gen, nil)
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "F" {
		t.Fatalf("restart sync: %s %q, want its assignment F back", codeName(s.ErrorCode), s.MemberAssignment)
	}
	if got := testutilCount(h.c.m.rebalances); got != rebalancesBefore {
		t.Fatalf("the restart rebalanced (%v -> %v)", rebalancesBefore, got)
	}
	wantCode(t, "leader heartbeat after the restart", h.heartbeat(g, leader.MemberID, gen, nil), 0)
	wantCode(t, "old member id heartbeat", h.heartbeat(g, follower.MemberID, gen, finst), kerr.FencedInstanceID.Code)
	wantCode(t, "old member id commit", h.commit(g, follower.MemberID, gen, finst, 3), kerr.FencedInstanceID.Code)
	wantCode(t, "old member id join", h.c.Join(context.Background(), Client{}, joinReq(g, follower.MemberID, finst)).ErrorCode, kerr.FencedInstanceID.Code)
	wantCode(t, "new member id commit", h.commit(g, r.MemberID, gen, finst, 3), 0)

	// The static leader restarts: no rebalance either; told to skip the
	// assignment (v9).
	r = h.c.Join(context.Background(), Client{ID: "cl"}, joinReq(g, "", map[bool]*string{true: &ia, false: &ib}[finst == &ib]))
	if r.ErrorCode != 0 || r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 {
		t.Fatalf("static leader restart: %+v", r)
	}
	if s := h.sync(g, r.MemberID, gen, nil); string(s.MemberAssignment) != "L" {
		t.Fatalf("leader's assignment after restart %q, want L", s.MemberAssignment)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil, nil)
	q := joinReq("g", "", nil)
	q.SessionTimeoutMillis = 1000
	wantCode(t, "session below min", h.c.Join(context.Background(), Client{}, q).ErrorCode, kerr.InvalidSessionTimeout.Code)
	wantCode(t, "empty group id", h.c.Join(context.Background(), Client{}, joinReq("", "", nil)).ErrorCode, kerr.InvalidGroupID.Code)
	wantCode(t, "unknown member id", h.c.Join(context.Background(), Client{}, joinReq("g", "who", nil)).ErrorCode, kerr.UnknownMemberID.Code)
	q = joinReq("g", "", nil)
	q.Version = 3 // before KIP-394: no MEMBER_ID_REQUIRED
	r := recv(t, h.joinAsync(q))
	wantCode(t, "v3 join", r.ErrorCode, 0)
	other := joinReq("g", "", nil, "roundrobin")
	other.Version = 3
	wantCode(t, "no common protocol", h.c.Join(context.Background(), Client{}, other).ErrorCode, kerr.InconsistentGroupProtocol.Code)
}

// TestProtocolVote: the protocol is the one all members support that most
// list first.
func TestProtocolVote(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.InitialRebalanceDelay = time.Second })
	var chans []<-chan *kmsg.JoinGroupResponse
	for _, prefs := range [][]string{{"range", "cooperative-sticky"}, {"cooperative-sticky", "range"}, {"cooperative-sticky", "range", "sticky"}} {
		q := joinReq("g", "", nil, prefs...)
		q.Version = 3
		chans = append(chans, h.joinAsync(q))
	}
	time.Sleep(50 * time.Millisecond) // all three are waiting in the delay
	h.clk.Add(time.Second)
	h.c.Tick()
	h.clk.Add(time.Second)
	h.c.Tick()
	for _, ch := range chans {
		if r := recv(t, ch); *r.Protocol != "cooperative-sticky" {
			t.Fatalf("protocol %q, want cooperative-sticky (2 votes of 3)", *r.Protocol)
		}
	}
}

// TestSimpleCommits: assign() consumers commit with generation -1 and no
// member; the offsets survive a new coordinator (a restart) and OffsetFetch
// reads what another writer put in the bucket while the group is empty.
func TestSimpleCommits(t *testing.T) {
	b := objstore.NewMemory()
	h := newHarness(t, b, nil)
	wantCode(t, "simple commit", h.commit("s", "", -1, nil, 42), 0)
	h2 := newHarness(t, b, nil)
	o, code := h2.c.Committed(context.Background(), "s")
	if code != 0 || o == nil {
		t.Fatalf("committed after restart: %v %s", o, codeName(code))
	}
	if off, _ := o.Lookup("t", 0); off.Offset != 42 {
		t.Fatalf("offset %d after restart, want 42", off.Offset)
	}
	// Another writer (a reset) changes the object; the empty group re-reads.
	if _, err := NewStore(b, StoreOptions{}).Update(context.Background(), "s", commitOne("t", 0, 7)); err != nil {
		t.Fatal(err)
	}
	o, _ = h2.c.Committed(context.Background(), "s")
	if off, _ := o.Lookup("t", 0); off.Offset != 7 {
		t.Fatalf("offset %d after a reset in the bucket, want 7", off.Offset)
	}
}

// TestGenerationFloor: a coordinator that loads a group numbers its
// generations above the one in the bucket, so a commit of a generation
// from before its restart is refused.
func TestGenerationFloor(t *testing.T) {
	b := objstore.NewMemory()
	h := newHarness(t, b, nil)
	a, ja := h.newMember("g")
	recv(t, ja)
	h.sync("g", a, 1, nil)
	wantCode(t, "commit", h.commit("g", a, 1, nil, 1), 0)
	h2 := newHarness(t, b, nil)
	x, jx := h2.newMember("g")
	rx := recv(t, jx)
	if rx.Generation != 2 {
		t.Fatalf("generation after restart %d, want 2 (above the bucket's 1)", rx.Generation)
	}
	h2.sync("g", x, rx.Generation, nil)
	wantCode(t, "old member's commit on the restarted coordinator", h2.commit("g", a, 1, nil, 2), kerr.UnknownMemberID.Code)
}

func TestReadOnlyBucket(t *testing.T) {
	ctx := context.Background()
	ro, err := objstore.OpenReadOnly(ctx, "mem://ro-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	h := newHarness(t, ro, nil)
	// The first commit finds out; from then on every group API answers
	// COORDINATOR_NOT_AVAILABLE.
	wantCode(t, "commit", h.commit("g", "", -1, nil, 1), kerr.CoordinatorNotAvailable.Code)
	wantCode(t, "join", h.c.Join(ctx, Client{}, joinReq("g", "", nil)).ErrorCode, kerr.CoordinatorNotAvailable.Code)
	wantCode(t, "heartbeat", h.heartbeat("g", "m", 1, nil), kerr.CoordinatorNotAvailable.Code)
	if _, code := h.c.Committed(ctx, "g"); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("offset fetch: %s", codeName(code))
	}
	// Opened read-only: unavailable before any PUT.
	c, err := New(Options{Store: NewStore(objstore.NewMemory(), StoreOptions{ReadOnly: true})})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "owner of a read-only store", c.Owner("g"), kerr.CoordinatorNotAvailable.Code)
}

type otherRing struct{}

func (otherRing) Coordinator(string) (Node, bool, error) {
	return Node{ID: 2, Host: "10.0.0.2", Port: 9092}, false, nil
}

func TestNotCoordinator(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Ring = otherRing{} })
	wantCode(t, "join", h.c.Join(context.Background(), Client{}, joinReq("g", "", nil)).ErrorCode, kerr.NotCoordinator.Code)
	wantCode(t, "commit", h.commit("g", "", -1, nil, 1), kerr.NotCoordinator.Code)
}

// TestExpiry: a consumer group empty for the retention loses its offsets;
// a commits-only group loses each offset the retention after its commit.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil, func(o *Options) { o.OffsetsRetention = time.Hour })
	a, ja := h.newMember("cg")
	recv(t, ja)
	h.sync("cg", a, 1, nil)
	wantCode(t, "commit", h.commit("cg", a, 1, nil, 5), 0)
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version = 1
	lq.Group, lq.MemberID = "cg", a
	wantCode(t, "leave", h.c.Leave(lq).ErrorCode, 0)
	h.c.Wait() // the Empty state is written
	wantCode(t, "simple commit", h.commit("simple", "", -1, nil, 9), 0)
	// A group whose members vanished with a coordinator: its object still
	// says Stable, and nobody will write Empty.
	b, jb := h.newMember("orphan")
	recv(t, jb)
	h.sync("orphan", b, 1, nil)
	wantCode(t, "orphan commit", h.commit("orphan", b, 1, nil, 2), 0)
	h.c.Release("orphan")

	h.clk.Add(59 * time.Minute)
	if err := h.c.ExpireOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"cg", "simple", "orphan"} {
		if o, _ := h.c.Committed(ctx, g); o == nil || len(o.Offsets) != 1 {
			t.Fatalf("%s expired early: %+v", g, o)
		}
	}
	h.clk.Add(2 * time.Minute)
	if err := h.c.ExpireOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"cg", "simple", "orphan"} {
		if o, code := h.c.Committed(ctx, g); o != nil || code != 0 {
			t.Fatalf("%s not expired: %+v %s", g, o, codeName(code))
		}
		if d := h.c.Describe(ctx, g); d.State != StateDead {
			t.Fatalf("%s described %s after expiry, want Dead", g, d.State)
		}
	}
}

func TestDeleteGroups(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil, nil)
	wantCode(t, "unknown", h.c.Delete(ctx, "none"), kerr.GroupIDNotFound.Code)
	a, ja := h.newMember("g")
	recv(t, ja)
	h.sync("g", a, 1, nil)
	h.commit("g", a, 1, nil, 3)
	wantCode(t, "with members", h.c.Delete(ctx, "g"), kerr.NonEmptyGroup.Code)
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version = 1
	lq.Group, lq.MemberID = "g", a
	h.c.Leave(lq)
	wantCode(t, "empty", h.c.Delete(ctx, "g"), 0)
	if o, _ := h.c.Committed(ctx, "g"); o != nil {
		t.Fatalf("offsets after delete: %+v", o)
	}
	if l, err := h.c.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("list after delete: %+v %v", l, err)
	}
}

// TestRunProbesWrites: a coordinator over a bucket that refuses writes
// finds out at start (the probe writes nothing), before any commit.
func TestRunProbesWrites(t *testing.T) {
	ctx := context.Background()
	ro, err := objstore.OpenReadOnly(ctx, "mem://probe-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, tc := range map[string]struct {
		b    objstore.Bucket
		want int16
	}{"read_only": {ro, kerr.CoordinatorNotAvailable.Code}, "writable": {objstore.NewMemory(), 0}} {
		t.Run(name, func(t *testing.T) {
			c, err := New(Options{Store: NewStore(tc.b, StoreOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, "before the probe", c.Owner("g"), 0)
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.Run(runCtx) }()
			deadline := time.Now().Add(5 * time.Second)
			for c.Owner("g") != tc.want && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			wantCode(t, "after the probe", c.Owner("g"), tc.want)
		})
	}
}

// TestRelease: a group released to another replica answers its waiting
// members NOT_COORDINATOR, is no longer held (what a fleet asks at a view
// change), and is read from the bucket when it comes back.
func TestRelease(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMemory()
	h := newHarness(t, b, nil)
	a, ja := h.newMember("g")
	recv(t, ja)
	h.sync("g", a, 1, nil)
	wantCode(t, "commit", h.commit("g", a, 1, nil, 5), 0)
	_, jb := h.newMember("g") // waits for a to rejoin
	if held := h.c.Held(); !slices.Equal(held, []string{"g"}) {
		t.Fatalf("held %v before the release, want [g]", held)
	}
	h.c.Release("g")
	wantCode(t, "waiting join after release", recv(t, jb).ErrorCode, kerr.NotCoordinator.Code)
	if held := h.c.Held(); len(held) != 0 {
		t.Fatalf("held %v after the release, want none", held)
	}
	// Another coordinator writes the group meanwhile.
	if _, err := NewStore(b, StoreOptions{}).Update(ctx, "g", commitOne("t", 0, 9)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "old member after release", h.heartbeat("g", a, 1, nil), kerr.UnknownMemberID.Code)
	x, jx := h.newMember("g")
	rx := recv(t, jx)
	h.sync("g", x, rx.Generation, nil)
	o, _ := h.c.Committed(ctx, "g")
	if off, _ := o.Lookup("t", 0); off.Offset != 9 {
		t.Fatalf("offset %d after the group came back, want the other writer's 9", off.Offset)
	}
}

// TestForgetsGroupsWithNothing: a group met only by joins that never
// completed is dropped from memory once it holds nothing.
func TestForgetsGroupsWithNothing(t *testing.T) {
	h := newHarness(t, nil, nil)
	r := h.c.Join(context.Background(), Client{}, joinReq("g", "", nil))
	wantCode(t, "join", r.ErrorCode, kerr.MemberIDRequired.Code)
	h.clk.Add(session + time.Second)
	h.c.Tick() // the pending member id expires
	h.c.Tick() // the empty group goes
	h.c.mu.Lock()
	n := len(h.c.groups)
	h.c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d groups in memory, want 0", n)
	}
}

// putCounting counts the objects written to a bucket.
type putCounting struct {
	objstore.Bucket
	puts atomic.Int64
}

func (b *putCounting) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	b.puts.Add(1)
	return b.Bucket.Put(ctx, key, r, size, cond)
}

// TestDeleteOffsetsWritesOnlyChanges: OffsetDelete of partitions the
// group has no offset for answers success and writes nothing; one that
// removes an offset writes the group once, without it.
func TestDeleteOffsetsWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	b := &putCounting{Bucket: objstore.NewMemory()}
	h := newHarness(t, b, nil)
	if _, err := h.c.Store().Update(ctx, "g", commitOne("t", 0, 7)); err != nil {
		t.Fatal(err)
	}
	del := func(part int32) (int16, int64) {
		before := b.puts.Load()
		code, _ := h.c.DeleteOffsets(ctx, "g", []kmsg.OffsetDeleteRequestTopic{{Topic: "t",
			Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: part}}}})
		return code, b.puts.Load() - before
	}
	if code, puts := del(1); code != 0 || puts != 0 {
		t.Fatalf("deleting an offset the group does not have: code %d, %d PUTs; want 0, 0", code, puts)
	}
	if code, puts := del(0); code != 0 || puts != 1 {
		t.Fatalf("deleting t-0: code %d, %d PUTs; want 0, 1", code, puts)
	}
	o, err := NewStore(b.Bucket, StoreOptions{}).Load(ctx, "g")
	if err != nil || o == nil {
		t.Fatalf("load: %v, %v", o, err)
	}
	if _, ok := o.Lookup("t", 0); ok {
		t.Fatal("t-0 still committed after OffsetDelete")
	}
}

// TestStaticLeaderNotRejoined: a static leader that does not rejoin within
// the rebalance timeout stays a member (KIP-345) but not the leader: the
// member that rejoined leads (Kafka's maybeElectNewJoinedLeader) and gets
// the member list, else nobody would compute and send the assignment and
// the group would stall for another whole rebalance timeout.
func TestStaticLeaderNotRejoined(t *testing.T) {
	h := newHarness(t, nil, nil)
	const g = "g"
	ia, ib := "inst-a", "inst-b"
	ra := recv(t, h.joinAsync(joinReq(g, "", &ia)))
	wantCode(t, "a join", ra.ErrorCode, 0)
	a := ra.MemberID
	wantCode(t, "a sync", h.sync(g, a, ra.Generation, map[string]string{a: "A"}).ErrorCode, 0)
	jb := h.joinAsync(joinReq(g, "", &ib))
	h.waitMembers(g, 2)
	for range 2 { // a heartbeats (its session lives) but never rejoins
		h.clk.Add(rebalance / 2)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, ra.Generation, &ia), kerr.RebalanceInProgress.Code)
		h.c.Tick()
	}
	rb := recv(t, jb)
	wantCode(t, "b join", rb.ErrorCode, 0)
	if rb.LeaderID != rb.MemberID || len(rb.Members) != 2 {
		t.Fatalf("generation %d: leader %q (a %q, b %q), b got %d members; want b, the only member that rejoined, to lead with both members",
			rb.Generation, rb.LeaderID, a, rb.MemberID, len(rb.Members))
	}
}

// TestCommitOffsetBelowMinusOne: an offset below -1 is refused per
// partition (INVALID_COMMIT_OFFSET_SIZE) rather than written: the group
// object could not be read back (Decode refuses it), and every later
// OffsetFetch, and after a restart every JoinGroup and commit of the group,
// would fail. The group's other offsets stay as they were.
func TestCommitOffsetBelowMinusOne(t *testing.T) {
	h := newHarness(t, nil, nil)
	wantCode(t, "commit of 7", h.commit("s", "", -1, nil, 7), 0)
	wantCode(t, "commit of -2", h.commit("s", "", -1, nil, -2), kerr.InvalidCommitOffsetSize.Code)
	o, code := h.c.Committed(context.Background(), "s")
	wantCode(t, "committed offsets", code, 0)
	if len(o.Offsets) != 1 || o.Offsets[0].Offset != 7 {
		t.Fatalf("committed offsets %+v, want t-0 at 7", o.Offsets)
	}
	h2 := newHarness(t, h.b, nil) // a restarted coordinator loads the object
	wantCode(t, "commit after restart", h2.commit("s", "", -1, nil, 5), 0)
}
