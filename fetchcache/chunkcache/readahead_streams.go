package chunkcache

import (
	"sync"
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
// waiting), and what it says covered is what is cached or loading; the
// runs the gates cannot take are given up, for the reader to ask again.
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
}

func newRAStreams(idle time.Duration, max int) *raStreams {
	return &raStreams{m: map[uint64]*raStream{}, idle: idle, max: max, now: time.Now}
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

// take adds w to the stream's in-flight bytes if that keeps them within
// share, or if nothing of it is in flight (a stream always progresses by
// at least one run).
func (s *raStreams) take(st *raStream, w, share int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.inFlight > 0 && st.inFlight+w > share {
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
// claimed. It never blocks.
func (c *CachingBucket) ReadAhead(stream uint64, window []objstore.Range) int64 {
	if c.o.ReadAheadChunks <= 0 || len(window) == 0 || c.isClosed() {
		return 0
	}
	st, active := c.streams.touch(stream)
	if st == nil {
		return 0
	}
	share := max(c.o.ChunkBytes, c.o.MaxInFlightBytes/int64(active))
	depth := max(c.o.ChunkBytes, c.mem.bound()/int64(2*active)) // less under memory pressure
	runs, covered := c.claimAhead(window, depth, share)
	for i, r := range runs {
		// Admitted here, not in the load, so that what is said covered
		// is loading: a run the gates cannot take now, and the runs
		// after it, are given up, and the reader asks for them again.
		if !c.admitAhead(st, r, share) {
			for _, rest := range runs[i:] {
				c.settleRun(rest.loadRun, 0, errReadAheadSkipped)
			}
			return min(covered, r.from)
		}
		r.held = true
		if !c.goLoad([]loadRun{r.loadRun}, func() {
			defer c.streams.give(st, r.weight)
			c.load(r.loadRun, r.size, time.Time{}, true)
		}) {
			c.gets.Done(1) // closed: goLoad settled the run
			c.bytes.Done(r.weight)
			c.streams.give(st, r.weight)
		}
	}
	return covered
}

// admitAhead takes run r's place in the stream's share, its bytes weight
// and a gets slot, all only if free now; false (nothing taken) otherwise.
func (c *CachingBucket) admitAhead(st *raStream, r aheadRun, share int64) bool {
	if !c.streams.take(st, r.weight, share) {
		return false
	}
	if !c.bytes.TryStart(r.weight) {
		c.streams.give(st, r.weight)
		return false
	}
	if !c.gets.TryStart(1) {
		c.bytes.Done(r.weight)
		c.streams.give(st, r.weight)
		return false
	}
	return true
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
// as it enters would load a stream one chunk (one GET) at a time.
func (c *CachingBucket) claimAhead(window []objstore.Range, depth, budget int64) (runs []aheadRun, covered int64) {
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
	cut := func() ([]aheadRun, int64) {
		if len(cur.keys) < maxRun && 2*curStart >= depth {
			covered = cur.from
			cur = aheadRun{}
		}
		flush()
		return runs, covered
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	var at int64 // window bytes before rg
	for j, rg := range window {
		start := at
		at += max(rg.Len, 0)
		if rg.Off < 0 || rg.Len <= 0 || rg.Off >= rg.Size {
			return runs, covered
		}
		c.HintSize(rg.Key, rg.Size)
		attrs, ok := c.attrs.Get(rg.Key)
		if !ok || rg.Off >= attrs.Size {
			return runs, covered
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
			if claimed+cur.weight >= budget && !(whole && len(runs) == 0 && len(cur.keys) > 0 && len(cur.keys) < maxRun) {
				flush()
				return runs, covered
			}
			// The chunk's start and end, as window bytes.
			pos := start + max(i*cs, rg.Off) - rg.Off
			end := start + min((i+1)*cs, rg.Off+rg.Len) - rg.Off
			if pos >= depth {
				return cut()
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
				return runs, covered
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
	return runs, covered
}
