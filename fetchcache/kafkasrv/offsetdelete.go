package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/auth"
)

const offsetDeleteKey int16 = 47

// offsetDeleteAPI serves OffsetDelete v0. It needs admin and the group (as
// DeleteGroups), and read on each topic (Kafka's READ).
var offsetDeleteAPI = api{key: offsetDeleteKey, min: 0, max: 0, group: true, admin: true, perm: auth.PermRead, handle: handler((*KafkaServer).offsetDelete)}

func (s *KafkaServer) offsetDelete(ctx context.Context, kc *kafkaConn, q *kmsg.OffsetDeleteRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrOffsetDeleteResponse()
	r.Version = q.Version
	switch {
	case !s.adminAllowed(kc) || !s.groupAllowed(kc, q.Group):
		r.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return r, groupCode(r.ErrorCode), 0
	}
	if r.ErrorCode = s.coordinator().Owner(q.Group); r.ErrorCode != 0 {
		return r, groupCode(r.ErrorCode), 0
	}
	var allowedTopics []kmsg.OffsetDeleteRequestTopic
	denied := map[string]bool{}
	for _, t := range q.Topics {
		if s.allowed(ctx, kc, t.Topic) {
			allowedTopics = append(allowedTopics, t)
		} else {
			denied[t.Topic] = true
		}
	}
	code, perTopic := s.coordinator().DeleteOffsets(ctx, q.Group, allowedTopics)
	if r.ErrorCode = code; code != 0 {
		return r, groupCode(code), 0
	}
	worst := int16(0)
	for _, t := range q.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		c := perTopic[t.Topic]
		if denied[t.Topic] {
			c = kerr.TopicAuthorizationFailed.Code
		}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: c})
		}
		if worst == 0 {
			worst = c
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, groupCode(worst), 0
}
