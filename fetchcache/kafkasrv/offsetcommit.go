package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/auth"
)

const offsetCommitKey int16 = 8

// offsetCommitAPI serves OffsetCommit v2-9 (Kafka 4.0 removed v0-1,
// KIP-896; v10 names topics by id, which the group objects do not).
// A topic's offsets need read on it (Kafka's READ), besides the group.
var offsetCommitAPI = api{key: offsetCommitKey, min: 2, max: 9, group: true, perm: auth.PermRead, handle: handler((*KafkaServer).offsetCommit)}

// offsetCommit answers once the commit is durable in the bucket. Each
// offset records the topic ID its topic is served under (topicIDs), so that
// a topic deleted and re-created under the name does not resume at the old
// incarnation's offsets.
func (s *KafkaServer) offsetCommit(ctx context.Context, kc *kafkaConn, q *kmsg.OffsetCommitRequest) (kmsg.Response, string, time.Duration) {
	groupErr := int16(0)
	if !s.groupAllowed(kc, q.Group) {
		groupErr = kerr.GroupAuthorizationFailed.Code
	} else {
		groupErr = s.coordinator().Owner(q.Group)
	}
	denied := make([]bool, len(q.Topics))
	sub := *q
	sub.Topics = nil
	if groupErr == 0 {
		for i, t := range q.Topics {
			if denied[i] = !s.allowed(ctx, kc, t.Topic); !denied[i] {
				sub.Topics = append(sub.Topics, t)
			}
		}
	}
	var done *kmsg.OffsetCommitResponse
	if groupErr == 0 && len(sub.Topics) > 0 {
		done = s.coordinator().Commit(ctx, &sub, s.topicIDs())
	}
	r := kmsg.NewPtrOffsetCommitResponse()
	r.Version = q.Version
	worst := int16(0)
	next := 0
	for i, t := range q.Topics {
		var rt kmsg.OffsetCommitResponseTopic
		switch {
		case groupErr != 0 || denied[i]:
			code := groupErr
			if code == 0 {
				code = kerr.TopicAuthorizationFailed.Code
			}
			rt = kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
		default:
			rt = done.Topics[next]
			next++
		}
		for _, p := range rt.Partitions {
			if worst == 0 {
				worst = p.ErrorCode
			}
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, groupCode(worst), 0
}
