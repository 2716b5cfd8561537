package kafkasrv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/gate"
)

const listOffsetsKey int16 = 2

// listOffsetsAPI serves ListOffsets v1-9 (v7: max timestamp; v8:
// earliest local, KIP-405; v9: latest tiered, KIP-1005).
var listOffsetsAPI = api{key: listOffsetsKey, min: 1, max: 9, perm: auth.PermRead, handle: handler((*KafkaServer).listOffsets)}

// ListOffsets special timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3 // v7+
	listEarliestLocal = -4 // v8+: the local log start offset
	listLatestTiered  = -5 // v9+: the highest offset in remote storage (-1: none)
)

func (s *KafkaServer) listOffsets(ctx context.Context, kc *kafkaConn, q *kmsg.ListOffsetsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrListOffsetsResponse()
	r.Version = q.Version
	code := fetchcache.CodeOK
	var throttle time.Duration
	for _, qt := range q.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = qt.Topic
		allowed := s.allowed(ctx, kc, qt.Topic)
		for _, qp := range qt.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = qp.Partition
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.Offset, rp.Timestamp = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				code = worse(code, fetchcache.CodeTopicAuthorizationFailed)
				continue
			}
			off, ts, err := s.listOffset(ctx, qt.Topic, qp.Partition, qp.Timestamp, q.IsolationLevel == 1, q.Version)
			switch {
			case err == nil:
				rp.Offset, rp.Timestamp = off, ts
			case errors.Is(err, errBadListTimestamp):
				rp.ErrorCode = kerr.InvalidRequest.Code
				code = worse(code, fetchcache.CodeInvalidRequest)
			default:
				if d, ok := gate.RetryAfter(err); ok {
					// Retriable, and says why; the throttle paces the retry.
					rp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
					throttle = max(throttle, d)
					code = worse(code, fetchcache.CodeThrottled)
					break
				}
				var c string
				rp.ErrorCode, c = s.partitionError("list offsets", qt.Topic, qp.Partition, err)
				code = worse(code, c)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, code, throttle
}

var errBadListTimestamp = errors.New("unsupported ListOffsets timestamp")

// listOffset resolves one ListOffsets query the way Kafka's
// fetchOffsetForTimestamp does; no match is offset -1, timestamp -1.
func (s *KafkaServer) listOffset(ctx context.Context, topic string, partition int32, ts int64, committed bool, version int16) (int64, int64, error) {
	part, err := s.o.Catalog.Partition(ctx, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	off, err := part.Offsets(fetchcache.WithOffsetsListing(ctx))
	if err != nil {
		return 0, 0, err
	}
	limit := off.LogEnd
	if committed {
		limit = off.LastStable
	}
	switch {
	case ts == listEarliest:
		return off.LogStart, -1, nil
	case ts == listLatest:
		return limit, -1, nil
	case ts == listMaxTimestamp && version >= 7:
		sl, ok := part.(fetchcache.SegmentLister)
		if !ok {
			return 0, 0, fmt.Errorf("%w: max timestamp needs segment listing", errBadListTimestamp)
		}
		segs, err := sl.Segments(ctx)
		if err != nil {
			return 0, 0, err
		}
		maxTS := int64(-1)
		for _, seg := range segs {
			if seg.NextOffset > off.LogStart {
				maxTS = max(maxTS, seg.MaxTimestamp)
			}
		}
		if maxTS < 0 {
			return -1, -1, nil
		}
		ts = maxTS
	case ts == listEarliestLocal && version >= 8, ts == listLatestTiered && version >= 9:
		tl, ok := part.(fetchcache.TierLister)
		if !ok {
			return 0, 0, fmt.Errorf("%w: %d needs the partition's tiers", errBadListTimestamp, ts)
		}
		t, err := tl.Tiers(ctx, ts == listLatestTiered)
		if err != nil {
			return 0, 0, err
		}
		if ts == listEarliestLocal {
			return t.LocalStart, -1, nil
		}
		return t.HighestTiered, -1, nil
	case ts < 0:
		return 0, 0, fmt.Errorf("%w: %d", errBadListTimestamp, ts)
	}
	o, t, found, err := part.OffsetForTimestamp(ctx, ts)
	if err != nil {
		return 0, 0, err
	}
	if !found || o >= limit {
		return -1, -1, nil
	}
	return o, t, nil
}
