package chunkcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/remotetier/objstore"
)

// Chunk loads. Every chunk being brought into memory has one flight in
// CachingBucket.flights; whoever needs the chunk meanwhile (a client or
// read-ahead) waits for that flight instead of starting a second GET.
//
// Loads go in runs: the consecutive chunks of one object that a request
// (or a read-ahead) claims together are fetched with one range GET and
// handed out chunk by chunk as the body arrives, so a waiter of the first
// chunk does not wait for the last, and a sequential stream costs one GET
// per run instead of one per chunk. Object stores charge a fixed cost per
// request (MinIO on the same host: about as much as reading 2 MiB), so a
// run of four chunks is close to a quarter of the requests.

// flight is one load of one chunk. done is closed once data or err is set.
type flight struct {
	done chan struct{}
	data []byte
	err  error
	// parks marks the last chunk of a stream's own read whose GET goes on
	// to the object's end: read-ahead leaves the chunks after it for the
	// next call, which finds the body parked (guarded by fmu).
	parks bool

	// While its GET reads the chunk, buf holds the bytes in so far
	// (filled of them), so that a client needing only a prefix of the
	// chunk (the last chunk of its range) is answered as soon as that
	// prefix is in, not once the whole chunk is; more is closed (and
	// dropped) when filled grows. Guarded by pmu.
	pmu    sync.Mutex
	buf    []byte
	filled int64
	more   chan struct{}
	// clientRead says a client took a prefix before the chunk was kept:
	// keep counts the chunk read (memoryTier.markRead), as for a client
	// that waited for the whole.
	clientRead atomic.Bool
}

// progress publishes that the first n bytes of buf are in. A new buf (a
// GET read again from the chunk's start) replaces the old one, which its
// takers keep: its bytes are never written again.
func (f *flight) progress(buf []byte, n int64) {
	f.pmu.Lock()
	f.buf, f.filled = buf, n
	if f.more != nil {
		close(f.more)
		f.more = nil
	}
	f.pmu.Unlock()
}

// prefix waits until at least need bytes of the chunk are in and returns
// them (ok), or until the flight ends first (not ok: the caller takes its
// outcome) or ctx does.
func (f *flight) prefix(ctx context.Context, need int64) (data []byte, ok bool, err error) {
	for {
		f.pmu.Lock()
		if f.buf != nil && f.filled >= need {
			data = f.buf[:need:need]
			f.pmu.Unlock()
			return data, true, nil
		}
		if f.more == nil {
			f.more = make(chan struct{})
		}
		more := f.more
		f.pmu.Unlock()
		select {
		case <-more:
		case <-f.done:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// progressStep is how many bytes a chunk's GET reads between publishing
// its progress to clients waiting for a prefix.
const progressStep = 128 << 10

// loadRun is a claimed run: consecutive chunks of one object version and
// their flights, which loadRun settles.
type loadRun struct {
	keys    []chunkKey
	flights []*flight
	// held says the run's bytes weight and one gets slot were admitted
	// before its load began (stream read-ahead admits a run before it
	// says the run is covered); load uses them instead of starting its own.
	held bool
	// park says the run's reader goes on past it (a stream's read): its
	// GET asks for the object to its end and parks the rest, as a
	// read-ahead run's does (parked.go).
	park bool
	// endCheck says a partition's end check asked for the run: its GETs
	// are counted apart too.
	endCheck bool
	// asked, when set, is called once the run's load holds its GET's
	// slot, or ends without one (its reader's objstore.DemandAsked).
	asked func()
}

// maxRunChunks bounds the chunks of one run (one GET): a quarter of the
// in-flight byte budget, at least one chunk and at most eight, so a run
// always fits the bytes gate and several runs load side by side.
func (c *CachingBucket) maxRunChunks() int {
	return int(min(max(c.o.MaxInFlightBytes/c.o.ChunkBytes/4, 1), 8))
}

// claim looks at chunks [first, last] of an object version under the
// flights lock: a cached chunk is taken (client) or skipped (read-ahead),
// a chunk already loading is joined (client) or skipped (read-ahead), and
// the others get new flights, grouped into runs of consecutive chunks that
// the caller must load. For a client, waits holds the flight of every chunk
// not cached (its own and joined ones) and cached the cached bytes, both
// indexed from first. count says whether a client's lookups count as
// memory hits and misses.
func (c *CachingBucket) claim(object, version string, first, last int64, client, count bool) (runs []loadRun, waits []*flight, cached [][]byte) {
	if client {
		waits = make([]*flight, last-first+1)
		cached = make([][]byte, last-first+1)
	}
	maxRun := c.maxRunChunks()
	var cur loadRun
	flush := func() {
		if len(cur.keys) > 0 {
			runs = append(runs, cur)
			cur = loadRun{}
		}
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for i := first; i <= last; i++ {
		k := chunkKey{object, version, i}
		if client {
			if data, ok := c.mem.get(k); ok {
				if count {
					c.m.hits.WithLabelValues(TierMemory).Inc()
				}
				cached[i-first] = data
				flush()
				continue
			}
			if count {
				c.m.misses.WithLabelValues(TierMemory).Inc()
			}
		} else if c.mem.contains(k) {
			flush()
			continue
		}
		if f, ok := c.flights[k]; ok {
			if client {
				waits[i-first] = f
			}
			flush()
			continue
		}
		f := &flight{done: make(chan struct{})}
		c.flights[k] = f
		if client {
			waits[i-first] = f
		}
		if len(cur.keys) == maxRun {
			flush()
		}
		cur.keys = append(cur.keys, k)
		cur.flights = append(cur.flights, f)
	}
	flush()
	return runs, waits, cached
}

// acquire returns chunks [first, last] of an object version for a client:
// cached ones at once, the others from the loads it joins or starts (one
// GET per run, at most FetchParallelism runs of this request at a time).
// Read-ahead of the stream starts while the request's own loads go on,
// unless the caller reads ahead itself (objstore.WithCallerReadAhead).
//
// Of chunk last the caller needs only the first lastNeed bytes: a load of
// it in progress answers once they are in (flight.prefix), and that chunk
// may then be returned cut to them.
func (c *CachingBucket) acquire(ctx context.Context, object, version string, size, first, last, lastNeed int64, deadline time.Time, readAhead, endCheck bool) ([][]byte, error) {
	hook := c.testHook
	runs, waits, chunks := c.claim(object, version, first, last, true, true)
	if slices.ContainsFunc(waits, func(f *flight) bool { return f != nil }) {
		// The read waits for chunks not in memory yet (its own loads or
		// ones it joined), however it ends.
		defer c.observeWait(time.Now())
	}
	for i := range runs {
		runs[i].endCheck = endCheck
	}
	if !readAhead && len(runs) > 0 {
		// A stream's reader (it reads ahead itself) asks next for what
		// follows the request: the stream's read-ahead continues the
		// body of the request's last run.
		last := &runs[len(runs)-1]
		last.park = true
		c.fmu.Lock()
		last.flights[len(last.flights)-1].parks = c.extendsLocked(last.keys[len(last.keys)-1], size)
		c.fmu.Unlock()
	}
	// The read has asked for its bytes (objstore.DemandGroup) once a
	// load of its own holds a GET's slot (or ends without one), or at
	// once when it only joins loads or reads cached chunks: the
	// read-ahead its request held back then takes only what is left.
	if len(runs) == 0 {
		objstore.DemandAsked(ctx)
	} else if objstore.DemandOf(ctx) != nil {
		asked := sync.OnceFunc(func() { objstore.DemandAsked(ctx) })
		for i := range runs {
			runs[i].asked = asked
		}
	}
	c.goLoad(runs, func() { c.loadRuns(runs, size, deadline) })
	if readAhead {
		c.readAheadAfter(object, version, size, first, last)
	}
	var loaded []chunkKey
	for i := range waits {
		f := waits[i]
		if f == nil {
			continue // cached (also when found so by a reclaim below)
		}
		k := chunkKey{object, version, first + int64(i)}
		if hook != nil {
			hook(k)
		}
		partial := false
		for {
			if i == len(waits)-1 && lastNeed < chunkLen(k.index, c.o.ChunkBytes, size) {
				data, ok, err := f.prefix(ctx, lastNeed)
				if err != nil {
					return nil, err
				}
				if ok {
					chunks[i], partial = data, true
					break
				}
			} else {
				select {
				case <-f.done:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if !takeOver(f.err, deadline) {
				break
			}
			// Joined a read-ahead that gave up (or another client's load
			// the gates refused at that client's deadline, before this
			// one's): load its chunk as a client, together with the
			// chunks after it whose load gave up too (a skipped run ends
			// all its flights at once), so they load as runs again rather
			// than one GET per chunk, each waiting for the one before.
			end := i
			for end+1 < len(waits) && skipped(waits[end+1], deadline) {
				end++
			}
			rs, ws, cs := c.claim(object, version, k.index, first+int64(end), true, false)
			c.goLoad(rs, func() { c.loadRuns(rs, size, deadline) })
			for x := range ws {
				if cs[x] != nil {
					chunks[i+x], waits[i+x] = cs[x], nil
				} else {
					waits[i+x] = ws[x]
				}
			}
			if cs[0] != nil {
				f = nil
				break
			}
			f = ws[0]
		}
		if f == nil {
			continue // cached meanwhile: counted and touched by claim
		}
		if partial {
			// Read before it is kept: keep marks it read, or (kept
			// meanwhile) this does.
			f.clientRead.Store(true)
			c.mem.markRead(k)
			loaded = append(loaded, k) // touched now if kept, else kept after
			continue
		}
		if f.err != nil {
			return nil, f.err
		}
		chunks[i] = f.data
		c.mem.markRead(k)
		loaded = append(loaded, k)
	}
	// Loads finish in any order; make the request's chunks most recently
	// used in offset order, so eviction order is stable.
	for _, k := range loaded {
		c.mem.touch(k)
	}
	return chunks, nil
}

// observeWait observes a client read's wait for the store (or the disk
// tier) that began at start (tiered_fetch_cache_wait_seconds).
func (c *CachingBucket) observeWait(start time.Time) {
	c.m.cacheWait.Observe(time.Since(start).Seconds())
}

// skipped reports whether f is a flight that gave up and that a client
// with the given deadline takes over (takeOver).
func skipped(f *flight, deadline time.Time) bool {
	if f == nil {
		return false
	}
	select {
	case <-f.done:
		return takeOver(f.err, deadline)
	default:
		return false
	}
}

// takeOver reports whether a client whose gate waits end at deadline loads
// a chunk itself after the load it joined ended with err: a read-ahead
// that gave up, or a load the gates refused at the deadline of the client
// that claimed it while this client's own wait lasts (every client waits
// until its own deadline, not another's).
func takeOver(err error, deadline time.Time) bool {
	return errors.Is(err, errReadAheadSkipped) ||
		(errors.Is(err, gate.ErrOverloaded) && time.Now().Before(deadline))
}

// loadRuns loads a client request's runs, FetchParallelism at a time.
func (c *CachingBucket) loadRuns(runs []loadRun, size int64, deadline time.Time) {
	if len(runs) == 1 {
		c.load(runs[0], size, deadline, false)
		return
	}
	sem := make(chan struct{}, c.o.FetchParallelism)
	var wg sync.WaitGroup
	for _, r := range runs {
		sem <- struct{}{}
		wg.Add(1)
		release := func() { <-sem; wg.Done() }
		if !c.goLoad([]loadRun{r}, func() {
			defer release()
			c.load(r, size, deadline, false)
		}) {
			release()
		}
	}
	wg.Wait()
}

// goLoad runs load, which settles runs, in the background; when the bucket
// is closed it settles them with ErrClosed instead and returns false.
func (c *CachingBucket) goLoad(runs []loadRun, load func()) bool {
	if len(runs) == 0 || c.goBackground(load) {
		return true
	}
	for _, r := range runs {
		c.settleRun(r, 0, ErrClosed)
	}
	return false
}

// settle ends the flight of chunk i of run r: a chunk is added to the
// memory tier before its flight leaves the table, so a later claim finds
// one or the other.
func (c *CachingBucket) settle(r loadRun, i int, data []byte, err error) {
	k, f := r.keys[i], r.flights[i]
	c.fmu.Lock()
	if c.flights[k] == f {
		delete(c.flights, k)
	}
	c.fmu.Unlock()
	f.data, f.err = data, err
	close(f.done)
}

// settleRun ends the flights of chunks [from, end) of r with err. They
// all leave the table at once, and end last to first: a waiter woken by
// the failure of one chunk finds the chunks after it failed too and gone
// from the table, so what it claims next (a client taking over a skipped
// read-ahead, GetRange retrying a short body) loads them afresh, as one
// run, instead of joining flights that are about to fail.
func (c *CachingBucket) settleRun(r loadRun, from int, err error) {
	c.fmu.Lock()
	for i := from; i < len(r.keys); i++ {
		if k := r.keys[i]; c.flights[k] == r.flights[i] {
			delete(c.flights, k)
		}
	}
	c.fmu.Unlock()
	for i := len(r.keys) - 1; i >= from; i-- {
		f := r.flights[i]
		f.err = err
		close(f.done)
	}
}

// load brings run r into the memory tier, from the disk tier or the store
// (one range GET per stretch of chunks the disk tier does not hold), and
// settles every flight of the run. Client loads wait for the gates until
// deadline; read-ahead loads only take free capacity. It runs under the
// bucket's lifetime context.
func (c *CachingBucket) load(r loadRun, size int64, deadline time.Time, readAhead bool) {
	cs := c.o.ChunkBytes
	lens := make([]int64, len(r.keys))
	var weight int64
	for i, k := range r.keys {
		lens[i] = chunkLen(k.index, cs, size)
		weight += lens[i]
	}
	start := func(g *gate.Gate, w int64) error {
		if readAhead {
			if !g.TryStart(w) {
				return errReadAheadSkipped
			}
			return nil
		}
		return g.StartBy(c.ctx, w, deadline)
	}
	if r.asked != nil {
		defer r.asked()
	}
	heldGet := r.held
	if !r.held {
		if err := start(c.bytes, weight); err != nil {
			c.settleRun(r, 0, err)
			return
		}
	}
	defer func() {
		if heldGet { // every chunk came from the disk tier
			c.getDone()
		}
	}()
	var release func(i int)
	// released marks the chunks whose part of the bytes weight is
	// released (release).
	released := make([]bool, len(r.keys))
	// keep caches chunk i and ends its flight as soon as its bytes are in,
	// and releases its part of the bytes weight: in the memory tier, its
	// bytes are the tier's, so a long run frees the budget chunk by chunk
	// as it arrives, for the loads waiting for it, rather than all at its
	// end.
	keep := func(i int, data []byte) {
		c.mem.add(r.keys[i], data, readAhead)
		if readAhead && r.flights[i].clientRead.Load() {
			c.mem.markRead(r.keys[i])
		}
		c.settle(r, i, data, nil)
		release(i)
	}
	// release ends chunk i's part of the bytes weight, once: handed to the
	// disk writer with the chunk, or returned.
	release = func(i int) {
		if released[i] {
			return
		}
		released[i] = true
		if c.disk != nil {
			select {
			case c.diskQueue <- diskWrite{r.keys[i], r.flights[i].data, lens[i]}:
				return
			default:
			}
		}
		c.bytesDone(lens[i])
	}
	fail := func(from int, err error) {
		var w int64
		for _, n := range lens[from:] {
			w += n
		}
		c.bytesDone(w)
		c.settleRun(r, from, err)
	}
	// A claimed chunk is not in memory: claim checks under the flights lock,
	// and only this run's load adds it (one flight per chunk at a time).
	for i := 0; i < len(r.keys); {
		if c.disk != nil {
			data, ok := c.disk.get(r.keys[i], lens[i])
			if !readAhead {
				if ok {
					c.m.hits.WithLabelValues(TierDisk).Inc()
				} else {
					c.m.misses.WithLabelValues(TierDisk).Inc()
				}
			}
			if ok {
				// A promoted chunk is not written back to disk.
				c.mem.add(r.keys[i], data, readAhead)
				c.bytesDone(lens[i])
				c.settle(r, i, data, nil)
				i++
				continue
			}
		}
		// Chunks i..j-1 come from the store in one GET: the stretch
		// ends before the next chunk the disk tier holds.
		j := i + 1
		for j < len(r.keys) && (c.disk == nil || !c.disk.has(r.keys[j])) {
			if c.disk != nil && !readAhead {
				c.m.misses.WithLabelValues(TierDisk).Inc()
			}
			j++
		}
		if heldGet {
			heldGet = false
		} else if err := start(c.gets, 1); err != nil {
			fail(i, err)
			return
		}
		if r.asked != nil {
			r.asked()
		}
		lastData, err := c.fetch(r, lens, i, j, size, readAhead || r.park, keep)
		c.getDone()
		if err == nil {
			// The GET's last chunk is handed out once the GET is closed
			// and its gate free: a client answered by it (often the one
			// that asked for the run) then finds its GET's slot free for
			// its next request.
			keep(j-1, lastData)
		}
		got := countSettled(r, i, j)
		for x := i; x < i+got; x++ {
			release(x)
		}
		if err != nil {
			fail(i+got, err)
			return
		}
		i = j
	}
}

// countSettled is the number of chunks of r from i (before j) whose
// flights have ended.
func countSettled(r loadRun, i, j int) int {
	n := 0
	for ; i+n < j; n++ {
		select {
		case <-r.flights[i+n].done:
		default:
			return n
		}
	}
	return n
}

// fetch reads chunks [i, j) of run r with one range GET, passing each
// chunk but the last to keep as soon as its bytes are in; it returns the
// last one once the GET is closed or parked. A run reads on from a body
// parked at its first byte if there is one; otherwise a run whose reader
// goes on past it (park: read-ahead, a stream's read) asks for the object
// to its end and parks what it does not read (parked.go).
func (c *CachingBucket) fetch(r loadRun, lens []int64, i, j int, size int64, park bool, keep func(int, []byte)) ([]byte, error) {
	object, version := r.keys[i].object, r.keys[i].version
	cs := c.o.ChunkBytes
	end := r.keys[j-1].index*cs + lens[j-1] // the byte the run ends before
	var rc io.ReadCloser
	var bodyEnd int64 // the byte rc ends before
	continued := false
	open := func(x int) error {
		off := r.keys[x].index * cs
		bodyEnd = end
		if park && c.extends(r.keys[j-1], size) {
			bodyEnd = size
		}
		var err error
		rc, err = c.inner.GetRange(c.ctx, object, off, bodyEnd-off)
		if err != nil {
			rc = nil
			if errors.Is(err, objstore.ErrNotFound) {
				c.attrs.Remove(object) // gone: do not trust its size any more
			}
			return err
		}
		c.m.storeGets.Inc()
		if r.endCheck {
			c.m.endCheckGets.Inc()
		}
		return nil
	}
	// A parked body goes on to the object's end.
	if rc = c.park.take(parkKey{object, version, r.keys[i].index * cs}); rc != nil {
		continued, bodyEnd = true, size
	} else if err := open(i); err != nil {
		return nil, err
	}
	defer func() {
		if rc != nil {
			_ = rc.Close()
		}
	}()
	for x := i; x < j; x++ {
		data, got, err := readChunk(rc, r.flights[x], lens[x])
		c.m.storeBytes.Add(float64(got))
		if err != nil && continued {
			// A parked body the store or the network gave up on: read
			// the rest of the run with a GET of its own, once.
			_ = rc.Close()
			rc, continued = nil, false
			c.o.Logger.Debug("parked GET failed, reading with a new one", "chunk", r.keys[x].String(), "err", err)
			if err := open(x); err != nil {
				return nil, err
			}
			data, got, err = readChunk(rc, r.flights[x], lens[x])
			c.m.storeBytes.Add(float64(got))
		}
		if err != nil {
			k := r.keys[x]
			// ReadFull's own sentinels mean the body ended early; any
			// other error is the reader's and is kept (a cut connection
			// may wrap io.ErrUnexpectedEOF too, and GetRange then
			// retries as for a short body).
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("chunk %d of %q: store returned %d of %d bytes (object changed?): %w",
					k.index, k.object, got, lens[x], io.ErrUnexpectedEOF)
			}
			return nil, fmt.Errorf("read chunk %d of %q after %d of %d bytes: %w", k.index, k.object, got, lens[x], err)
		}
		if x == j-1 {
			if continued {
				c.m.continued.Inc()
			}
			if bodyEnd > end {
				if c.extends(r.keys[j-1], size) {
					c.park.put(parkKey{object, version, end}, rc)
				} else {
					c.park.closeUnused(rc) // claimed meanwhile: nothing will continue it
				}
				rc = nil
			}
			return data, nil // the deferred Close runs first
		}
		keep(x, data)
	}
	return nil, fmt.Errorf("fetch chunks [%d, %d) of %q: empty stretch", i, j, object)
}

// readChunk reads a chunk of n bytes from rc into a new buffer (as
// io.ReadFull does), publishing its progress to f's prefix waiters every
// progressStep bytes short of the whole: a waiter whose prefix only the
// whole chunk holds is answered by keep, which caches the chunk before it
// ends the flight, so a read that returns has its whole chunks in the
// memory tier (a next read marked cached-only or exact finds them).
func readChunk(rc io.Reader, f *flight, n int64) ([]byte, int64, error) {
	data := make([]byte, n)
	var got int64
	for got < n {
		step := min(got+progressStep, n)
		m, err := io.ReadFull(rc, data[got:step])
		got += int64(m)
		if err != nil {
			if err == io.EOF && got > 0 {
				err = io.ErrUnexpectedEOF // as io.ReadFull over the whole
			}
			return data, got, err
		}
		if got < n {
			f.progress(data, got)
		}
	}
	return data, got, nil
}

// extends reports whether the GET of a run ending with chunk last goes on
// to the object's end, to be parked there (parked.go): parking is on, and
// the chunk after last exists and is neither cached (in memory or on
// disk) nor loading, so the object's next run will start there.
func (c *CachingBucket) extends(last chunkKey, size int64) bool {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.extendsLocked(last, size)
}

// extendsLocked is extends with fmu held.
func (c *CachingBucket) extendsLocked(last chunkKey, size int64) bool {
	next := last
	next.index++
	if c.o.ParkedGets <= 0 || next.index*c.o.ChunkBytes >= size {
		return false
	}
	_, loading := c.flights[next]
	return !loading && !c.mem.contains(next) && (c.disk == nil || !c.disk.has(next))
}

// loading is the number of chunks being loaded.
func (c *CachingBucket) loading() int {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return len(c.flights)
}
