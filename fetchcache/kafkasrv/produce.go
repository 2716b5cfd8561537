package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
)

const produceKey int16 = 0

// produceAPI advertises Produce v3-9 (librdkafka picks modern Fetch
// versions only when the broker has Produce v3+) and refuses it per
// partition: TOPIC_AUTHORIZATION_FAILED without write on the topic, else
// POLICY_VIOLATION; acks=0 gets no response, and the connection is closed.
var produceAPI = api{key: produceKey, min: 3, max: 9, perm: auth.PermWrite, handle: handler((*KafkaServer).produce)}

// produceRefusal is the error message of refused produce partitions (v8+).
const produceRefusal = "tiered's fetch service is read-only: produce to the broker (or with tiered produce)"

// produce refuses every partition of q: TOPIC_AUTHORIZATION_FAILED for a
// topic the principal may not write, POLICY_VIOLATION for the others;
// acks=0 gets no response: as Kafka does when an acks=0 request had any
// partition fail, the connection is closed then, so the producer learns of
// it (KafkaApis.handleProduceRequest).
func (s *KafkaServer) produce(ctx context.Context, kc *kafkaConn, q *kmsg.ProduceRequest) (kmsg.Response, string, time.Duration) {
	code := fetchcache.CodePolicyViolation
	r := kmsg.NewPtrProduceResponse()
	r.Version = q.Version
	refused := false // some partition was refused (all are)
	for _, qt := range q.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = qt.Topic
		allowed := s.allowed(ctx, kc, qt.Topic)
		if !allowed {
			code = fetchcache.CodeTopicAuthorizationFailed
		}
		for _, qp := range qt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = qp.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if allowed {
				rp.ErrorCode = kerr.PolicyViolation.Code
				msg := produceRefusal
				rp.ErrorMessage = &msg
			} else {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
			refused = true
		}
		r.Topics = append(r.Topics, rt)
	}
	if q.Acks == 0 {
		// acks=0: no response is expected; a refused partition closes
		// the connection.
		if kc != nil && refused {
			kc.closeAfter = true
		}
		return nil, code, 0
	}
	return r, code, 0
}
