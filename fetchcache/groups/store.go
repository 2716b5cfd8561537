package groups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/flight"

	"golang.org/x/sync/singleflight"

	"github.com/tiered/tiered/remotetier/objstore"
)

// ErrUnavailable is a group store that cannot write: the bucket was opened
// read-only or refused a PUT (ErrReadOnly, ErrAccessDenied). The group APIs
// answer COORDINATOR_NOT_AVAILABLE.
var ErrUnavailable = errors.New("group store unavailable: the bucket refuses writes to " + KeyPrefix)

// ErrConflict is an update that lost its conditional PUT MaxUpdateAttempts
// times in a row: another coordinator keeps writing the group.
var ErrConflict = errors.New("group object kept changing under a conditional write")

// MaxUpdateAttempts bounds the read-modify-write retries of one Update.
const MaxUpdateAttempts = 4

// DefaultReadOnlyRecheck is how often a coordinator whose store saw a PUT
// refused probes again whether the bucket takes writes (Coordinator.Run).
const DefaultReadOnlyRecheck = time.Minute

// ProbeKey is the key of the write probe: a PUT conditional on an ETag no
// object has, so it never writes (Probe).
const ProbeKey = KeyPrefix + "write-probe"

// probeETag is the impossible ETag of the probe's condition.
const probeETag = `"tiered-write-probe-never-matches"`

// StoreOptions configure NewStore.
type StoreOptions struct {
	// ReadOnly: the bucket was opened read-only; every Update is
	// ErrUnavailable and nothing is sent.
	ReadOnly bool
	// ReadOnlyRecheck is how often Run re-probes a store that saw a PUT
	// refused (DefaultReadOnlyRecheck).
	ReadOnlyRecheck time.Duration
	Now             func() time.Time
	Metrics         *Metrics
	Logger          *slog.Logger
}

// Store keeps the group objects of a bucket: one object per group at
// Key(group), written only with a conditional PUT (IfAbsent for a new
// object, IfMatch of the version read otherwise), so two coordinators can
// never overwrite each other's writes. It caches each object with its ETag;
// Load answers from the cache, Reload re-reads, and Update is one PUT
// unless it loses a race (then it re-reads and re-applies).
type Store struct {
	loads singleflight.Group // concurrent Loads of one uncached group
	b     objstore.Bucket
	o     StoreOptions
	log   *slog.Logger
	m     *Metrics

	mu      sync.Mutex
	cache   map[string]*cached
	forgets uint64                 // Forgets so far (of any group)
	locks   map[string]*sync.Mutex // one Update at a time per group
	refused time.Time              // last refused PUT (zero: none)
}

type cached struct {
	obj  *Object // nil: no object in the bucket
	etag string
}

// NewStore returns the store of b's groups/ prefix.
func NewStore(b objstore.Bucket, o StoreOptions) *Store {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadOnlyRecheck <= 0 {
		o.ReadOnlyRecheck = DefaultReadOnlyRecheck
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Store{b: b, o: o, log: o.Logger, m: o.Metrics, cache: map[string]*cached{}, locks: map[string]*sync.Mutex{}}
}

// Writable reports whether the store can write: not opened read-only, and
// no PUT refused since the last successful write or Probe.
func (s *Store) Writable() bool {
	if s.o.ReadOnly {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused.IsZero()
}

// Probe finds out whether the bucket takes writes under groups/ without
// writing anything: a PUT of ProbeKey conditional on an ETag no object has.
// A store that may write loses the precondition (412, or 404 for a missing
// key); credentials that may only read get 403 AccessDenied, a bucket
// opened read-only ErrReadOnly: the store is then unavailable (the group
// APIs answer COORDINATOR_NOT_AVAILABLE) until a later Probe succeeds. Any
// other error leaves the state as it was and is returned.
func (s *Store) Probe(ctx context.Context) error {
	if s.o.ReadOnly {
		return ErrUnavailable
	}
	_, err := s.b.Put(ctx, ProbeKey, bytes.NewReader(nil), 0, objstore.IfMatch(probeETag))
	switch {
	case err == nil:
		// A store that ignores conditions wrote an empty object: it
		// takes writes (and cannot be trusted with two coordinators).
		s.log.Warn("the bucket ignored a conditional PUT (If-Match): two coordinators of a group could overwrite each other", "key", ProbeKey)
	case objstore.IsPreconditionFailed(err), objstore.IsNotFound(err):
	case errors.Is(err, objstore.ErrReadOnly) || errors.Is(err, objstore.ErrAccessDenied):
		s.mu.Lock()
		first := s.refused.IsZero()
		s.refused = s.o.Now()
		s.mu.Unlock()
		if first {
			s.log.Warn("the bucket refuses writes to "+KeyPrefix+": consumer groups unavailable (COORDINATOR_NOT_AVAILABLE); every read is served", "err", err)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	default:
		return fmt.Errorf("probe group writes: %w", err)
	}
	s.mu.Lock()
	s.refused = time.Time{}
	s.mu.Unlock()
	return nil
}

// loadTimeout bounds a read of a group object that concurrent Loads share
// (it runs detached from their cancellation).
const loadTimeout = 30 * time.Second

// Load is group's object, from the cache when it holds one, else read from
// the bucket. A group with no object (or a Dead one) is nil, nil.
func (s *Store) Load(ctx context.Context, group string) (*Object, error) {
	s.mu.Lock()
	c, ok := s.cache[group]
	s.mu.Unlock()
	if ok {
		return live(c.obj), nil
	}
	// The first members of a group often join at once: one read for all.
	c, err := flight.Do(ctx, &s.loads, group, loadTimeout, func(ctx context.Context) (*cached, error) { return s.read(ctx, group) })
	if err != nil {
		return nil, err
	}
	return live(c.obj), nil
}

// Reload re-reads group's object from the bucket (another writer — a
// takeover, `tiered groups reset-offsets` — may have changed it).
func (s *Store) Reload(ctx context.Context, group string) (*Object, error) {
	c, err := s.read(ctx, group)
	if err != nil {
		return nil, err
	}
	return live(c.obj), nil
}

// Cached lists the groups whose objects the cache holds.
func (s *Store) Cached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.cache))
	for g := range s.cache {
		out = append(out, g)
	}
	return out
}

// Forget drops group from the cache: the next Load reads the bucket. A
// read or write under way keeps what it got out of the cache too.
func (s *Store) Forget(group string) {
	s.mu.Lock()
	delete(s.cache, group)
	s.forgets++
	s.mu.Unlock()
}

// live hides a Dead object (a deleted or expired group) as no object; the
// caller gets a copy it may keep.
func live(o *Object) *Object {
	if o == nil || o.State == StateDead {
		return nil
	}
	return o.clone()
}

func (s *Store) read(ctx context.Context, group string) (*cached, error) {
	key := Key(group)
	s.mu.Lock()
	before, forgets := s.cache[group], s.forgets
	s.mu.Unlock()
	rc, attrs, err := objstore.GetWithAttrs(ctx, s.b, key)
	var c cached
	switch {
	case objstore.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("read group %q: %w", group, err)
	default:
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read group %q: %w", group, err)
		}
		if c.obj, err = Decode(key, data); err != nil {
			return nil, err
		}
		c.etag = attrs.ETag
	}
	s.mu.Lock()
	// A write (Update) or another read that changed the cache while this
	// read was under way may hold a newer version than the one read: it
	// stays (the caller still gets what it read). After a Forget meanwhile
	// (the group may have moved to another coordinator) nothing is kept.
	if s.cache[group] == before && s.forgets == forgets {
		s.cache[group] = &c
	}
	s.mu.Unlock()
	return &c, nil
}

// Update applies fn to a copy of group's object (a new, empty one when the
// group has none: State Empty, no offsets) and writes the result with a
// conditional PUT; the object is durable in the bucket when Update returns
// nil. fn can tell a new object by its UpdatedMS of 0. fn may be called again, on a freshly read object, when another
// writer won the race; an error from fn is returned unchanged and nothing
// is written. It returns the object written.
func (s *Store) Update(ctx context.Context, group string, fn func(*Object) error) (*Object, error) {
	if !s.Writable() {
		return nil, ErrUnavailable
	}
	lock := s.lockOf(group)
	lock.Lock()
	defer lock.Unlock()
	s.mu.Lock()
	forgets := s.forgets
	s.mu.Unlock()
	for attempt := 0; attempt < MaxUpdateAttempts; attempt++ {
		s.mu.Lock()
		c, ok := s.cache[group]
		s.mu.Unlock()
		if !ok || attempt > 0 {
			var err error
			if c, err = s.read(ctx, group); err != nil {
				return nil, err
			}
		}
		var next *Object
		if c.obj != nil && c.obj.State != StateDead {
			next = c.obj.clone()
		} else {
			next = &Object{Format: FormatVersion, Group: group, State: StateEmpty, Offsets: []Offset{}}
			if c.obj != nil {
				next.Generation = c.obj.Generation // a re-created group keeps numbering up
			}
		}
		if err := fn(next); err != nil {
			return nil, err
		}
		next.Format, next.Group, next.UpdatedMS = FormatVersion, group, s.o.Now().UnixMilli()
		data, err := next.Encode()
		if err != nil {
			return nil, err
		}
		cond := objstore.IfAbsent()
		if c.obj != nil {
			cond = objstore.IfMatch(c.etag)
		}
		start := time.Now()
		attrs, err := s.b.Put(ctx, Key(group), bytes.NewReader(data), int64(len(data)), cond)
		s.m.observePut(err, time.Since(start))
		switch {
		case err == nil:
			s.mu.Lock()
			if s.forgets == forgets {
				s.cache[group] = &cached{obj: next, etag: attrs.ETag}
			} else {
				// Forgotten while under way (the group may have moved to
				// another coordinator): the next Load reads the bucket.
				delete(s.cache, group)
			}
			s.refused = time.Time{}
			s.mu.Unlock()
			return next.clone(), nil
		case objstore.IsPreconditionFailed(err):
			s.log.Info("group object changed by another writer; re-reading", "group", group, "attempt", attempt+1)
			continue
		case errors.Is(err, objstore.ErrReadOnly) || errors.Is(err, objstore.ErrAccessDenied):
			s.mu.Lock()
			s.refused = s.o.Now()
			s.mu.Unlock()
			s.log.Warn("bucket refused a group write; group APIs answer COORDINATOR_NOT_AVAILABLE until a probe succeeds", "group", group, "recheck", s.o.ReadOnlyRecheck, "err", err)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		default:
			s.Forget(group) // the write may or may not have landed
			return nil, fmt.Errorf("write group %q: %w", group, err)
		}
	}
	s.Forget(group)
	return nil, fmt.Errorf("write group %q: %w", group, ErrConflict)
}

// DeleteOffsets removes group's committed offsets that del selects: the
// write of OffsetDelete (the Kafka listener's, through the coordinator)
// and of `tiered groups delete --topic`. check, when not nil, runs first
// on the object the write replaces (after every re-read); an error from it
// is returned unchanged and nothing is written. When del selects no offset
// nothing is written either. It returns the offsets removed, sorted; a
// group with no object (or a Dead one) has none to remove.
func (s *Store) DeleteOffsets(ctx context.Context, group string, del func(Offset) bool, check func(*Object) error) ([]Offset, error) {
	var removed []Offset
	_, err := s.Update(ctx, group, func(o *Object) error {
		if check != nil {
			if err := check(o); err != nil {
				return err
			}
		}
		if removed = o.removeOffsets(del); len(removed) == 0 {
			return errNothingToDelete // nothing written
		}
		return nil
	})
	if errors.Is(err, errNothingToDelete) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return removed, nil
}

// errNothingToDelete ends a DeleteOffsets update that removed no offset:
// the object is not written again (a PUT) for nothing.
var errNothingToDelete = errors.New("no offset to delete")

func (s *Store) lockOf(group string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[group]
	if !ok {
		l = &sync.Mutex{}
		s.locks[group] = l
	}
	return l
}

// Listed is one group object as List finds it.
type Listed struct {
	Group        string
	LastModified time.Time
}

// List calls fn for every group object in the bucket (Dead ones too: a
// LIST does not read them), in key order. Keys under groups/ that are not
// group keys are skipped.
func (s *Store) List(ctx context.Context, fn func(Listed) error) error {
	return s.b.List(ctx, KeyPrefix, func(info objstore.ObjectInfo) error {
		if strings.HasPrefix(info.Key, FleetPrefix) {
			return nil // the fetch fleet's leases (docs/format/fleet.md), not groups
		}
		g, err := GroupOfKey(info.Key)
		if err != nil {
			s.log.Warn("foreign key under groups/ skipped", "key", info.Key, "err", err)
			return nil
		}
		return fn(Listed{Group: g, LastModified: info.LastModified})
	})
}
