package groups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults of Options: Kafka's broker defaults for the classic group
// coordinator unless said otherwise.
const (
	// DefaultMinSessionTimeout is group.min.session.timeout.ms (6 s).
	DefaultMinSessionTimeout = 6 * time.Second
	// DefaultMaxSessionTimeout is group.max.session.timeout.ms (30 min).
	DefaultMaxSessionTimeout = 30 * time.Minute
	// DefaultInitialRebalanceDelay is group.initial.rebalance.delay.ms
	// (3 s): the first rebalance of an empty group waits this long for more
	// members, extended by the same again while members keep arriving, up
	// to the rebalance timeout, so a group that starts together forms one
	// generation instead of one per member.
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultOffsetsRetention is offsets.retention.minutes (7 days).
	DefaultOffsetsRetention = 7 * 24 * time.Hour
	// DefaultRetentionCheckInterval is offsets.retention.check.interval.ms
	// (10 min).
	DefaultRetentionCheckInterval = 10 * time.Minute
	// DefaultMaxMetadataBytes is offset.metadata.max.bytes (4096), which
	// Kafka counts in UTF-16 code units (Java's String.length()).
	DefaultMaxMetadataBytes = 4096
	// DefaultMaxGroupSize bounds the members of one group, counting those a
	// JoinGroup v4+ asked to come back with their new member id (KIP-394):
	// Kafka's group.max.size, which is unbounded by default; here 1,000, so
	// that a client looping on JoinGroup cannot grow a group's state without
	// end. Past it a new member gets GROUP_MAX_SIZE_REACHED.
	DefaultMaxGroupSize = 1000
	// DefaultTick is how often Run checks session, rebalance and
	// initial-delay deadlines (the precision of every timeout).
	DefaultTick = 100 * time.Millisecond
)

// ProtocolTypeConsumer is the protocol type of Kafka consumers.
const ProtocolTypeConsumer = "consumer"

// Options configure New. Zero fields take the defaults.
type Options struct {
	Store *Store // required
	// Ring decides which groups this replica coordinates (Alone{}: all).
	Ring                   Ring
	MinSessionTimeout      time.Duration
	MaxSessionTimeout      time.Duration
	InitialRebalanceDelay  time.Duration // < 0: none
	OffsetsRetention       time.Duration
	RetentionCheckInterval time.Duration
	MaxMetadataBytes       int
	MaxGroupSize           int // group.max.size: members + pending ones (0: DefaultMaxGroupSize)
	Tick                   time.Duration
	Now                    func() time.Time
	Metrics                *Metrics
	Logger                 *slog.Logger
}

// Client is who sent a request: its client.id and address.
type Client struct{ ID, Host string }

// Coordinator is the classic consumer-group coordinator of the groups its
// Ring gives this replica. Membership is in memory; committed offsets are
// in the Store. Join and Sync block until the rebalance they wait for
// completes (or their context ends); Run drives the timeouts.
type Coordinator struct {
	o     Options
	store *Store
	log   *slog.Logger
	m     *Metrics

	mu       sync.Mutex
	groups   map[string]*group
	releases uint64         // Release calls so far (of any group)
	bg       sync.WaitGroup // background writes (a group's Empty state)
}

type group struct {
	id           string
	state        string
	stateSince   time.Time
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	order        []string          // member ids in join order (leader choice, response order)
	static       map[string]string // group.instance.id -> member id
	pending      map[string]time.Time
	// rebalanceDeadline ends PreparingRebalance (members not rejoined are
	// removed) and CompletingRebalance (members that sent no SyncGroup are
	// removed and the rebalance starts over).
	rebalanceDeadline time.Time
	// initial delay of the first rebalance of an empty group.
	delayUntil     time.Time
	delayRemaining time.Duration
	delayJoined    bool
	hasObject      bool // the bucket holds an object for it (committed offsets)
	released       bool // Released: the group may have moved (and come back as another *group)
}

type member struct {
	id, instanceID   string
	static           bool
	client           Client
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	session          time.Duration
	rebalanceTimeout time.Duration
	lastHeard        time.Time
	assignment       []byte
	join             chan *kmsg.JoinGroupResponse // non-nil: awaiting the join's completion
	joinVersion      int16
	sync             chan *kmsg.SyncGroupResponse // non-nil: awaiting the leader's SyncGroup
	syncVersion      int16
	synced           bool // sent SyncGroup in this generation
}

// New returns a coordinator over o.Store; Run must run for timeouts to
// apply.
func New(o Options) (*Coordinator, error) {
	if o.Store == nil {
		return nil, errors.New("group coordinator: no store")
	}
	if o.Ring == nil {
		o.Ring = Alone{}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&o.MinSessionTimeout, DefaultMinSessionTimeout)
	defDur(&o.MaxSessionTimeout, DefaultMaxSessionTimeout)
	defDur(&o.InitialRebalanceDelay, DefaultInitialRebalanceDelay)
	defDur(&o.OffsetsRetention, DefaultOffsetsRetention)
	defDur(&o.RetentionCheckInterval, DefaultRetentionCheckInterval)
	defDur(&o.Tick, DefaultTick)
	if o.InitialRebalanceDelay < 0 {
		o.InitialRebalanceDelay = 0
	}
	if o.MaxMetadataBytes <= 0 {
		o.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if o.MaxGroupSize <= 0 {
		o.MaxGroupSize = DefaultMaxGroupSize
	}
	if o.MinSessionTimeout > o.MaxSessionTimeout {
		return nil, fmt.Errorf("group coordinator: min session timeout %v above max %v", o.MinSessionTimeout, o.MaxSessionTimeout)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = o.Store.m
	}
	return &Coordinator{o: o, store: o.Store, log: o.Logger, m: o.Metrics, groups: map[string]*group{}}, nil
}

// Run probes whether the bucket takes group writes (Store.Probe; again
// every ReadOnlyRecheck while it does not), drives the timeouts (every
// Tick) and offset expiry (every RetentionCheckInterval) until ctx ends,
// then waits for background writes.
func (c *Coordinator) Run(ctx context.Context) error {
	tick := time.NewTicker(c.o.Tick)
	defer tick.Stop()
	expire := time.NewTicker(c.o.RetentionCheckInterval)
	defer expire.Stop()
	recheck := time.NewTicker(c.store.o.ReadOnlyRecheck)
	defer recheck.Stop()
	defer c.bg.Wait()
	c.probe(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-recheck.C:
			if !c.store.Writable() {
				c.probe(ctx)
			}
		case <-tick.C:
			c.Tick()
		case <-expire.C:
			if err := c.ExpireOffsets(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("group offset expiry pass failed", "err", err)
			}
		}
	}
}

func (c *Coordinator) probe(ctx context.Context) {
	if c.store.o.ReadOnly {
		return
	}
	if err := c.store.Probe(ctx); err != nil && !errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		c.log.Warn("group write probe failed; consumer groups stay available", "err", err)
	}
}

// Wait waits for the background writes Run would wait for (for callers
// that drive Tick themselves).
func (c *Coordinator) Wait() { c.bg.Wait() }

// Owner is the Kafka error code for a request about group on this replica:
// 0 when it coordinates group and can write its offsets, NOT_COORDINATOR
// when another replica does, COORDINATOR_NOT_AVAILABLE when no
// coordinator is known or the bucket refuses writes, or c is nil. Every
// request method checks it first, so those are safe to call on a nil
// *Coordinator (a listener that serves no groups).
func (c *Coordinator) Owner(group string) int16 {
	if c == nil {
		return kerr.CoordinatorNotAvailable.Code // a listener without groups
	}
	_, self, err := c.o.Ring.Coordinator(group)
	switch {
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	case !self:
		return kerr.NotCoordinator.Code
	case !c.store.Writable():
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// Release forgets group on this replica: requests waiting on its
// rebalance are answered NOT_COORDINATOR, its members are dropped and its
// cached object forgotten, so that if the group comes back here it is
// loaded from the bucket afresh (another coordinator may have written it).
// A fleet calls it when its Ring moves the group to another replica.
func (c *Coordinator) Release(group string) {
	c.mu.Lock()
	c.releases++
	if g := c.groups[group]; g != nil {
		for _, id := range slices.Clone(g.order) {
			c.dropMember(g, g.members[id], kerr.NotCoordinator.Code)
		}
		g.released = true
		delete(c.groups, group)
		c.updateGauges()
	}
	c.mu.Unlock()
	c.store.Forget(group)
}

// Held lists the groups this coordinator keeps state for: in memory
// (members, rebalances) or as a cached object. A fleet asks for them at a
// change of its live set and Releases those that moved.
func (c *Coordinator) Held() []string {
	if c == nil {
		return nil // a listener without groups
	}
	cached := c.store.Cached()
	set := make(map[string]struct{}, len(cached))
	for _, g := range cached {
		set[g] = struct{}{}
	}
	c.mu.Lock()
	for g := range c.groups {
		set[g] = struct{}{}
	}
	c.mu.Unlock()
	return slices.Collect(maps.Keys(set))
}

// Ring is the coordinator's Ring.
func (c *Coordinator) Ring() Ring { return c.o.Ring }

func newMemberID(clientID string) string {
	var b [16]byte
	rand.Read(b[:])
	return clientID + "-" + hex.EncodeToString(b[:])
}

// loadGroup is the in-memory group id, created from the store's object
// (generation floor, protocol type) when not yet in memory. It must be
// called without c.mu held; it returns with c.mu held on success.
//
// A group that moved to another replica while its object was read (the
// fleet changes its Ring, then Releases the groups that moved) is not kept:
// errGroupMoved, which the caller answers COORDINATOR_NOT_AVAILABLE, and
// the client looks for the coordinator again.
func (c *Coordinator) loadGroup(ctx context.Context, id string) (*group, error) {
	c.mu.Lock()
	if g, ok := c.groups[id]; ok {
		return g, nil
	}
	releases := c.releases
	c.mu.Unlock()
	obj, err := c.store.Load(ctx, id)
	if err != nil {
		c.log.Error("group object unreadable", "group", id, "err", err)
		return nil, err
	}
	// The Ring is asked without c.mu held (a fleet may hold its own lock
	// while it Releases); a move after this check Releases after it, so
	// either the count below has changed or the Release finds the group.
	if code := c.Owner(id); code != 0 {
		return nil, errGroupMoved
	}
	c.mu.Lock()
	if g, ok := c.groups[id]; ok {
		return g, nil
	}
	if c.releases != releases {
		c.mu.Unlock()
		return nil, errGroupMoved
	}
	g := &group{id: id, state: StateEmpty, stateSince: c.o.Now(), members: map[string]*member{}, static: map[string]string{}, pending: map[string]time.Time{}}
	if obj != nil {
		g.generation, g.protocolType, g.hasObject = obj.Generation, obj.ProtocolType, true
	}
	c.groups[id] = g
	c.updateGauges()
	return g, nil
}

// errGroupMoved: the group moved to another replica, or may have, while
// loadGroup read its object (or while a commit was written).
var errGroupMoved = errors.New("group moved to another coordinator while it was loaded")

// lookup is the in-memory group (nil when none); c.mu must be held.
func (c *Coordinator) lookup(id string) *group { return c.groups[id] }

func (c *Coordinator) setState(g *group, s string) {
	if g.state != s {
		g.state, g.stateSince = s, c.o.Now()
	}
	c.updateGauges()
}

// updateGauges recomputes the group gauges; c.mu must be held.
func (c *Coordinator) updateGauges() {
	counts := map[string]int{}
	members := 0
	for _, g := range c.groups {
		counts[g.state]++
		members += len(g.members)
	}
	for _, s := range states {
		c.m.groups.WithLabelValues(s).Set(float64(counts[s]))
	}
	c.m.members.Set(float64(members))
}

func errResponseJoin(q *kmsg.JoinGroupRequest, memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = q.Version
	r.ErrorCode = code
	r.Generation = -1
	r.MemberID = memberID
	r.Protocol = new(string)
	if q.Version >= 7 {
		r.ProtocolType = new(string)
	}
	return r
}

// Join answers a JoinGroup. It blocks while the group rebalances.
func (c *Coordinator) Join(ctx context.Context, cl Client, q *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	if code := c.Owner(q.Group); code != 0 {
		return errResponseJoin(q, q.MemberID, code)
	}
	session := time.Duration(q.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(q.RebalanceTimeoutMillis) * time.Millisecond
	if q.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	switch {
	case !ValidGroupID(q.Group):
		return errResponseJoin(q, q.MemberID, kerr.InvalidGroupID.Code)
	case session < c.o.MinSessionTimeout || session > c.o.MaxSessionTimeout:
		return errResponseJoin(q, q.MemberID, kerr.InvalidSessionTimeout.Code)
	case q.ProtocolType == "" || len(q.Protocols) == 0:
		return errResponseJoin(q, q.MemberID, kerr.InconsistentGroupProtocol.Code)
	}
	g, err := c.loadGroup(ctx, q.Group)
	if err != nil {
		return errResponseJoin(q, q.MemberID, kerr.CoordinatorNotAvailable.Code)
	}
	ch, resp := c.joinLocked(g, cl, q, session, rebalance)
	c.mu.Unlock()
	if resp != nil {
		return resp
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return errResponseJoin(q, q.MemberID, kerr.RebalanceInProgress.Code)
	}
}

// supports reports whether every protocol the group's members all support
// leaves at least one in common with protocols.
func (g *group) supports(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (m *member) supports(name string) bool {
	return slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == name })
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}

func cloneProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	return out
}

// joinLocked is Join under c.mu: either an immediate response or the
// channel the response will come on.
func (c *Coordinator) joinLocked(g *group, cl Client, q *kmsg.JoinGroupRequest, session, rebalance time.Duration) (<-chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	now := c.o.Now()
	instance := ""
	if q.InstanceID != nil {
		instance = *q.InstanceID
	}
	if g.state == StateDead {
		return nil, errResponseJoin(q, q.MemberID, kerr.CoordinatorNotAvailable.Code)
	}
	if !g.supports(q.ProtocolType, q.Protocols) {
		return nil, errResponseJoin(q, q.MemberID, kerr.InconsistentGroupProtocol.Code)
	}
	if q.MemberID == "" {
		id := newMemberID(cl.ID)
		if instance != "" {
			if old, ok := g.static[instance]; ok {
				return c.replaceStatic(g, g.members[old], id, cl, q, session, rebalance)
			}
		}
		if len(g.members)+len(g.pending) >= c.o.MaxGroupSize {
			// A new member, static or not, past group.max.size (a pending
			// member coming back with its id was counted when it was told).
			return nil, errResponseJoin(q, "", kerr.GroupMaxSizeReached.Code)
		}
		if instance == "" && q.Version >= 4 {
			// KIP-394: the member must come back with the id.
			g.pending[id] = now.Add(session)
			return nil, errResponseJoin(q, id, kerr.MemberIDRequired.Code)
		}
		return c.addMember(g, id, instance, cl, q, session, rebalance), nil
	}
	if instance != "" {
		if cur, ok := g.static[instance]; ok && cur != q.MemberID {
			return nil, errResponseJoin(q, q.MemberID, kerr.FencedInstanceID.Code)
		}
	}
	if _, ok := g.pending[q.MemberID]; ok {
		delete(g.pending, q.MemberID)
		return c.addMember(g, q.MemberID, instance, cl, q, session, rebalance), nil
	}
	m, ok := g.members[q.MemberID]
	if !ok {
		return nil, errResponseJoin(q, q.MemberID, kerr.UnknownMemberID.Code)
	}
	if instance != "" && m.instanceID != instance {
		return nil, errResponseJoin(q, q.MemberID, kerr.FencedInstanceID.Code)
	}
	m.client, m.session, m.rebalanceTimeout, m.lastHeard = cl, session, rebalance, now
	switch g.state {
	case StatePreparingRebalance:
		ch := c.awaitJoin(g, m, q)
		c.tryCompleteJoin(g)
		return ch, nil
	case StateCompletingRebalance, StateStable:
		if sameProtocols(m.protocols, q.Protocols) && (g.state == StateCompletingRebalance || g.leader != m.id) {
			// Nothing changed: the current generation's answer again.
			return nil, c.joinResponse(g, m, q.Version, false)
		}
		ch := c.awaitJoin(g, m, q)
		c.prepareRebalance(g, "member "+m.id+" rejoined with changed metadata or as leader")
		return ch, nil
	default: // Empty: a member id from before
		return nil, errResponseJoin(q, q.MemberID, kerr.UnknownMemberID.Code)
	}
}

// awaitJoin makes m wait for the join's completion; it returns the
// channel of m's response (the completion may happen before the caller
// looks, so m.join may be nil again by then).
func (c *Coordinator) awaitJoin(g *group, m *member, q *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	if m.join != nil {
		// A second JoinGroup of the same member replaces the first.
		m.join <- errResponseJoin(&kmsg.JoinGroupRequest{Version: m.joinVersion}, m.id, kerr.RebalanceInProgress.Code)
	}
	m.join, m.joinVersion = make(chan *kmsg.JoinGroupResponse, 1), q.Version
	m.protocols = cloneProtocols(q.Protocols)
	if g.delayUntil.After(c.o.Now()) {
		g.delayJoined = true
	}
	return m.join
}

// addMember adds a new member awaiting the join and starts or advances a
// rebalance.
func (c *Coordinator) addMember(g *group, id, instance string, cl Client, q *kmsg.JoinGroupRequest, session, rebalance time.Duration) <-chan *kmsg.JoinGroupResponse {
	m := &member{id: id, instanceID: instance, static: instance != "", client: cl, protocolType: q.ProtocolType,
		session: session, rebalanceTimeout: rebalance, lastHeard: c.o.Now()}
	if len(g.members) == 0 {
		g.protocolType = q.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if m.static {
		g.static[instance] = id
	}
	ch := c.awaitJoin(g, m, q)
	switch g.state {
	case StatePreparingRebalance:
		c.tryCompleteJoin(g)
	default:
		c.prepareRebalance(g, "member "+id+" joined")
	}
	c.updateGauges()
	return ch
}

// replaceStatic gives a static member that rejoined without its member id
// (a restart) a new one, fencing the old. In a Stable group whose selected
// protocol its protocols leave unchanged there is no rebalance: the member gets the current generation
// and, at SyncGroup, its assignment back.
func (c *Coordinator) replaceStatic(g *group, old *member, id string, cl Client, q *kmsg.JoinGroupRequest, session, rebalance time.Duration) (<-chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	if old.join != nil {
		old.join <- errResponseJoin(&kmsg.JoinGroupRequest{Version: old.joinVersion}, old.id, kerr.FencedInstanceID.Code)
		old.join = nil
	}
	if old.sync != nil {
		old.sync <- syncError(old.syncVersion, kerr.FencedInstanceID.Code)
		old.sync = nil
	}
	oldID := old.id
	delete(g.members, oldID)
	m := old
	m.id, m.client, m.session, m.rebalanceTimeout, m.lastHeard = id, cl, session, rebalance, c.o.Now()
	g.members[id] = m
	g.static[m.instanceID] = id
	if i := slices.Index(g.order, oldID); i >= 0 {
		g.order[i] = id
	}
	wasLeader := g.leader == oldID
	if wasLeader {
		g.leader = id
	}
	c.log.Info("static member rejoined; old member id fenced", "group", g.id, "instance", m.instanceID, "old", oldID, "new", id)
	if g.state == StateStable {
		// KIP-345: no rebalance while the group's protocol stays the one
		// selected (Kafka's updateStaticMemberAndRebalance), even with
		// other metadata: a restarted consumer's no longer lists the
		// partitions it owned. The member's metadata is updated (the
		// leader sees it at the next rebalance). The leader gets the
		// members but, from v9, is told to skip the assignment (the
		// group keeps its own).
		old := m.protocols
		m.protocols = cloneProtocols(q.Protocols)
		if c.selectProtocol(g) == g.protocol {
			return nil, c.joinResponse(g, m, q.Version, wasLeader)
		}
		m.protocols = old
	}
	ch := c.awaitJoin(g, m, q)
	switch g.state {
	case StatePreparingRebalance:
		c.tryCompleteJoin(g)
	default:
		c.prepareRebalance(g, "static member "+m.instanceID+" rejoined with changed metadata")
	}
	return ch, nil
}

// joinResponse is the JoinGroup answer of the current generation for m;
// the leader's lists every member with its metadata for the protocol.
func (c *Coordinator) joinResponse(g *group, m *member, version int16, skip bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	proto, ptype := g.protocol, g.protocolType
	r.Protocol = &proto
	if version >= 7 {
		r.ProtocolType = &ptype
	}
	r.LeaderID, r.MemberID = g.leader, m.id
	if m.id == g.leader {
		r.SkipAssignment = skip && version >= 9
		for _, id := range g.order {
			o := g.members[id]
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			if o.static {
				inst := o.instanceID
				rm.InstanceID = &inst
			}
			for _, p := range o.protocols {
				if p.Name == g.protocol {
					rm.ProtocolMetadata = p.Metadata
				}
			}
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// prepareRebalance starts a rebalance: PreparingRebalance until every
// member has rejoined or the rebalance timeout (the largest of the
// members') passes. An Empty group's first one waits the initial delay.
func (c *Coordinator) prepareRebalance(g *group, why string) {
	now := c.o.Now()
	if g.state == StateCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				// Its session restarts with the answer, as with an
				// assignment (Kafka's resetAndPropagateAssignmentError).
				m.sync <- syncError(m.syncVersion, kerr.RebalanceInProgress.Code)
				m.sync, m.lastHeard = nil, now
			}
		}
	}
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	if g.state == StateEmpty && c.o.InitialRebalanceDelay > 0 {
		d := min(c.o.InitialRebalanceDelay, timeout)
		g.delayUntil, g.delayRemaining, g.delayJoined = now.Add(d), timeout-d, false
	}
	g.rebalanceDeadline = now.Add(timeout)
	c.m.rebalances.Inc()
	c.log.Info("group rebalancing", "group", g.id, "generation", g.generation, "members", len(g.members), "reason", why)
	c.setState(g, StatePreparingRebalance)
	c.tryCompleteJoin(g)
}

// tryCompleteJoin completes the join phase once every member awaits it
// and no member id handed out by MEMBER_ID_REQUIRED is still to come back.
func (c *Coordinator) tryCompleteJoin(g *group) {
	if g.state != StatePreparingRebalance || !g.delayUntil.IsZero() {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	if len(g.pending) > 0 {
		return
	}
	c.completeJoin(g)
}

// completeJoin ends PreparingRebalance: dynamic members that did not
// rejoin are removed (static ones stay until their session times out),
// the next generation starts with the protocol the members vote for, and
// every waiting member gets its answer. Member ids handed out by
// MEMBER_ID_REQUIRED stay pending until they come back or their session
// passes (Kafka's pendingMembers outlive a generation).
func (c *Coordinator) completeJoin(g *group) {
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; m.join == nil && !m.static {
			c.log.Info("member did not rejoin in the rebalance timeout; removed", "group", g.id, "member", id)
			c.dropMember(g, m, kerr.UnknownMemberID.Code)
		}
	}
	g.delayUntil = time.Time{}
	if len(g.members) > 0 && !slices.ContainsFunc(g.order, func(id string) bool { return g.members[id].join != nil }) {
		// No member rejoined (the static ones left are offline): no
		// generation with a leader nobody answers; wait another rebalance
		// timeout, until they rejoin or their sessions pass (Kafka's
		// onCompleteJoin when maybeElectNewJoinedLeader finds none).
		var timeout time.Duration
		for _, m := range g.members {
			timeout = max(timeout, m.rebalanceTimeout)
		}
		g.rebalanceDeadline = c.o.Now().Add(timeout)
		c.log.Info("no member rejoined; the rebalance waits another rebalance timeout", "group", g.id, "members", len(g.members))
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		c.becameEmpty(g)
		return
	}
	g.protocol = c.selectProtocol(g)
	if l, ok := g.members[g.leader]; !ok || l.join == nil {
		// A leader that did not rejoin (a static one stays a member) gives
		// way to one that did (Kafka's maybeElectNewJoinedLeader).
		if !ok {
			g.leader = g.order[0]
		}
		for _, id := range g.order {
			if g.members[id].join != nil {
				g.leader = id
				break
			}
		}
	}
	now := c.o.Now()
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
		m.synced, m.assignment = false, nil
	}
	g.rebalanceDeadline = now.Add(timeout)
	c.setState(g, StateCompletingRebalance)
	c.log.Info("group generation formed", "group", g.id, "generation", g.generation, "protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		if m.join == nil {
			continue
		}
		m.join <- c.joinResponse(g, m, m.joinVersion, false)
		m.join, m.lastHeard = nil, now
	}
}

// selectProtocol is the protocol every member supports that most members
// list first among those (Kafka's vote); ties go to the name first in byte
// order, so the choice is deterministic.
func (c *Coordinator) selectProtocol(g *group) string {
	var candidates []string
	for _, p := range g.members[g.order[0]].protocols {
		all := true
		for _, m := range g.members {
			all = all && m.supports(p.Name)
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] || votes[name] == votes[best] && name < best {
			best = name
		}
	}
	return best
}

// dropMember removes m, answering its waiting join or sync with code.
func (c *Coordinator) dropMember(g *group, m *member, code int16) {
	if m.join != nil {
		m.join <- errResponseJoin(&kmsg.JoinGroupRequest{Version: m.joinVersion}, m.id, code)
		m.join = nil
	}
	if m.sync != nil {
		m.sync <- syncError(m.syncVersion, code)
		m.sync = nil
	}
	delete(g.members, m.id)
	g.order = slices.DeleteFunc(g.order, func(id string) bool { return id == m.id })
	if m.static && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	c.updateGauges()
}

// removeMember removes m (left, or its session expired) and moves the
// group on: a rebalance, or the end of the one in progress.
func (c *Coordinator) removeMember(g *group, m *member, why string) {
	c.dropMember(g, m, kerr.UnknownMemberID.Code)
	c.log.Info("member removed", "group", g.id, "member", m.id, "instance", m.instanceID, "reason", why)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		c.prepareRebalance(g, why)
	case StatePreparingRebalance:
		c.tryCompleteJoin(g)
	}
}

// backgroundWriteTimeout bounds a write of the coordinator's own (not a
// client's request), which Run waits for when it stops.
const backgroundWriteTimeout = 30 * time.Second

// becameEmpty records an Empty group; when it has committed offsets the
// object is rewritten with the time, which starts the offsets' expiry.
func (c *Coordinator) becameEmpty(g *group) {
	c.setState(g, StateEmpty)
	if !g.hasObject {
		return
	}
	since, gen, ptype := c.o.Now().UnixMilli(), g.generation, g.protocolType
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		// Bounded: Run waits for background writes when it stops.
		ctx, cancel := context.WithTimeout(context.Background(), backgroundWriteTimeout)
		defer cancel()
		_, err := c.store.Update(ctx, g.id, func(o *Object) error {
			// Asked at every attempt, as a commit does: a replica the
			// group moved from (its members expire here once they went to
			// the new coordinator) does not write Empty over the new
			// coordinator's state. Nor does a group Released meanwhile,
			// which may have come back with members.
			if c.Owner(g.id) != 0 {
				return errGroupMoved
			}
			c.mu.Lock()
			current := c.lookup(g.id) == g
			c.mu.Unlock()
			if !current {
				return errGroupMoved
			}
			if o.UpdatedMS == 0 || o.State == StateEmpty && o.EmptySinceMS != 0 {
				return errNoChange // deleted meanwhile (never resurrect), or already recorded
			}
			o.State, o.EmptySinceMS, o.Generation = StateEmpty, since, max(o.Generation, gen)
			if ptype != "" {
				o.ProtocolType = ptype
			}
			return nil
		})
		switch {
		case errors.Is(err, errGroupMoved):
			c.log.Info("group emptied; its state was not written: this replica no longer holds the group (moved to another coordinator, released, or deleted)", "group", g.id)
		case err != nil && !errors.Is(err, errNoChange):
			c.log.Warn("group emptied; its state was not written (offsets expire from their last write instead)", "group", g.id, "err", err)
		}
	}()
}

var errNoChange = errors.New("no change")

func syncError(version int16, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.MemberAssignment = []byte{}
	return r
}

// checkMember is the common validation of Sync, Heartbeat and OffsetCommit
// with a member: FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION.
func checkMember(g *group, memberID string, instance *string, generation int32) (*member, int16) {
	if g == nil || g.state == StateDead {
		return nil, kerr.UnknownMemberID.Code
	}
	if instance != nil {
		if cur, ok := g.static[*instance]; ok && cur != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, kerr.UnknownMemberID.Code
	}
	if instance != nil && m.instanceID != *instance {
		return nil, kerr.FencedInstanceID.Code
	}
	if generation != g.generation {
		return m, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// Sync answers a SyncGroup: the leader's carries the assignment, which
// makes the group Stable; the others wait for it.
func (c *Coordinator) Sync(ctx context.Context, q *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	if code := c.Owner(q.Group); code != 0 {
		return syncError(q.Version, code)
	}
	c.mu.Lock()
	ch, r := c.syncLocked(c.lookup(q.Group), q)
	c.mu.Unlock()
	if r != nil {
		return r
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return syncError(q.Version, kerr.RebalanceInProgress.Code)
	}
}

func (c *Coordinator) syncLocked(g *group, q *kmsg.SyncGroupRequest) (<-chan *kmsg.SyncGroupResponse, *kmsg.SyncGroupResponse) {
	m, code := checkMember(g, q.MemberID, q.InstanceID, q.Generation)
	if code != 0 {
		return nil, syncError(q.Version, code)
	}
	if q.Version >= 5 && (q.ProtocolType != nil && *q.ProtocolType != g.protocolType || q.Protocol != nil && *q.Protocol != g.protocol) {
		return nil, syncError(q.Version, kerr.InconsistentGroupProtocol.Code)
	}
	m.lastHeard = c.o.Now()
	switch g.state {
	case StatePreparingRebalance:
		return nil, syncError(q.Version, kerr.RebalanceInProgress.Code)
	case StateStable:
		m.synced = true // a follower's SyncGroup after the leader's
		return nil, c.syncResponse(g, m, q.Version)
	case StateCompletingRebalance:
		m.synced = true
		if m.sync != nil {
			m.sync <- syncError(m.syncVersion, kerr.RebalanceInProgress.Code)
		}
		m.sync, m.syncVersion = make(chan *kmsg.SyncGroupResponse, 1), q.Version
		ch := m.sync // answered below when m leads
		if m.id == g.leader {
			for _, a := range q.GroupAssignment {
				if o, ok := g.members[a.MemberID]; ok {
					o.assignment = slices.Clone(a.MemberAssignment)
				}
			}
			c.setState(g, StateStable)
			now := c.o.Now()
			for _, o := range g.members {
				if o.sync != nil {
					// Its session restarts with the assignment (Kafka's
					// propagateAssignment): it did not run while it waited.
					o.sync <- c.syncResponse(g, o, o.syncVersion)
					o.sync, o.lastHeard = nil, now
				}
			}
		}
		return ch, nil
	default:
		return nil, syncError(q.Version, kerr.UnknownMemberID.Code)
	}
}

func (c *Coordinator) syncResponse(g *group, m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	if version >= 5 {
		pt, p := g.protocolType, g.protocol
		r.ProtocolType, r.Protocol = &pt, &p
	}
	return r
}

// Heartbeat answers a Heartbeat: it keeps the member's session and tells
// it to rejoin when the group rebalances.
func (c *Coordinator) Heartbeat(q *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = q.Version
	if r.ErrorCode = c.Owner(q.Group); r.ErrorCode != 0 {
		return r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.lookup(q.Group)
	m, code := checkMember(g, q.MemberID, q.InstanceID, q.Generation)
	if code != 0 {
		r.ErrorCode = code
		return r
	}
	m.lastHeard = c.o.Now()
	switch g.state {
	case StatePreparingRebalance:
		r.ErrorCode = kerr.RebalanceInProgress.Code
	case StateEmpty:
		r.ErrorCode = kerr.UnknownMemberID.Code
	}
	return r
}

// Leave answers a LeaveGroup: one member (v0-2) or a batch of them, by
// member id or, for static members, by group.instance.id (v3+).
func (c *Coordinator) Leave(q *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = q.Version
	if r.ErrorCode = c.Owner(q.Group); r.ErrorCode != 0 {
		return r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.lookup(q.Group)
	leave := func(memberID string, instance *string) int16 {
		if g == nil {
			return kerr.UnknownMemberID.Code
		}
		if instance != nil {
			cur, ok := g.static[*instance]
			switch {
			case !ok:
				return kerr.UnknownMemberID.Code
			case memberID != "" && cur != memberID:
				return kerr.FencedInstanceID.Code
			}
			memberID = cur
		}
		if _, ok := g.pending[memberID]; ok {
			delete(g.pending, memberID)
			c.tryCompleteJoin(g)
			return 0
		}
		m, ok := g.members[memberID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		c.removeMember(g, m, "left the group")
		return 0
	}
	if q.Version < 3 {
		r.ErrorCode = leave(q.MemberID, nil)
		return r
	}
	for _, qm := range q.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = qm.MemberID, qm.InstanceID
		rm.ErrorCode = leave(qm.MemberID, qm.InstanceID)
		r.Members = append(r.Members, rm)
	}
	return r
}

// Tick applies the deadlines due at Now: members whose session expired
// are removed, a rebalance whose timeout passed completes with the members
// that rejoined (or, in CompletingRebalance and Stable, starts over
// without those that sent no SyncGroup), the initial delay ends or extends, and member
// ids handed out by MEMBER_ID_REQUIRED that never came back are dropped.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Now()
	for id, g := range c.groups {
		if g.state == StateEmpty && len(g.members) == 0 && len(g.pending) == 0 && !g.hasObject {
			// Nothing to remember (no offsets, no members): a group met
			// only by refused or abandoned joins costs no memory, in the
			// store's cache either.
			delete(c.groups, id)
			c.store.Forget(id)
			c.updateGauges()
			continue
		}
		for id, until := range g.pending {
			if !now.Before(until) {
				delete(g.pending, id)
				c.tryCompleteJoin(g)
			}
		}
		for _, id := range slices.Clone(g.order) {
			m, ok := g.members[id]
			if !ok || m.join != nil || m.sync != nil {
				continue // awaiting a rebalance keeps the session alive
			}
			if now.Sub(m.lastHeard) > m.session {
				c.removeMember(g, m, fmt.Sprintf("session timeout %v expired", m.session))
			}
		}
		switch g.state {
		case StatePreparingRebalance:
			if !g.delayUntil.IsZero() && !now.Before(g.delayUntil) {
				if g.delayJoined && g.delayRemaining > 0 {
					d := min(c.o.InitialRebalanceDelay, g.delayRemaining)
					g.delayUntil, g.delayRemaining, g.delayJoined = now.Add(d), g.delayRemaining-d, false
				} else {
					g.delayUntil = time.Time{}
					c.tryCompleteJoin(g)
				}
			}
			if g.state == StatePreparingRebalance && !now.Before(g.rebalanceDeadline) {
				c.completeJoin(g)
			}
		case StateCompletingRebalance, StateStable:
			// Members that sent no SyncGroup in the generation's rebalance
			// timeout are removed, also once the leader's made the group
			// Stable (Kafka's pending-sync expiry): one that heartbeats
			// without ever syncing would keep partitions nobody reads.
			if g.rebalanceDeadline.IsZero() || now.Before(g.rebalanceDeadline) {
				break
			}
			if g.state == StateStable {
				g.rebalanceDeadline = time.Time{} // checked once a generation
			}
			var late []*member
			for _, id := range g.order {
				if m := g.members[id]; !m.synced {
					late = append(late, m)
				}
			}
			for _, m := range late {
				c.log.Info("member sent no SyncGroup within the rebalance timeout; removed", "group", g.id, "member", m.id)
				c.dropMember(g, m, kerr.UnknownMemberID.Code)
			}
			if len(late) > 0 {
				c.prepareRebalance(g, "members missed SyncGroup")
			}
		}
	}
}
