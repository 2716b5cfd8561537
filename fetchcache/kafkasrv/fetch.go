package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/localtier/record"
)

const fetchKey int16 = 1

// fetchAPI serves Fetch v4-12: later versions name topics by id, and the
// service reports the zero topic id.
var fetchAPI = api{key: fetchKey, min: 4, max: 12, handle: handler((*KafkaServer).fetch)}

// fetchPart is one requested partition's state during a Fetch.
type fetchPart struct {
	topic  string
	q      kmsg.FetchRequestTopicPartition
	part   fetchcache.Partition
	resp   *kmsg.FetchResponseTopicPartition
	failed bool // answered with an error: no waiting for it
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
	var parts []*fetchPart
	for _, qt := range q.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = qt.Topic
		rt.TopicID = qt.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(qt.Partitions))
		r.Topics = append(r.Topics, rt)
	}
	denied := fetchcache.CodeOK
	for i, qt := range q.Topics {
		allowed := s.allowed(kc, qt.Topic)
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
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		total, code, throttle := s.fetchOnce(ctx, parts, maxTotal, committed)
		code = worse(denied, code)
		if total > 0 || code != fetchcache.CodeOK || throttle > 0 || q.MinBytes <= 0 || wait <= 0 || !time.Now().Before(deadline) {
			return r, code, throttle
		}
		if !s.waitForData(ctx, kc, parts, committed, deadline) {
			return r, code, throttle
		}
	}
}

// fetchOnce fills every partition's response once. The first partition with
// data gets at least one whole batch even when it exceeds the byte limits
// (KIP-74); later ones get only what fits.
func (s *KafkaServer) fetchOnce(ctx context.Context, parts []*fetchPart, maxTotal int, committed bool) (int, string, time.Duration) {
	total := 0
	code := fetchcache.CodeOK
	var throttle time.Duration
	for _, fp := range parts {
		rp := fp.resp
		*rp = kmsg.NewFetchResponseTopicPartition()
		rp.Partition = fp.q.Partition
		// Never null: librdkafka refuses a null record set ("invalid
		// MessageSetSize -1").
		rp.RecordBatches = []byte{}
		fp.failed = false
		fail := func(op string, err error) {
			if d, ok := gate.RetryAfter(err); ok {
				// Kafka's fetch throttling, whatever step was overloaded
				// (opening the partition, its manifest, the read): no
				// error, no data, and throttle_time_ms tells the client
				// when to come back.
				throttle = max(throttle, d)
				code = worse(code, fetchcache.CodeThrottled)
				return
			}
			var c string
			rp.ErrorCode, c = s.partitionError(op, fp.topic, fp.q.Partition, err)
			code = worse(code, c)
			fp.failed = true
		}
		if fp.part == nil {
			p, err := s.o.Catalog.Partition(ctx, fp.topic, fp.q.Partition)
			if err != nil {
				fail("fetch", err)
				continue
			}
			fp.part = p
		}
		off, err := fp.part.Offsets(ctx)
		if err != nil {
			fail("fetch offsets", err)
			continue
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
		if committed {
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
		offset := fp.q.FetchOffset
		if offset < off.LogStart || offset > off.LogEnd {
			// fetchcache.Offsets may come from a cache (a remote manifest); a read
			// past the end re-reads it, and decides.
			if _, err := fp.part.Read(ctx, offset, 1); err != nil {
				if _, ok := gate.RetryAfter(err); !ok {
					fail("fetch", err)
					continue
				}
			}
			if off, err = fp.part.Offsets(ctx); err != nil {
				fail("fetch offsets", err)
				continue
			}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
			if offset < off.LogStart || offset > off.LogEnd {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				code = worse(code, fetchcache.CodeOffsetOutOfRange)
				fp.failed = true
				continue
			}
		}
		limit := off.LogEnd
		if committed {
			limit = off.LastStable
		}
		budget := min(int(max(fp.q.PartitionMaxBytes, 0)), maxTotal-total)
		if offset >= limit || budget <= 0 && total > 0 {
			continue
		}
		// Shared cache memory where possible: the response only reads it.
		data, err := fetchcache.ReadShared(ctx, fp.part, offset, max(budget, 1))
		if err != nil {
			fail("fetch", err)
			continue
		}
		data, last := cutAt(data, limit)
		if len(data) == 0 || (total > 0 && len(data) > budget) {
			continue
		}
		rp.RecordBatches = data
		total += len(data)
		if committed {
			txns, err := fp.part.AbortedTxns(ctx, offset, last)
			if err != nil {
				rp.RecordBatches = nil
				total -= len(data)
				fail("fetch aborted transactions", err)
				continue
			}
			for _, t := range txns {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = t.ProducerID, t.FirstOffset
				rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			}
		}
	}
	return total, code, throttle
}

// cutAt drops the batches of whole batches data that start at or after
// limit (the high watermark or the last stable offset) and returns the
// offset after the last batch kept.
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
			return false
		case <-stopping:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
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
	}
}
