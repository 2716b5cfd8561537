// Package fleet owns the fetch fleet: which replicas of `tiered fetch` are alive and which
// of them coordinates each consumer group.
//
// A replica knows its peers from fetch.peers: a static list of advertised Kafka addresses,
// or one DNS name (host:port) that resolves to all of them, as a Kubernetes headless
// service does. Empty means alone: the replica coordinates every group and writes no lease.
//
// Liveness comes from short leases in the bucket, one object per replica,
// groups/.fleet/lease-<address>.json (docs/format/fleet.md). Each replica rewrites its own
// every Lease/5 and reads its peers' leases as often. A peer is live while its lease object
// changed (a new ETag, whether or not its JSON parses) within the last Lease, measured on
// the reader's monotonic clock, so clocks need not agree: the times a lease names are
// never compared with the reader's clock. A lease seen for the first time counts as
// changed at the moment it is first seen, so the lease of a replica killed long ago and
// still listed in a static fetch.peers keeps its groups without a coordinator for one Lease
// after a replica starts, then expires: a brief unavailability rather than two
// coordinators. A replica stopped with SIGTERM deletes its lease, so the others take its
// groups at their next poll.
//
// A replica counts itself only while its own renewals succeeded within the last Lease and
// a poll that started within the last Lease read every peer's lease (a DNS peer name that
// does not resolve reads none): one that cannot read them (S3 SlowDown, a policy without
// GetObject) would otherwise judge its peers dead and coordinate their groups while they,
// seeing its lease renewed, coordinate them too. It keeps renewing meanwhile. One failed
// read changes nothing: a peer whose lease cannot be read keeps the state its last read
// found while this replica counts itself, and is judged by its last change once it does
// not.
//
// Each group's coordinator is chosen by rendezvous hashing over the live replicas: every
// replica scores hash(replica, group) and the highest wins, so replicas that see the same
// live set name the same coordinator, and a replica's death moves only its own groups.
//
// Takeover bound: a killed coordinator's last renewal is at most one poll old when it
// dies; a peer notices the renewals stopped at most a poll after that, declares it dead a
// Lease after the last change it saw, and acts on it at its next poll. The group moves
// within TakeoverBound(lease) = Lease + 2 × Lease/5 (14s for the default 10s lease), plus
// the few milliseconds of the poll's own GETs.
package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/x/promreg"
	"github.com/tiered/tiered/remotetier/objstore"
)

// DefaultLease is fetch.peer_lease: how long a replica counts as alive after its lease
// object last changed.
const DefaultLease = 10 * time.Second

// MinLease is the shortest lease fetch.peer_lease accepts.
const MinLease = 500 * time.Millisecond

// LeasePrefix is where the leases live, inside the groups/ prefix that is all the fetch
// service may write.
const LeasePrefix = groups.FleetPrefix

// leaseVersion is the version field of a lease object.
const leaseVersion = 1

// Interval is how often a replica with the given lease renews its own lease and reads its
// peers': Lease/5.
func Interval(lease time.Duration) time.Duration { return lease / 5 }

// TakeoverBound is the longest a group stays without a coordinator after its coordinator
// is killed (kill -9; SIGTERM releases at once): Lease + 2 × Interval.
func TakeoverBound(lease time.Duration) time.Duration { return lease + 2*Interval(lease) }

// LeaseKey is the lease object of the replica advertised at addr (host:port).
func LeaseKey(addr string) string {
	return LeasePrefix + "lease-" + url.PathEscape(addr) + ".json"
}

// NodeID is the Kafka node id a replica advertised at addr uses in a fleet: a 31-bit hash
// of the address, the same on every replica, so FindCoordinator and Metadata on any
// replica name a given replica with one id.
func NodeID(addr string) int32 {
	h := fnv.New32a()
	_, _ = io.WriteString(h, addr)
	return int32(h.Sum32() & 0x7fffffff)
}

// Member is a replica of the fleet.
type Member struct {
	// Addr is the advertised Kafka address, host:port.
	Addr string
	// NodeID is its Kafka node id (NodeID(Addr)).
	NodeID int32
	// Self is true for this replica.
	Self bool
}

// Host and Port split Addr.
func (m Member) Host() string {
	h, _, _ := net.SplitHostPort(m.Addr)
	return h
}

// Port is the port of Addr.
func (m Member) Port() int32 {
	_, p, _ := net.SplitHostPort(m.Addr)
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// Resolver looks a host name up (net.DefaultResolver in production).
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Options configure New.
type Options struct {
	// Bucket holds the leases; the fleet writes only its own lease object.
	Bucket objstore.Bucket
	// Self is this replica's advertised Kafka address (host:port).
	Self string
	// Peers is fetch.peers: the advertised addresses of every replica (Self among them),
	// or a single host:port whose host is a DNS name resolving to all of them. Empty:
	// alone.
	Peers []string
	// Lease is fetch.peer_lease (0: DefaultLease).
	Lease time.Duration
	// Resolver resolves a DNS peer name (nil: net.DefaultResolver).
	Resolver Resolver
	Logger   *slog.Logger
	// Registerer receives the fleet's metrics (nil: none).
	Registerer prometheus.Registerer
	// Now is the wall clock written into leases (nil: time.Now). Liveness itself is
	// measured with the monotonic readings of time.Now.
	Now func() time.Time
	// OnLose is called (from the fleet's goroutine) for each group Held lists that this
	// replica no longer coordinates after a change of the live set: the coordinator drops
	// the group's state and cached object, so that if the group comes back it is re-read
	// from the bucket (a takeover's commits are never hidden by an old cache). Nil:
	// nothing is called.
	OnLose func(group string)
	// Held lists the groups this replica keeps state for (a coordinator's groups and
	// cached objects), asked at each change of the live set. The fleet keeps no list of
	// its own: one of every name a client asked about would grow without bound. Nil: no
	// group is held.
	Held func() []string
}

// Fleet tracks the live replicas and names each group's coordinator. Its methods are safe
// for concurrent use.
type Fleet struct {
	o       Options
	log     *slog.Logger
	alone   bool
	dnsName string // host of a DNS peer entry; "" for a static list
	dnsPort string
	self    string // identity of this replica (an IP:port in DNS mode)
	metrics *metrics

	mu       sync.Mutex
	httpURL  string                // this replica's HTTP API URL, written into its lease
	resolved bool                  // Resolve found self among the DNS answers
	seen     map[string]*peerState // by member address
	selfOK   time.Time             // last successful renewal of our own lease (monotonic)
	// visible is when this replica's lease last became visible to its peers after it was
	// not (its first renewal, the first after a lapse, or the first poll that found it
	// among the DNS answers its peers poll; monotonic): it coordinates no group until a
	// Lease after it (claimable).
	visible time.Time
	// everListed and unlistedSince track this replica among the members its polls poll
	// (a DNS name's answers; a static list always names it).
	everListed    bool
	unlistedSince time.Time // since when it has been missing (monotonic); zero while listed
	selfEnd       time.Time // end of the last successful renewal of our own lease (monotonic)
	readOK        time.Time // start of the last poll that read every peer's lease (monotonic)
	seq           uint64
	started       time.Time
	live          []string // sorted
	epoch         uint64
	released      bool
	changed       chan struct{} // closed and replaced on every change of the live set
}

type peerState struct {
	etag    string
	changed time.Time // monotonic reading of the last change seen
	readAt  time.Time // monotonic reading of the last poll that read the lease
	http    string    // the HTTP URL its lease names
}

// lease is the JSON content of a lease object.
type lease struct {
	Version   int    `json:"version"`
	Replica   string `json:"replica"`
	NodeID    int32  `json:"node_id"`
	LeaseMS   int64  `json:"lease_ms"`
	Seq       uint64 `json:"seq"`
	StartedAt string `json:"started_at"`
	RenewedAt string `json:"renewed_at"`
	// HTTP is the replica's HTTP API URL ("" when unknown): where `tiered groups --fetch`
	// is sent for a group this replica coordinates.
	HTTP string `json:"http,omitempty"`
}

// ErrNotMember: fetch.peers lists addresses, and this replica's advertised address is not
// one of them.
var ErrNotMember = errors.New("this replica's advertised address is not among fetch.peers")

// New checks the options. A fleet with peers writes its first lease and reads its peers'
// in Start; one alone needs neither.
func New(o Options) (*Fleet, error) {
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Lease < MinLease {
		return nil, fmt.Errorf("fleet: lease %s is shorter than %s", o.Lease, MinLease)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, _, err := net.SplitHostPort(o.Self); err != nil {
		return nil, fmt.Errorf("fleet: advertised address %q: %w", o.Self, err)
	}
	f := &Fleet{o: o, log: o.Logger, self: o.Self, seen: map[string]*peerState{}, changed: make(chan struct{}),
		metrics: newMetrics(o.Registerer)}
	switch {
	case len(o.Peers) == 0:
		f.alone = true
		f.live = []string{o.Self}
	case len(o.Peers) == 1 && IsDNSName(o.Peers[0]):
		host, port, err := net.SplitHostPort(o.Peers[0])
		if err != nil {
			return nil, fmt.Errorf("fleet: peer %q: %w", o.Peers[0], err)
		}
		f.dnsName, f.dnsPort = host, port
	default:
		for _, p := range o.Peers {
			if _, _, err := net.SplitHostPort(p); err != nil {
				return nil, fmt.Errorf("fleet: peer %q: %w", p, err)
			}
		}
		if !slices.Contains(o.Peers, o.Self) {
			return nil, fmt.Errorf("fleet: %w: %s not in %s", ErrNotMember, o.Self, strings.Join(o.Peers, ", "))
		}
	}
	if !f.alone && o.Bucket == nil {
		return nil, errors.New("fleet: peers need a bucket for the leases")
	}
	f.metrics.live.Set(float64(len(f.live)))
	return f, nil
}

// IsDNSName reports whether peer (host:port) names a host rather than an IP address: a
// single such entry of fetch.peers is resolved to every replica.
func IsDNSName(peer string) bool {
	host, _, err := net.SplitHostPort(peer)
	return err == nil && net.ParseIP(host) == nil
}

// SetHTTPURL sets the URL of this replica's HTTP API that its lease names (call it before
// Start: the listener's address is known only once bound).
func (f *Fleet) SetHTTPURL(u string) {
	f.mu.Lock()
	f.httpURL = u
	f.mu.Unlock()
}

// HTTPURL is the HTTP API URL of the member at addr, as its lease names it ("" unknown).
func (f *Fleet) HTTPURL(addr string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if addr == f.self {
		return f.httpURL
	}
	if st := f.seen[addr]; st != nil {
		return st.http
	}
	return ""
}

// Alone reports whether the replica runs without peers.
func (f *Fleet) Alone() bool { return f.alone }

// Self is this replica as a member.
func (f *Fleet) Self() Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Member{Addr: f.self, NodeID: NodeID(f.self), Self: true}
}

// Lease is the lease length in use.
func (f *Fleet) Lease() time.Duration { return f.o.Lease }

// Start resolves the peers, writes this replica's first lease and reads the peers' once,
// so the first answers already see the fleet. An error writing the lease (a read-only
// bucket) is returned: the caller decides whether to run without group coordination.
// Call Run right after: the lease written here is renewed only by Run, and a replica whose
// lease goes a Lease unrenewed stops counting itself while its peers take its groups.
func (f *Fleet) Start(ctx context.Context) error {
	if f.alone {
		return nil
	}
	f.mu.Lock()
	f.started = f.o.Now()
	f.mu.Unlock()
	if err := f.Resolve(ctx); err != nil {
		return err
	}
	if err := f.renew(ctx); err != nil {
		return fmt.Errorf("write lease %s: %w", LeaseKey(f.self), err)
	}
	f.poll(ctx)
	return nil
}

// Resolve finds this replica among the answers of a DNS peer name (Self is then that
// address), once; Start calls it. A static list or alone needs nothing.
func (f *Fleet) Resolve(ctx context.Context) error {
	f.mu.Lock()
	done := f.resolved
	f.mu.Unlock()
	if f.dnsName == "" || done {
		return nil
	}
	if err := f.resolveSelf(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	f.resolved = true
	f.mu.Unlock()
	return nil
}

// resolveSelf finds this replica among the DNS name's addresses: its advertised host, if
// it is a name, resolved to the address the peers' DNS name gives for it.
func (f *Fleet) resolveSelf(ctx context.Context) error {
	host, port, _ := net.SplitHostPort(f.o.Self)
	if port != f.dnsPort {
		return fmt.Errorf("fleet: advertised port %s differs from the port of fetch.peers %s:%s", port, f.dnsName, f.dnsPort)
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		var err error
		if ips, err = f.o.Resolver.LookupHost(ctx, host); err != nil {
			return fmt.Errorf("fleet: resolve advertised host %s: %w", host, err)
		}
	}
	members, err := f.members(ctx)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if a := net.JoinHostPort(ip, port); slices.Contains(members, a) {
			f.mu.Lock()
			f.self = a
			f.mu.Unlock()
			return nil
		}
	}
	// Not yet in DNS (a Kubernetes pod before it is ready, without
	// publishNotReadyAddresses): take the first address and let polls find it.
	f.mu.Lock()
	f.self = net.JoinHostPort(ips[0], port)
	f.mu.Unlock()
	f.log.Warn("advertised address not among the peers' DNS answers yet", "self", net.JoinHostPort(ips[0], port), "peers", f.dnsName, "answers", members)
	return nil
}

// members returns the configured replicas: the static list, or the DNS name's answers.
func (f *Fleet) members(ctx context.Context) ([]string, error) {
	if f.dnsName == "" {
		return f.o.Peers, nil
	}
	ips, err := f.o.Resolver.LookupHost(ctx, f.dnsName)
	if err != nil {
		return nil, fmt.Errorf("fleet: resolve fetch.peers %s: %w", f.dnsName, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, f.dnsPort))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Run renews the lease and reads the peers' every Interval until ctx ends, then deletes
// this replica's lease (the release on SIGTERM) and returns nil.
func (f *Fleet) Run(ctx context.Context) error {
	if f.alone {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(Interval(f.o.Lease))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return f.release()
		case <-t.C:
			if err := f.renew(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("lease renewal failed", "key", LeaseKey(f.self), "err", err)
			}
			f.poll(ctx)
		}
	}
}

// release deletes this replica's lease and drops it from its own view.
func (f *Fleet) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.mu.Lock()
	f.released = true
	f.mu.Unlock()
	f.recompute(nil)
	if err := f.o.Bucket.Delete(ctx, LeaseKey(f.self)); err != nil {
		return fmt.Errorf("release lease %s: %w", LeaseKey(f.self), err)
	}
	f.log.Info("fleet lease released", "key", LeaseKey(f.self))
	return nil
}

// renew writes this replica's lease.
func (f *Fleet) renew(ctx context.Context) error {
	f.mu.Lock()
	f.seq++
	l := lease{Version: leaseVersion, Replica: f.self, NodeID: NodeID(f.self), LeaseMS: f.o.Lease.Milliseconds(), Seq: f.seq,
		StartedAt: f.started.UTC().Format(time.RFC3339Nano), RenewedAt: f.o.Now().UTC().Format(time.RFC3339Nano), HTTP: f.httpURL}
	f.mu.Unlock()
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, Interval(f.o.Lease)*2)
	defer cancel()
	start := time.Now()
	_, err = f.o.Bucket.Put(rctx, LeaseKey(f.self), bytes.NewReader(data), int64(len(data)), objstore.Condition{})
	if err != nil {
		f.metrics.renewals.WithLabelValues("error").Inc()
		return err
	}
	f.metrics.renewals.WithLabelValues("ok").Inc()
	f.mu.Lock()
	// A renewal a Lease or more after the last one (the replica was paused, or its polls
	// hung): the peers have meanwhile declared it dead and coordinated its groups, perhaps
	// with new generations and commits. Whatever the next view gives back to it must be
	// re-read from the bucket, not served from the state held before.
	// Measured from the previous write's end to this one's: the peers see each write once
	// it lands, and a write that started in time but landed late left the lease unchanged
	// past the Lease they judge it by.
	end := time.Now()
	gap := !f.selfEnd.IsZero() && end.Sub(f.selfEnd) >= f.o.Lease
	if gap || f.selfEnd.IsZero() {
		f.visible = end // the PUT is complete: peers can read the lease from now on
	}
	f.selfOK, f.selfEnd = start, end
	f.mu.Unlock()
	if gap {
		f.dropHeld()
	}
	return nil
}

// dropHeld calls OnLose for every group Held lists.
func (f *Fleet) dropHeld() {
	if f.o.Held == nil || f.o.OnLose == nil {
		return
	}
	held := slices.Clone(f.o.Held())
	slices.Sort(held)
	f.log.Info("own lease lapsed: dropping the state of every held group", "groups", len(held))
	for _, g := range held {
		f.o.OnLose(g)
	}
}

// poll reads every peer's lease and recomputes the live set.
func (f *Fleet) poll(ctx context.Context) {
	start := time.Now()
	members, err := f.members(ctx)
	if err != nil {
		f.log.Warn("fleet peers not resolved; keeping the last view", "err", err)
		return
	}
	results := make([]leaseRead, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m == f.self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.readLease(ctx, m)
		}()
	}
	wg.Wait()
	now := time.Now()
	// A replica missing from the DNS answers is in no peer's view (they read only the
	// answers' leases): it does not count itself either, or it and a peer would both
	// coordinate the groups rendezvous hashing gives it.
	listed := slices.Contains(members, f.self)
	obs := map[string]observation{}
	complete := true
	for i, m := range members {
		if m == f.self {
			continue
		}
		r := results[i]
		switch {
		case errors.Is(r.err, objstore.ErrNotFound):
			obs[m] = observation{}
		case r.err != nil:
			f.log.Warn("peer lease unreadable; keeping its last known state", "peer", m, "key", LeaseKey(m), "err", r.err)
			obs[m] = observation{unknown: true}
			complete = false
		case r.badJSON != nil:
			f.log.Warn("peer lease is not valid JSON; judged by whether its ETag changes", "peer", m, "key", LeaseKey(m), "etag", r.etag, "err", r.badJSON)
			obs[m] = observation{present: true, etag: r.etag}
		default:
			obs[m] = observation{present: true, etag: r.etag, http: r.l.HTTP}
		}
	}
	var readAt time.Time
	if complete {
		readAt = start
	}
	f.observe(now, obs, listed, readAt)
}

// observation is what one poll saw of a peer's lease.
type observation struct {
	present bool
	unknown bool // read failed: keep the previous state
	etag    string
	http    string
}

// leaseRead is one read of a peer's lease object.
type leaseRead struct {
	etag    string
	l       lease
	err     error // the object could not be read
	badJSON error // it was read (etag is set) but does not parse
}

func (f *Fleet) readLease(ctx context.Context, addr string) (r leaseRead) {
	rctx, cancel := context.WithTimeout(ctx, Interval(f.o.Lease)*2)
	defer cancel()
	rc, attrs, err := objstore.GetWithAttrs(rctx, f.o.Bucket, LeaseKey(addr))
	if err != nil {
		r.err = err
		return r
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		r.err = fmt.Errorf("read lease %s: %w", LeaseKey(addr), err)
		return r
	}
	r.etag = attrs.ETag
	if err := json.Unmarshal(data, &r.l); err != nil {
		r.l, r.badJSON = lease{}, err
	}
	return r
}

// observe applies one poll's observations (taken at the monotonic time now) and
// recomputes the live set; listed is whether this replica is among the members polled,
// readAt the start of the poll if it read every peer's lease (zero if a read failed).
func (f *Fleet) observe(now time.Time, obs map[string]observation, listed bool, readAt time.Time) {
	f.mu.Lock()
	if !readAt.IsZero() {
		f.readOK = readAt
	}
	for m, o := range obs {
		st := f.seen[m]
		switch {
		case o.unknown:
		case !o.present:
			delete(f.seen, m)
		case st == nil:
			// First sight counts as a change, whatever time the lease names: clocks need
			// not agree. A lease left behind long ago (kill -9) is dead a Lease later.
			st = &peerState{etag: o.etag, changed: now}
			f.seen[m] = st
		case st.etag != o.etag:
			st.etag, st.changed = o.etag, now
		}
		if st != nil && o.present {
			st.http, st.readAt = o.http, now
		}
	}
	for m := range f.seen {
		if _, ok := obs[m]; !ok {
			delete(f.seen, m) // no longer among the peers
		}
	}
	if listed {
		// First among the DNS answers, or again after missing from them for a Lease: the
		// peers read its lease only from now on. A shorter absence (answers that leave
		// some members out now and then) does not restart the wait, or a replica whose
		// answers flap would never coordinate.
		if !f.everListed || !f.unlistedSince.IsZero() && now.Sub(f.unlistedSince) >= f.o.Lease {
			f.visible = now
		}
		f.everListed, f.unlistedSince = true, time.Time{}
	} else if f.unlistedSince.IsZero() {
		f.unlistedSince = now
	}
	self := !f.released && listed && f.selfLive(now)
	var live []string
	for m, st := range f.seen {
		if f.peerLive(st, now, self) {
			live = append(live, m)
		}
	}
	if self {
		live = append(live, f.self)
	}
	f.mu.Unlock()
	f.recompute(live)
}

// peerLive reports whether a peer counts as live at now (f.mu held); self is whether this
// replica counts itself. A peer is live while its lease changed within the last Lease. One
// whose lease was live when last read and has not been read since keeps that state while
// this replica counts itself: its renewals may have gone on unseen, and taking its groups
// on no evidence would give them two coordinators. This replica stops counting itself a
// Lease after its last complete read; from then on the peer is judged by its last change.
func (f *Fleet) peerLive(st *peerState, now time.Time, self bool) bool {
	return now.Sub(st.changed) < f.o.Lease || self && st.readAt.Sub(st.changed) < f.o.Lease
}

// recompute installs live (nil after a release: nothing) as the live set.
func (f *Fleet) recompute(live []string) {
	slices.Sort(live)
	f.mu.Lock()
	if f.released {
		live = nil
	}
	if slices.Equal(live, f.live) {
		f.mu.Unlock()
		return
	}
	old := f.live
	f.live = live
	f.epoch++
	close(f.changed)
	f.changed = make(chan struct{})
	epoch, self := f.epoch, f.self
	f.metrics.live.Set(float64(len(live)))
	f.metrics.changes.Inc()
	f.mu.Unlock()
	var lost []string
	if f.o.Held != nil {
		for _, g := range f.o.Held() {
			if a, ok := Rendezvous(live, g); !ok || a != self {
				lost = append(lost, g)
			}
		}
	}
	f.metrics.moves.Add(float64(len(lost)))
	f.log.Info("fleet view changed", "live", live, "before", old, "epoch", epoch, "groups_lost", len(lost))
	if f.o.OnLose != nil {
		slices.Sort(lost)
		for _, g := range lost {
			f.o.OnLose(g)
		}
	}
}

// within reports whether t, a monotonic reading, is set and less than a Lease before now.
func (f *Fleet) within(t, now time.Time) bool { return !t.IsZero() && now.Sub(t) < f.o.Lease }

// selfLive reports whether this replica counts itself at now (f.mu held): its own lease
// was renewed within the last Lease, and a poll that started within the last Lease read
// every peer's lease. A replica that cannot read its peers' leases (S3 SlowDown, a policy
// without GetObject) would otherwise judge them dead a Lease later and coordinate their
// groups, while they, seeing its lease renewed, go on coordinating them too.
func (f *Fleet) selfLive(now time.Time) bool {
	return f.within(f.selfOK, now) && f.within(f.readOK, now)
}

// current is the live set as of now (f.mu held): the last poll's view, without this
// replica once it no longer counts itself (selfLive). The view is only recomputed at
// polls; a replica paused past its lease (SIGSTOP, a stalled VM) or whose polls hang must
// not go on coordinating the groups its peers have taken over in the meantime.
func (f *Fleet) current(now time.Time) []string {
	if f.alone || f.selfLive(now) || !slices.Contains(f.live, f.self) {
		return f.live
	}
	return slices.DeleteFunc(slices.Clone(f.live), func(a string) bool { return a == f.self })
}

// Live returns the live replicas, sorted by address, and the view's epoch (incremented on
// every change of the live set).
func (f *Fleet) Live() ([]Member, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	live := f.current(time.Now())
	out := make([]Member, len(live))
	for i, a := range live {
		out[i] = Member{Addr: a, NodeID: NodeID(a), Self: a == f.self}
	}
	return out, f.epoch
}

// Changed returns a channel closed at the next change of the live set.
func (f *Fleet) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Owner returns the member that coordinates group: the live replica with the highest
// rendezvous score. ok is false when no replica is live (this one does not count itself,
// and no peer's lease is fresh), or when the group is this replica's but not yet
// claimable: the group has no coordinator.
func (f *Fleet) Owner(group string) (m Member, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	a, ok := Rendezvous(f.current(now), group)
	if !ok || a == f.self && !f.claimable(now) {
		return Member{}, false
	}
	return Member{Addr: a, NodeID: NodeID(a), Self: a == f.self}, true
}

// claimable reports whether this replica may coordinate the groups it wins at now (f.mu
// held): alone, or a Lease after its lease became visible (visible). A replica that joins,
// or comes back after its lease lapsed, wins groups its peers coordinate until they next
// read its lease (a poll Interval later, or up to a Lease when their reads are slow or
// failing, after which they stop counting themselves): claimed at once, a group would
// have two coordinators meanwhile, each accepting its members' joins and commits, and the
// stale one's commits would roll back the other's. A Lease after the lease is visible,
// every peer has either read it (and handed the group over) or stopped coordinating.
// Until then the group has no coordinator (clients are answered COORDINATOR_NOT_AVAILABLE
// and retry).
func (f *Fleet) claimable(now time.Time) bool {
	return f.alone || !f.visible.IsZero() && now.Sub(f.visible) >= f.o.Lease
}

// Owns reports whether this replica coordinates group now.
func (f *Fleet) Owns(group string) bool {
	m, ok := f.Owner(group)
	return ok && m.Self
}

// ErrNoCoordinator: no replica of the fleet is live in this replica's view (its own lease
// could not be written, or its peers' leases could not be read, for a lease length, and no
// peer's is fresh). Clients are answered COORDINATOR_NOT_AVAILABLE and retry.
var ErrNoCoordinator = errors.New("no live fetch replica may coordinate the group now (this replica's lease is not renewed or its peers' leases are not read, and no peer's is fresh; or the group is this replica's, whose lease became visible to its peers less than fetch.peer_lease ago)")

// Coordinator implements groups.Ring: the node that coordinates group and whether it is
// this replica.
func (f *Fleet) Coordinator(group string) (groups.Node, bool, error) {
	m, ok := f.Owner(group)
	if !ok {
		return groups.Node{}, false, ErrNoCoordinator
	}
	return groups.Node{ID: m.NodeID, Host: m.Host(), Port: m.Port()}, m.Self, nil
}

// Rendezvous returns the member of members with the highest score for key (highest random
// weight hashing); ties, which need a 64-bit collision, go to the smaller address.
func Rendezvous(members []string, key string) (string, bool) {
	var best string
	var bestScore uint64
	found := false
	for _, m := range members {
		s := score(m, key)
		if !found || s > bestScore || (s == bestScore && m < best) {
			best, bestScore, found = m, s, true
		}
	}
	return best, found
}

// score is FNV-1a over member, a zero byte and key, finished with splitmix64's mixer so
// that members with similar addresses get independent scores.
func score(member, key string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, member)
	_, _ = h.Write([]byte{0})
	_, _ = io.WriteString(h, key)
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

type metrics struct {
	moves    prometheus.Counter
	live     prometheus.Gauge
	changes  prometheus.Counter
	renewals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		live: promreg.RegisterOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tiered_fetch_fleet_live_replicas", Help: "Fetch replicas this one sees alive (itself included) in the fleet's last view."})),
		moves: promreg.RegisterOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_fleet_group_moves_total", Help: "Groups this replica coordinated and handed to another replica (or to none) on a change of the live set."})),
		changes: promreg.RegisterOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tiered_fetch_fleet_view_changes_total", Help: "Changes of the live replica set: each may move groups to another coordinator."})),
		renewals: promreg.RegisterOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_fleet_lease_renewals_total", Help: "Writes of this replica's lease object, by result (ok, error)."}, []string{"result"})),
	}
	for _, r := range []string{"ok", "error"} {
		m.renewals.WithLabelValues(r)
	}
	return m
}
