package kafkasrv

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/workers"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
)

const fetchKey int16 = 1

// fetchAPI serves Fetch v4-13: v13 names topics by ID (topicid.go); a
// client uses it once Metadata gave it every topic's ID.
var fetchAPI = api{key: fetchKey, min: 4, max: 13, perm: auth.PermRead, handle: handler((*KafkaServer).fetch)}

// fetchPart is one requested partition's state during a Fetch.
type fetchPart struct {
	topic  string
	q      kmsg.FetchRequestTopicPartition
	part   fetchcache.Partition
	resp   *kmsg.FetchResponseTopicPartition
	failed bool            // answered with an error: no waiting for it
	data   fetchcache.View // the record batches of resp, spliced in when it is written

	// One fetchOnce's working state, each written by one goroutine at a
	// time (prepare, then read) and read by fetchOnce after it waited.
	limit      int64  // the high watermark, or the last stable offset
	outOfRange bool   // answered with OFFSET_OUT_OF_RANGE
	unknown    bool   // no such partition: answered apart from the reads, ending no wait
	err        error  // the failed step's error, answered by fetchOnce
	errOp      string // the step that failed
	budget     int    // the planned bytes of its read
	want       int64  // its reservation of the response budget
	// cachedOnly: read only what the cache holds (objstore.WithCachedOnly),
	// for a partition that could add only a small remainder to a response
	// that holds other data.
	cachedOnly bool
	view       fetchcache.View
	last       int64 // the offset after view's last batch
	txns       []fetchcache.AbortedTxn
	txnErr     error // of txns, answered only if view is kept
	sent       int64 // the offset after data's last batch
}

func (s *KafkaServer) fetch(ctx context.Context, kc *kafkaConn, q *kmsg.FetchRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrFetchResponse()
	r.Version = q.Version
	r.SessionID = 0 // sessionless: clients then send full fetches
	if q.Version >= 7 && q.SessionEpoch != 0 && q.SessionEpoch != -1 {
		// An incremental fetch of a session we never created.
		r.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return r, fetchcache.CodeInvalidRequest, 0
	}
	committed := q.IsolationLevel == 1
	reqTopics, byIDCode := q.Topics, fetchcache.CodeOK
	var unknownIDs []kmsg.FetchRequestTopic
	if q.Version >= 13 {
		var err error
		reqTopics, unknownIDs, err = s.resolveFetchIDs(ctx, kc, q.Topics)
		byIDCode = fetchIDCode(unknownIDs, err)
		if err != nil {
			s.log.Error("kafka fetch: list topics to resolve topic ids", "err", err)
			reqTopics, unknownIDs = nil, q.Topics
		}
	}
	topics, n := collapseFetch(reqTopics)
	if n > s.o.MaxFetchPartitions {
		// Kafka has no such cap; a request this large is hostile or broken:
		// refused whole, without a look at any partition, and the
		// connection closed after the answer.
		s.log.Warn("kafka fetch refused: too many partitions, closing connection", "remote", kc.remote(), "partitions", n, "max", s.o.MaxFetchPartitions)
		r.ErrorCode = kerr.InvalidRequest.Code
		if kc != nil {
			kc.closeAfter = true
		}
		return r, fetchcache.CodeInvalidRequest, 0
	}
	var parts []*fetchPart
	for _, qt := range topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = qt.Topic
		rt.TopicID = qt.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(qt.Partitions))
		r.Topics = append(r.Topics, rt)
	}
	if len(unknownIDs) > 0 {
		idCode := kerr.UnknownTopicID.Code
		if byIDCode == fetchcache.CodeInternal {
			idCode = kerr.UnknownServerError.Code
		}
		unknownTopicIDs(r, unknownIDs, idCode)
	}
	denied := byIDCode
	for i, qt := range topics {
		allowed := s.allowed(ctx, kc, qt.Topic)
		for j, qp := range qt.Partitions {
			rp := &r.Topics[i].Partitions[j]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = qp.Partition
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rp.RecordBatches = []byte{}
				denied = fetchcache.CodeTopicAuthorizationFailed
				continue
			}
			parts = append(parts, &fetchPart{topic: qt.Topic, q: qp, resp: rp})
		}
	}

	maxTotal := s.o.FetchMaxBytes
	if q.MaxBytes > 0 {
		maxTotal = min(maxTotal, int(q.MaxBytes))
	}
	wait := min(time.Duration(max(q.MaxWaitMillis, 0))*time.Millisecond, s.o.MaxFetchWait)
	deadline := time.Now().Add(wait)
	b := &respBudget{g: s.respBudget, deadline: deadline}
	final := false // the read after the max wait passed, new data seen
	for {
		total, readCode, aside, throttle, missed := s.fetchOnce(ctx, kc.pool(), parts, maxTotal, committed, b)
		code := worse(worse(denied, aside), readCode)
		// As Kafka's DelayedFetch, a read with fewer bytes than min_bytes
		// (above 1) that returned all there was is held while the Fetch
		// waits for more, polling only offsets, and read again once they
		// likely reach it (answered if they do); when the max wait passes
		// it is answered, read again first only if new data came
		// meanwhile. One that left data unread (a segment's end, the
		// limits, not cached) is answered at once, as Kafka answers a
		// fetch behind the log's last segment.
		short := false
		if total > 0 && total < int(q.MinBytes) && readCode == fetchcache.CodeOK && throttle == 0 && !final && time.Now().Before(deadline) && readAll(parts) {
			more, changed := s.waitForBytes(ctx, kc, parts, committed, deadline, total, int(q.MinBytes))
			short = more || changed
			final = !more
		}
		// As Kafka, the partitions answered before any read (denied, an
		// unknown topic ID or partition) do not end the wait for the
		// others; with no others, there is nothing to wait for.
		if !short && (total > 0 || readCode != fetchcache.CodeOK || throttle > 0 || len(parts) == 0 || q.MinBytes <= 0 || wait <= 0 || !time.Now().Before(deadline) ||
			!s.waitForData(ctx, kc, parts, committed, deadline)) {
			if total > 0 && throttle == 0 {
				s.reload(ctx, kc.pool(), missed, maxTotal)
			}
			resp := spliceBatches(r, parts)
			if sf, ok := resp.(*splicedFetch); ok {
				sf.release = b.release // once the response is written
			} else {
				b.release()
			}
			return resp, code, throttle
		}
		if short {
			b.release() // the held read's bytes: read again
		}
	}
}

// collapseFetch merges the repeats of a Fetch's topics and partitions, as
// Kafka's FetchRequest does (its fetch data is a map by partition): each
// partition is answered once, in the place it first appeared, with the
// fetch position of its last appearance. n is the number of distinct
// partitions. A request without repeats is returned as it is.
func collapseFetch(ts []kmsg.FetchRequestTopic) (out []kmsg.FetchRequestTopic, n int) {
	type key struct {
		topic     string
		partition int32
	}
	total := 0
	for _, t := range ts {
		total += len(t.Partitions)
	}
	seen := make(map[key]struct{}, total)
	dup := false
	for _, t := range ts {
		for _, p := range t.Partitions {
			k := key{t.Topic, p.Partition}
			if _, ok := seen[k]; ok {
				dup = true
			}
			seen[k] = struct{}{}
		}
	}
	if !dup {
		return ts, total
	}
	byTopic := map[string]int{}       // index in out
	at := make(map[key][2]int, total) // index in out, index in its partitions
	for _, t := range ts {
		i, ok := byTopic[t.Topic]
		if !ok {
			i = len(out)
			byTopic[t.Topic] = i
			ct := t
			ct.Partitions = nil
			out = append(out, ct)
		}
		for _, p := range t.Partitions {
			k := key{t.Topic, p.Partition}
			if pos, ok := at[k]; ok {
				out[pos[0]].Partitions[pos[1]] = p
				continue
			}
			at[k] = [2]int{i, len(out[i].Partitions)}
			out[i].Partitions = append(out[i].Partitions, p)
		}
	}
	return out, len(at)
}

// respBudget is one Fetch's share of the listener's response budget
// (KafkaOptions.MaxInFlightResponseBytes): the bytes of record batches it
// holds, from their read until the response is written.
type respBudget struct {
	g        *gate.Gate
	deadline time.Time // the Fetch's max wait: how long a first reservation may wait
	held     int64
}

// reserve takes n bytes (at most the budget's capacity). With wait it waits
// for them until the Fetch's deadline, else only takes them if free now.
func (b *respBudget) reserve(ctx context.Context, n int64, wait bool) error {
	n = min(n, b.g.Capacity())
	if n <= 0 {
		return nil
	}
	if wait {
		if err := b.g.StartBy(ctx, n, b.deadline); err != nil {
			return err
		}
	} else if !b.g.TryStart(n) {
		return &gate.OverloadedError{Gate: b.g.Name(), RetryAfter: responseBudgetRetry}
	}
	b.held += n
	return nil
}

// keep trims what the Fetch holds to n bytes more than before it reserved
// want: unused bytes go back at once; bytes beyond the reservation (a batch
// larger than the limits, which KIP-74 returns whole) are taken if free, and
// keep reports false when they are not. A Fetch never holds more than the
// whole budget: one that holds all of it keeps a batch larger than the
// budget (sent alone), which it could otherwise never get.
func (b *respBudget) keep(ctx context.Context, want, n int64) bool {
	want = min(want, b.g.Capacity())
	switch {
	case n < want:
		b.give(want - n)
	case n > want:
		extra := min(n-want, b.g.Capacity()-b.held)
		if extra <= 0 {
			return true
		}
		return b.reserve(ctx, extra, false) == nil
	}
	return true
}

func (b *respBudget) give(n int64) {
	if n = min(n, b.held); n > 0 {
		b.g.Done(n)
		b.held -= n
	}
}

// release returns everything the Fetch holds.
func (b *respBudget) release() { b.give(b.held) }

// smallRemainder: once a Fetch's response holds (or has planned) data, a
// partition planned less than 1/smallRemainder of its max bytes is read
// only from the cache (fetchPart.cachedOnly), as are the partitions of a
// wave's tail after its first. KIP-74 gives such a partition only the
// whole batches that fit the remainder, often none, yet finding that out
// from the store would cost a chunk's GET the whole response waits for
// (for a cold Fetch of many partitions, every partition's); its chunks
// load meanwhile, for the client's next Fetch, which reads it first.
const smallRemainder = 8

// responseBudgetRetry is the throttle a Fetch gets when the response budget
// had no room for any of its data within its max wait.
const responseBudgetRetry = 100 * time.Millisecond

// fetchOnce fills every partition's response once, as Kafka's sequential
// read of the partitions in request order would: the first partition with
// data gets at least one whole batch even when it exceeds the byte limits
// (KIP-74); later ones get only what fits in what the earlier ones left of
// the Fetch's max bytes. The partitions are filled in parallel, at most
// FetchFillConcurrency at a time, so that the remote ones named in one
// Fetch keep the store busy together: first every partition's offsets
// (opening it and its manifest), then its data in waves (fillWaves).
//
// code is the reads' result, aside that of the partitions the catalog does
// not have (fetchPart.unknown), which end no wait.
func (s *KafkaServer) fetchOnce(ctx context.Context, pool *workers.Pool, parts []*fetchPart, maxTotal int, committed bool, b *respBudget) (total int, code, aside string, throttle time.Duration, missed []*fetchPart) {
	st := &fillState{code: fetchcache.CodeOK, aside: fetchcache.CodeOK, pool: pool}
	s.fanOut(st.pool, len(parts), func(i int) { s.prepare(ctx, parts[i], committed) })
	var queue []*fetchPart
	for _, fp := range parts {
		if fp.err != nil && fp.unknown {
			fp.resp.ErrorCode, _ = s.partitionError(fp.errOp, fp.topic, fp.q.Partition, fp.err)
			fp.failed = true
			st.aside = fetchcache.CodeUnknownTopicOrPartition
			continue
		}
		if fp.err != nil {
			st.fail(s, fp, fp.errOp, fp.err)
			continue
		}
		if fp.outOfRange {
			st.code = worse(st.code, fetchcache.CodeOffsetOutOfRange)
		}
		if !fp.failed && fp.q.FetchOffset < fp.limit {
			queue = append(queue, fp)
		}
	}
	s.fillWaves(ctx, queue, maxTotal, committed, b, st)
	return st.total, st.code, st.aside, st.throttle, st.missed
}

// reload asks again, in the background, for the loads of the partitions a
// Fetch answered empty because their data was not cached (missed, its
// cached-only reads): those reads asked for them as read-ahead, which takes
// only free capacity, and the Fetch's own loads held it then. Now they are
// done, so the data loads while the response is written and read, for the
// client's next Fetch, which asks for those partitions again. At most
// reloadResponses times the Fetch's max bytes of them (what the next
// responses can carry) are asked for, each within what is left of them.
func (s *KafkaServer) reload(ctx context.Context, pool *workers.Pool, missed []*fetchPart, maxTotal int) {
	maxTotal *= reloadResponses
	type load struct {
		part     fetchcache.Partition
		offset   int64
		maxBytes int
	}
	var loads []load
	sum := 0
	for _, fp := range missed {
		if sum >= maxTotal {
			break
		}
		n := min(int(max(fp.q.PartitionMaxBytes, 1)), maxTotal-sum)
		loads = append(loads, load{fp.part, fp.q.FetchOffset, n})
		sum += n
	}
	if len(loads) == 0 {
		return
	}
	cctx := objstore.WithPrefetch(ctx)
	pool.Go(func() {
		for _, l := range loads {
			_, _ = fetchcache.ReadView(cctx, l.part, l.offset, l.maxBytes)
		}
	})
}

// reloadResponses is how many responses' worth of missed partitions a
// Fetch reloads. A client reads a response a while before it asks again
// (kcat, a few hundred ms for 50 MB): with one response's worth, a traced
// cold read of 128 partitions left the store idle in that while, the
// loads it had started for the next response done, and the next Fetch
// then waited for the store for the partitions after those.
const reloadResponses = 2

// fillState is what one fetchOnce has answered so far.
type fillState struct {
	total    int
	code     string
	aside    string // of the partitions the catalog does not have
	throttle time.Duration
	full     bool          // the response budget had no room: read no more
	missed   []*fetchPart  // answered empty: not cached (cached-only read)
	pool     *workers.Pool // the listener's: fills run on its workers
}

// fail answers fp with err: a throttle when a step was overloaded, else
// the partition's error.
func (st *fillState) fail(s *KafkaServer, fp *fetchPart, op string, err error) {
	if d, ok := gate.RetryAfter(err); ok {
		// Kafka's fetch throttling, whatever step was overloaded (opening
		// the partition, its manifest, the read): no error, no data, and
		// throttle_time_ms tells the client when to come back.
		st.throttle = max(st.throttle, d)
		st.code = worse(st.code, fetchcache.CodeThrottled)
		return
	}
	var c string
	fp.resp.ErrorCode, c = s.partitionError(op, fp.topic, fp.q.Partition, err)
	st.code = worse(st.code, c)
	fp.failed = true
}

// fanOut runs f(0..n-1), at most FetchFillConcurrency at a time, on the
// listener's workers (pool; nil: a goroutine each), and waits for all of
// them. One call runs inline.
func (s *KafkaServer) fanOut(pool *workers.Pool, n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.o.FetchFillConcurrency)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		pool.Go(func() {
			defer func() { <-sem; wg.Done() }()
			f(i) // f reports through its partition
		})
	}
	wg.Wait()
}

// prepare resets fp's response and finds its offsets and read limit (the
// high watermark, or the last stable offset for read_committed), opening
// the partition on first use. It touches only fp: fetchOnce runs it for
// all partitions at once. A failed step is left in fp.err for fetchOnce to
// answer; an offset out of range is answered here.
func (s *KafkaServer) prepare(ctx context.Context, fp *fetchPart, committed bool) {
	rp := fp.resp
	*rp = kmsg.NewFetchResponseTopicPartition()
	rp.Partition = fp.q.Partition
	// Never null: librdkafka refuses a null record set ("invalid
	// MessageSetSize -1").
	rp.RecordBatches = []byte{}
	fp.failed, fp.outOfRange, fp.data, fp.err, fp.errOp, fp.limit, fp.unknown = false, false, fetchcache.View{}, nil, "", 0, false
	fail := func(op string, err error) { fp.errOp, fp.err = op, err }
	if fp.part == nil {
		p, err := s.o.Catalog.Partition(ctx, fp.topic, fp.q.Partition)
		if err != nil {
			fail("fetch", err)
			fp.unknown = errors.Is(err, kafkaerr.ErrUnknownTopicOrPartition)
			return
		}
		fp.part = p
	}
	off, err := fp.part.Offsets(ctx)
	if err != nil {
		fail("fetch offsets", err)
		return
	}
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
	if committed {
		rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	offset := fp.q.FetchOffset
	if offset < off.LogStart || offset > off.LogEnd {
		// fetchcache.Offsets may come from a cache (a remote manifest); a read
		// past the end re-reads it, and decides. An overloaded store leaves
		// that undecided past the end (throttled, not out of range: the
		// client would reset its offset); below the log start it is decided
		// already, a cached log start never being above the real one.
		if _, err := fp.part.Read(ctx, offset, 1); err != nil {
			if _, ok := gate.RetryAfter(err); !ok || offset > off.LogEnd {
				fail("fetch", err)
				return
			}
		}
		if off, err = fp.part.Offsets(ctx); err != nil {
			fail("fetch offsets", err)
			return
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
		if offset < off.LogStart || offset > off.LogEnd {
			rp.ErrorCode = kerr.OffsetOutOfRange.Code
			fp.errOp, fp.err = "", nil
			fp.failed, fp.outOfRange = true, true
			return
		}
	}
	fp.limit = off.LogEnd
	if committed {
		fp.limit = off.LastStable
	}
}

// fillWaves reads the queued partitions' data (each has some below its
// limit), in request order, in waves read in parallel. A wave plans each
// partition's budget as the sequential read would if every earlier one
// filled its own budget, and reserves it from the response budget (the
// first of a wave may wait for it, as the sequential first read does).
// The first partition planned less than its max bytes starts the wave's
// tail: it and every partition after it are read with that remainder, as
// if the others of the tail returned nothing (so a Fetch whose max bytes
// ran out does not try the rest one wave at a time, each read to find
// that its first batch does not fit), and each of the tail takes its
// bytes from the response budget only when it is kept. Assembled in
// order, a partition's data is then cut to what the sequential read would
// have given it (whole batches within what the earlier ones actually
// left), and one whose planned budget was smaller than that (the tail,
// when the earlier ones returned less than planned) is read again in the
// next wave, where the first budget is exact. So the response is the
// sequential one, read in parallel.
func (s *KafkaServer) fillWaves(ctx context.Context, queue []*fetchPart, maxTotal int, committed bool, b *respBudget, st *fillState) {
	for len(queue) > 0 && !st.full {
		var wave []*fetchPart
		planned := 0 // the budgets of the wave's partitions up to its tail
		tail := -1   // once one got less than its max bytes: what each later one gets
		for len(queue) > 0 {
			fp := queue[0]
			partMax := int(max(fp.q.PartitionMaxBytes, 0))
			budget := min(partMax, maxTotal-st.total-planned)
			if tail >= 0 {
				budget = min(partMax, tail)
			}
			first := len(wave) == 0
			if budget <= 0 && !first {
				break // decided once the wave is in
			}
			if budget <= 0 && st.total > 0 {
				queue = queue[1:] // no room left for it
				continue
			}
			// The bytes come from the listener's response budget first: the
			// first read waits for them up to the Fetch's max wait, later
			// ones take them only if free (the response then carries what
			// it has).
			want := min(int64(max(budget, 1)), b.g.Capacity())
			if tail >= 0 {
				// Together the tail keeps at most what its first one
				// reserved; each takes its bytes when it is kept.
				want = 0
			}
			if err := b.reserve(ctx, want, first && st.total == 0); err != nil {
				if !first {
					break // tried again once the wave gave back what it did not use
				}
				st.full = true
				if st.total == 0 {
					st.fail(s, fp, "fetch", err)
				}
				return
			}
			queue = queue[1:]
			fp.budget, fp.want = budget, want
			// Behind data already in the response, the tail after its
			// first (read only in case the earlier ones come back short)
			// and a partition left only a small remainder do not wait for
			// the store (objstore.WithCachedOnly).
			fp.cachedOnly = (st.total > 0 || planned > 0) && (tail >= 0 || budget < partMax/smallRemainder)
			wave = append(wave, fp)
			if tail < 0 {
				planned += max(budget, 1)
				if budget < partMax {
					tail = budget
				}
			}
		}
		if len(wave) == 0 {
			return
		}
		// The wave's reads ask the store for their own bytes before any
		// of them for its read-ahead beyond them (objstore.DemandGroup).
		var demand *objstore.DemandGroup
		if len(wave) > 1 {
			demand = objstore.NewDemandGroup(len(wave))
		}
		s.fanOut(st.pool, len(wave), func(i int) {
			rctx := ctx
			if demand != nil {
				var asked func()
				rctx, asked = objstore.WithDemand(ctx, demand)
				defer asked()
			}
			read(rctx, wave[i], committed)
		})
		var again []*fetchPart
		for k, fp := range wave {
			if again != nil || st.full {
				b.give(fp.want)
				if !st.full {
					again = append(again, fp)
				}
				continue
			}
			if fp.err != nil && errors.Is(fp.err, objstore.ErrNotCached) {
				// Not cached, and loading now: answered empty, unless
				// the earlier ones left it more than it was planned.
				b.give(fp.want)
				if k > 0 && fp.budget < min(int(max(fp.q.PartitionMaxBytes, 0)), maxTotal-st.total) {
					again = append(again, fp)
				} else {
					st.missed = append(st.missed, fp)
				}
				fp.err = nil
				continue
			}
			if fp.err != nil {
				b.give(fp.want)
				st.fail(s, fp, fp.errOp, fp.err)
				continue
			}
			v, last := fp.view, fp.last
			budget := min(int(max(fp.q.PartitionMaxBytes, 0)), maxTotal-st.total)
			if k > 0 && fp.budget < budget && last < fp.limit {
				// Read with less than it may now have, and more is there.
				b.give(fp.want)
				again = append(again, fp)
				continue
			}
			if st.total > 0 && v.Len > budget {
				cut, cutLast := cutBytes(v, budget)
				if cut.Len == 0 || (!hasRecords(cut) && hasRecords(v)) {
					// Nothing fits, or only batches without records
					// before the record that does not (see read): the
					// partition is answered empty, and read again by the
					// client's next Fetch.
					b.give(fp.want)
					continue
				}
				v, last = cut, cutLast
				if committed && fp.txnErr == nil {
					// Those the read found that still overlap the data
					// kept: no second lookup.
					fp.txns = slices.DeleteFunc(fp.txns, func(t fetchcache.AbortedTxn) bool { return t.FirstOffset >= last })
				}
			}
			if v.Len == 0 {
				b.give(fp.want)
				continue
			}
			if !b.keep(ctx, fp.want, int64(v.Len)) {
				b.give(fp.want)
				st.full = true
				if st.total == 0 {
					st.fail(s, fp, "fetch", &gate.OverloadedError{Gate: b.g.Name(), RetryAfter: responseBudgetRetry})
				}
				continue
			}
			if committed {
				if fp.txnErr != nil {
					b.give(int64(v.Len))
					st.fail(s, fp, "fetch aborted transactions", fp.txnErr)
					continue
				}
				for _, t := range fp.txns {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = t.ProducerID, t.FirstOffset
					fp.resp.AbortedTransactions = append(fp.resp.AbortedTransactions, at)
				}
			}
			// Kept: if cut (the limit, the max bytes), the partition's
			// reader goes on after the batches sent.
			v.Served(v.Len, last)
			fp.data, fp.sent = v, last
			st.total += v.Len
		}
		queue = append(again, queue...)
	}
}

// read reads fp's planned budget of data from its fetch offset, cut at its
// limit, and for read_committed the aborted transactions it overlaps. It
// touches only fp: fillWaves runs it for a whole wave at once. Shared cache
// memory where possible: the response only reads it, and is written with
// these parts spliced in (splicedFetch).
func read(ctx context.Context, fp *fetchPart, committed bool) {
	fp.view, fp.last, fp.txns, fp.txnErr, fp.err, fp.errOp = fetchcache.View{}, 0, nil, nil, nil, ""
	if fp.cachedOnly {
		ctx = objstore.WithCachedOnly(ctx)
	}
	v, err := fetchcache.ReadView(ctx, fp.part, fp.q.FetchOffset, max(fp.budget, 1))
	if err != nil {
		fp.errOp, fp.err = "fetch", err
		return
	}
	fp.view, fp.last = cutView(v, fp.limit)
	// Batches without records (compaction keeps empty batches; the
	// cleaner's sentinel) are not sent alone while the log has a record
	// after them: librdkafka (2.0.2) takes a partition's answer without a
	// record for a max bytes too small, doubles it, and after ten such
	// answers (a compacted log may hold many) fails with "Message at
	// offset N might be too large to fetch". While the budget has room the
	// read goes on after them, a few reads at most (each stopped at a
	// segment's end); a failed one leaves what was read before it. As any
	// read's first batch, the first one after them comes whole: past the
	// budget, it is kept if the partition is the response's first with
	// data (KIP-74), else the cut in fillWaves answers the partition empty.
	for i := 0; i < maxEmptyReads && fp.view.Len > 0 && fp.view.Len < fp.budget && fp.last < fp.limit && !hasRecords(fp.view); i++ {
		w, err := fetchcache.ReadView(ctx, fp.part, fp.last, fp.budget-fp.view.Len)
		if err != nil {
			break
		}
		w, last := cutView(w, fp.limit)
		if w.Len == 0 {
			break
		}
		fp.view, fp.last = fp.view.Append(w), last
	}
	if committed && fp.view.Len > 0 {
		// An error here is answered only if the data is kept.
		fp.txns, fp.txnErr = fp.part.AbortedTxns(ctx, fp.q.FetchOffset, fp.last)
	}
}

// maxEmptyReads bounds the reads read adds after batches without records.
const maxEmptyReads = 4

// hasRecords reports whether a batch of v (whole batches, which may span
// parts) holds a record: a legacy message set, a control batch, a v2 batch
// with a record count above 0. It reads batch headers only, up to the first
// batch with records — the first one, unless compaction left empty ones.
func hasRecords(v fetchcache.View) bool {
	var hdr [record.HeaderSize]byte
	for pos := 0; pos+record.LogOverhead < v.Len; {
		n := record.CopyAt(v.Parts, pos, hdr[:min(record.HeaderSize, v.Len-pos)])
		b := record.Batch(hdr[:n])
		if b.IsLegacy() || (n == record.HeaderSize && b.RecordCount() > 0) {
			return true
		}
		pos += int(b.Length()) + record.LogOverhead
	}
	return false
}

// cutBytes keeps the whole batches of v that lie in its first n bytes and
// returns the offset after the last one kept.
func cutBytes(v fetchcache.View, n int) (fetchcache.View, int64) {
	var (
		next int64
		pos  int
		hdr  [record.HeaderSize]byte
	)
	for pos+record.LogOverhead <= v.Len {
		k := min(record.HeaderSize, v.Len-pos)
		record.CopyAt(v.Parts, pos, hdr[:k])
		b := record.Batch(hdr[:k])
		size := int(b.Length()) + record.LogOverhead
		if pos+size > n || size > v.Len-pos {
			break
		}
		next = b.NextOffset()
		pos += size
	}
	if pos == 0 {
		return fetchcache.View{Next: v.Next}, next
	}
	return v.Prefix(pos), next
}

// cutView drops the batches of v (whole batches, which may span parts)
// that start at or after limit (the high watermark or the last stable
// offset) and returns the offset after the last batch kept. Across parts it
// reads only batch headers, never copying the batches.
func cutView(v fetchcache.View, limit int64) (fetchcache.View, int64) {
	if len(v.Parts) <= 1 {
		var data []byte
		if len(v.Parts) == 1 {
			data = v.Parts[0]
		}
		data, next := cutAt(data, limit)
		if len(data) == 0 {
			return fetchcache.View{Next: v.Next}, next
		}
		return v.Prefix(len(data)), next
	}
	var (
		next int64
		pos  int
		hdr  [record.HeaderSize]byte
	)
	for pos+record.LogOverhead < v.Len {
		n := min(record.HeaderSize, v.Len-pos)
		record.CopyAt(v.Parts, pos, hdr[:n])
		b := record.Batch(hdr[:n])
		size := int(b.Length()) + record.LogOverhead
		if b.BaseOffset() >= limit || size > v.Len-pos || (!b.IsLegacy() && n < record.HeaderSize) {
			break
		}
		next = b.NextOffset()
		pos += size
	}
	return v.Prefix(pos), next
}

// cutAt is cutView of one slice of whole batches.
func cutAt(data []byte, limit int64) ([]byte, int64) {
	it := record.NewIter(data)
	var next int64
	for {
		pos := it.Pos()
		b, ok := it.Next()
		if !ok {
			return data[:pos], next
		}
		if b.BaseOffset() >= limit {
			return data[:pos], next
		}
		next = b.NextOffset()
	}
}

// waitForData polls the partitions' offsets until one has data past its
// fetch offset (true) or the deadline passes or the server stops (false).
func (s *KafkaServer) waitForData(ctx context.Context, kc *kafkaConn, parts []*fetchPart, committed bool, deadline time.Time) bool {
	done, _ := s.poll(ctx, kc, deadline, func() bool {
		for _, fp := range parts {
			if fp.part == nil || fp.failed {
				continue
			}
			off, err := fp.part.Offsets(ctx)
			if err != nil {
				return true // let the fetch report it
			}
			limit := off.LogEnd
			if committed {
				limit = off.LastStable
			}
			if limit > fp.q.FetchOffset || off.LogStart > fp.q.FetchOffset {
				return true
			}
		}
		return false
	})
	return done
}

// poll calls check every FetchPollInterval until it reports true (done),
// the deadline passes (expired) or the server stops or ctx ends (neither).
func (s *KafkaServer) poll(ctx context.Context, kc *kafkaConn, deadline time.Time, check func() bool) (done, expired bool) {
	tick := time.NewTicker(s.o.FetchPollInterval)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var stopping <-chan struct{}
	if kc != nil {
		stopping = kc.stopping
	}
	for {
		select {
		case <-timer.C:
			return false, true
		case <-stopping:
			return false, false
		case <-ctx.Done():
			return false, false
		case <-tick.C:
		}
		if check() {
			return true, false
		}
	}
}

// readAll reports whether a read returned every partition's data up to
// its limit.
func readAll(parts []*fetchPart) bool {
	for _, fp := range parts {
		if fp.part == nil || fp.failed {
			continue
		}
		next := fp.q.FetchOffset
		if fp.data.Len > 0 {
			next = fp.sent
		}
		if next < fp.limit {
			return false
		}
	}
	return true
}

// waitForBytes holds a read of total bytes, fewer than minBytes, while it
// polls the partitions' offsets (never their data) until the bytes there
// likely reach minBytes (more: read again), or the deadline passes or the
// server stops. Without positions to count bytes by, as Kafka does, the
// bytes come at the read's bytes per offset. changed: new data came.
func (s *KafkaServer) waitForBytes(ctx context.Context, kc *kafkaConn, parts []*fetchPart, committed bool, deadline time.Time, total, minBytes int) (more, changed bool) {
	var read int64 // the offsets read
	for _, fp := range parts {
		if fp.data.Len > 0 {
			read += fp.sent - fp.q.FetchOffset
		}
	}
	perOffset := float64(total) / float64(max(read, 1))
	done, expired := s.poll(ctx, kc, deadline, func() bool {
		var added int64 // offsets past the limits read up to
		for _, fp := range parts {
			if fp.part == nil || fp.failed {
				continue
			}
			off, err := fp.part.Offsets(ctx)
			if err != nil {
				changed = true
				return true // let the fetch report it
			}
			limit := off.LogEnd
			if committed {
				limit = off.LastStable
			}
			if off.LogStart > fp.q.FetchOffset {
				changed = true
				return true // out of range now
			}
			added += max(limit-fp.limit, 0)
		}
		changed = added > 0
		if float64(total)+float64(added)*perOffset >= float64(minBytes) {
			changed = true
			return true
		}
		return false
	})
	switch {
	case done:
		return true, true
	case expired:
		return false, changed
	}
	return false, false
}
