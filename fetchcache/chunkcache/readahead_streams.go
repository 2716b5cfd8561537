package chunkcache

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// Stream read-ahead (objstore.ReadAheader). A RemoteLog names each of its
// sequential readers by a stream id and, after every read, hands the cache
// the window of the partition it wants cached next, across segment
// boundaries. The cache loads what of the window is neither cached nor
// loading, in order, in runs (one GET each), with two limits that share it
// among the streams active in the last StreamIdle:
//
//   - in flight: a stream's read-ahead loads hold at most its fair share,
//     MaxInFlightBytes / active streams (at least one chunk), so the first
//     readers cannot take the budget from the others: a stream at or over
//     its share claims nothing until its loads end, and the capacity they
//     free goes to the streams under theirs;
//   - depth: a stream's window is cut at MemoryBytes / (2 × active streams)
//     (at least one chunk), so read-ahead of many streams does not evict
//     itself before its readers get there.
//
// Like all read-ahead it never waits: a run is admitted (its bytes and a
// GET) before ReadAhead returns, only when free (it yields to clients
// waiting), and what it says covered is what is cached or loading. A
// window it could not take all of for want of capacity (the gates, or the
// stream's share) is held, not dropped: whatever frees capacity (a GET's
// end, a chunk reaching memory or the disk tier, a stream's load giving
// its share back) wakes the kicker, which offers it to the held windows,
// the least covered first (kickAhead), so the store stays busy while the
// readers are busy with what they were sent, and the stream furthest
// behind is served first. A
// stream's next request replaces its held window; one idle past StreamIdle
// is forgotten.
// Range reads marked with
// objstore.WithCallerReadAhead (the RemoteLog's own) get no per-object
// read-ahead of their own besides.

// DefaultStreamIdle is how long a stream counts as active after its last
// read-ahead request.
const DefaultStreamIdle = 2 * time.Second

// raStream is one stream's read-ahead state.
type raStream struct {
	inFlight int64 // bytes of its read-ahead loads not yet settled
	seen     time.Time
	// held is the stream's last window while part of it is held back for
	// want of capacity (the gates, or its share): it is tried again as
	// loads end (kickAhead), not only at its reader's next read. nil
	// when the last try covered all it could.
	held []objstore.Range
	// heldCovered is how much of held, from its start, was covered at its
	// last try: the retries serve the least covered first.
	heldCovered int64
	heldGen     uint64 // bumped by each window the reader asks for
}

// raStreams tracks the streams that asked for read-ahead.
type raStreams struct {
	mu     sync.Mutex
	m      map[uint64]*raStream
	idle   time.Duration
	max    int // bound on tracked streams
	now    func() time.Time
	active int       // streams seen within idle, as of the last sweep and since
	swept  time.Time // the last sweep
	// held are the streams with a window held back (raStream.held).
	held map[uint64]*raStream
	// anyHeld mirrors len(held) > 0 for a lock-free look on every load's end.
	anyHeld atomic.Bool
}

func newRAStreams(idle time.Duration, max int) *raStreams {
	return &raStreams{m: map[uint64]*raStream{}, held: map[uint64]*raStream{}, idle: idle, max: max, now: time.Now}
}

// touch marks stream as active and returns its state and the number of
// active streams (it included). Every idle/16 a sweep recounts them and
// forgets the streams idle longer than StreamIdle with nothing in flight,
// so a call costs a map lookup, not a walk of every stream. Past max
// tracked streams a new one is not tracked (nil): it gets no read-ahead
// until others age out.
func (s *raStreams) touch(stream uint64) (*raStream, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.swept) >= s.idle/16 {
		s.swept, s.active = now, 0
		for id, st := range s.m {
			switch {
			case now.Sub(st.seen) <= s.idle:
				s.active++
			case st.inFlight == 0:
				delete(s.m, id)
				s.unhold(id, st)
			}
		}
	}
	st, ok := s.m[stream]
	switch {
	case !ok && len(s.m) >= s.max:
		return nil, max(s.active, 1)
	case !ok:
		st = &raStream{}
		s.m[stream] = st
		s.active++
	case st.seen.Before(s.swept.Add(-s.idle)):
		s.active++ // not counted by the last sweep: active again
	}
	st.seen = now
	return st, max(s.active, 1)
}

// hold records the outcome of a try of window for stream st: held back
// (part of it left for want of capacity) or not. A retry's outcome (gen
// the generation it tried) is dropped when the reader has asked for a new
// window since.
func (s *raStreams) hold(id uint64, st *raStream, window []objstore.Range, covered int64, held, retry bool, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if retry && (st.heldGen != gen || st.held == nil) {
		return
	}
	if !retry {
		st.heldGen++
	}
	if !held {
		s.unhold(id, st)
		return
	}
	if !retry {
		window = append([]objstore.Range(nil), window...) // the caller's
	}
	st.held, st.heldCovered = window, covered
	s.held[id] = st
	s.anyHeld.Store(true)
}

// unhold forgets stream id's held window; s.mu is held.
func (s *raStreams) unhold(id uint64, st *raStream) {
	st.held = nil
	if s.held[id] == st {
		delete(s.held, id)
	}
	s.anyHeld.Store(len(s.held) > 0)
}

// heldTry is a held window to try again.
type heldTry struct {
	id      uint64
	st      *raStream
	window  []objstore.Range
	covered int64
	gen     uint64
}

// heldByLag appends to tries the held windows of the streams still
// active, the least covered first (the reader nearest to waiting for the
// store), and returns the number of active streams; it forgets those idle
// past StreamIdle.
func (s *raStreams) heldByLag(tries []heldTry) ([]heldTry, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, st := range s.held {
		if now.Sub(st.seen) > s.idle {
			s.unhold(id, st)
			continue
		}
		tries = append(tries, heldTry{id, st, st.held, st.heldCovered, st.heldGen})
	}
	slices.SortFunc(tries, func(a, b heldTry) int { return cmp.Compare(a.covered, b.covered) })
	return tries, max(s.active, 1)
}

// overShare reports whether the stream's loads in flight leave no room
// for w more bytes within share (take would refuse them).
func (s *raStreams) overShare(st *raStream, w, share int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.overShare(w, share)
}

// overShare: no room for w more bytes within share, though a stream with
// nothing in flight always has room for one run; s.mu is held.
func (st *raStream) overShare(w, share int64) bool {
	return st.inFlight > 0 && st.inFlight+w > share
}

// take adds w to the stream's in-flight bytes if that keeps them within
// share, or if nothing of it is in flight (a stream always progresses by
// at least one run).
func (s *raStreams) take(st *raStream, w, share int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.overShare(w, share) {
		return false
	}
	st.inFlight += w
	return true
}

func (s *raStreams) give(st *raStream, w int64) {
	s.mu.Lock()
	st.inFlight -= w
	s.mu.Unlock()
}

// aheadRun is a claimed read-ahead run and its object's size.
type aheadRun struct {
	loadRun
	size, weight int64
	from         int64 // the window bytes covered before it
}

// ReadAhead loads the window a stream's reader will read next, within the
// stream's fair share (objstore.ReadAheader; see above), and returns how
// many bytes of the window, from its start, are cached, loading or now
// claimed. It never blocks. What it holds back for want of capacity is
// tried again as loads end (kickAhead).
func (c *CachingBucket) ReadAhead(stream uint64, window []objstore.Range) int64 {
	if c.o.ReadAheadChunks <= 0 || len(window) == 0 || c.isClosed() {
		return 0
	}
	st, active := c.streams.touch(stream)
	if st == nil {
		return 0
	}
	covered, held, _ := c.readAheadOnce(st, active, window)
	c.streams.hold(stream, st, window, covered, held, false, 0)
	if held {
		// Capacity freed before the window was held found nothing to
		// kick: the kicker looks once itself.
		c.kickAhead()
	}
	return covered
}

// readAheadOnce claims and starts what it can of stream st's window (see
// ReadAhead): covered as there; held when part of the window within the
// stream's depth was left for want of capacity, blocked when that was the
// gates' (not the stream's share).
func (c *CachingBucket) readAheadOnce(st *raStream, active int, window []objstore.Range) (covered int64, held, blocked bool) {
	share := c.aheadShare(active)
	depth := max(c.o.ChunkBytes, c.mem.bound()/int64(2*active)) // less under memory pressure
	runs, covered, full := c.claimAhead(window, depth, share)
	for i, r := range runs {
		// Admitted here, not in the load, so that what is said covered
		// is loading: a run the gates cannot take now, and the runs
		// after it, are given up, and tried again when a load ends or
		// the reader asks again.
		if ok, gates := c.admitAhead(st, r, share); !ok {
			for _, rest := range runs[i:] {
				c.settleRun(rest.loadRun, 0, errReadAheadSkipped)
			}
			return min(covered, r.from), true, gates
		}
		r.held = true
		if !c.goLoad([]loadRun{r.loadRun}, func() {
			c.load(r.loadRun, r.size, time.Time{}, true)
			c.streams.give(st, r.weight)
			c.kickAhead() // its share is free again
		}) {
			c.gets.Done(1) // closed: goLoad settled the run
			c.bytes.Done(r.weight)
			c.streams.give(st, r.weight)
		}
	}
	return covered, full, false
}

// kickAhead asks the kicker to try the held windows again: called
// wherever capacity is freed (a GET's slot, a chunk's bytes, a stream's
// share), it costs an atomic load when nothing is held and never blocks.
func (c *CachingBucket) kickAhead() {
	if !c.streams.anyHeld.Load() {
		return
	}
	select {
	case c.kickCh <- struct{}{}:
	default: // a kick is pending: it sees this capacity too
	}
}

// kicker runs the kicks, one at a time, off the paths that free capacity
// (clients among them), until Close.
func (c *CachingBucket) kicker() {
	var tries []heldTry // reused: a kick may run on every chunk's arrival
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kickCh:
			tries = c.kickHeld(tries[:0])
			clear(tries) // no window kept alive until the next kick
		}
	}
}

// kickHeld tries the held windows again, the least covered first, until
// the gates turn one away, so the capacity freed goes to the streams that
// got the least while their readers are still busy with what they were
// sent, instead of waiting for their next read. A stream whose own loads
// fill its share is passed over: its loads' end kicks again. It lists the
// windows in buf, which it returns for the next kick.
func (c *CachingBucket) kickHeld(buf []heldTry) []heldTry {
	tries, active := c.streams.heldByLag(buf)
	share := c.aheadShare(active)
	for _, t := range tries {
		if c.isClosed() {
			break
		}
		if c.streams.overShare(t.st, c.o.ChunkBytes, share) {
			continue
		}
		covered, held, blocked := c.readAheadOnce(t.st, active, t.window)
		c.streams.hold(t.id, t.st, t.window, covered, held, true, t.gen)
		if blocked {
			break // the next release kicks again
		}
	}
	return tries
}

// aheadShare is a stream's share of the in-flight budget among active
// streams: at least one chunk.
func (c *CachingBucket) aheadShare(active int) int64 {
	return max(c.o.ChunkBytes, c.o.MaxInFlightBytes/int64(active))
}

// admitAhead takes run r's place in the stream's share, its bytes weight
// and a gets slot, all only if free now; false (nothing taken) otherwise.
// gates says whether it was the gates, not the share, that turned it away.
func (c *CachingBucket) admitAhead(st *raStream, r aheadRun, share int64) (ok, gates bool) {
	if !c.streams.take(st, r.weight, share) {
		return false, false
	}
	if !c.bytes.TryStart(r.weight) {
		c.streams.give(st, r.weight)
		return false, true
	}
	if !c.gets.TryStart(1) {
		c.bytes.Done(r.weight)
		c.streams.give(st, r.weight)
		return false, true
	}
	return true, false
}

// aheadRunChunks is the run length (chunks per GET) of a stream's
// read-ahead with a share of budget bytes: small enough that the share
// keeps aheadGETs GETs in flight (the store's parallelism is what a lone
// replay lacks; one GET of a whole share would load it one stream wide),
// at least one chunk and at most maxRunChunks.
func (c *CachingBucket) aheadRunChunks(budget int64) int {
	return int(min(max(budget/c.o.ChunkBytes/aheadGETs, 1), int64(c.maxRunChunks())))
}

// aheadGETs is the number of GETs a stream's share of the in-flight budget
// is cut into.
const aheadGETs = 8

// claimAhead claims, in window order, the chunks of window that are
// neither cached nor loading, in runs of consecutive chunks of one object
// (aheadRunChunks), until depth bytes of the window are covered or budget
// bytes are claimed, and says how many bytes of the window, from its
// start, are cached, loading or claimed. A run the window's end cuts short inside an object is
// left for a later call unless it starts in the near half of the window:
// the window moves on by about one read per call, so claiming every chunk
// as it enters would load a stream one chunk (one GET) at a time. full
// says it stopped at budget with more of the window within depth to claim.
func (c *CachingBucket) claimAhead(window []objstore.Range, depth, budget int64) (runs []aheadRun, covered int64, full bool) {
	cs := c.o.ChunkBytes
	splitRun := c.aheadRunChunks(budget)
	maxRun := splitRun // of the object being claimed
	var cur aheadRun
	var claimed, curStart, total int64
	for _, rg := range window {
		total += max(rg.Len, 0)
	}
	depth = min(depth, total)
	flush := func() {
		if len(cur.keys) > 0 {
			for _, k := range cur.keys {
				f := &flight{done: make(chan struct{})}
				c.flights[k] = f
				cur.flights = append(cur.flights, f)
			}
			runs = append(runs, cur)
			claimed += cur.weight
		}
		cur = aheadRun{}
	}
	// cut ends the claims at the window's end, inside an object.
	cut := func() ([]aheadRun, int64, bool) {
		if len(cur.keys) < maxRun && 2*curStart >= depth {
			covered = cur.from
			cur = aheadRun{}
		}
		flush()
		return runs, covered, false
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	var at int64 // window bytes before rg
	for j, rg := range window {
		start := at
		at += max(rg.Len, 0)
		if rg.Off < 0 || rg.Len <= 0 || rg.Off >= rg.Size {
			return runs, covered, false
		}
		c.HintSize(rg.Key, rg.Size)
		attrs, ok := c.attrs.Get(rg.Key)
		if !ok || rg.Off >= attrs.Size {
			return runs, covered, false
		}
		ver := objectVersion(attrs)
		first, last := rg.Off/cs, (min(rg.Off+rg.Len, attrs.Size)-1)/cs
		// An object that one GET can load whole is loaded so (a
		// sequential reader reads it all): one GET per segment.
		// Its first run may also go past the stream's share (a stream
		// with nothing in flight is admitted one run whatever its share):
		// a share smaller than a segment would otherwise load every
		// segment of many streams by several GETs.
		maxRun = splitRun
		whole := (attrs.Size+cs-1)/cs <= int64(c.maxRunChunks())
		if whole {
			maxRun = c.maxRunChunks()
		}
		for i := first; i <= last; i++ {
			// The chunk's start and end, as window bytes.
			pos := start + max(i*cs, rg.Off) - rg.Off
			end := start + min((i+1)*cs, rg.Off+rg.Len) - rg.Off
			if pos >= depth {
				return cut()
			}
			if claimed+cur.weight >= budget && !(whole && len(runs) == 0 && len(cur.keys) > 0 && len(cur.keys) < maxRun) {
				flush()
				return runs, covered, true // the stream's share is claimed
			}
			k := chunkKey{rg.Key, ver, i}
			if _, loading := c.flights[k]; loading || c.mem.contains(k) {
				flush()
				covered = end
				continue
			}
			if f, ok := c.flights[chunkKey{rg.Key, ver, i - 1}]; ok && f.parks && len(cur.keys) == 0 {
				// The stream's own read of the chunk before is a GET to
				// the object's end: the next call continues it.
				return runs, covered, false
			}
			if len(cur.keys) == maxRun {
				flush()
			}
			if len(cur.keys) == 0 {
				curStart, cur.from = pos, covered
			}
			cur.keys = append(cur.keys, k)
			cur.size, cur.weight = attrs.Size, cur.weight+chunkLen(i, cs, attrs.Size)
			covered = end
		}
		if j == len(window)-1 && (last+1)*cs < attrs.Size {
			return cut() // the caller's window ends inside the object
		}
		flush()
	}
	flush()
	return runs, covered, false
}
