package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
)

const produceKey int16 = 0

// produceAPI advertises Produce v3-9 (librdkafka picks modern Fetch
// versions only when the broker has Produce v3+) and refuses it per
// partition with POLICY_VIOLATION; acks=0 gets no response.
var produceAPI = api{key: produceKey, min: 3, max: 9, handle: handler((*KafkaServer).produce)}

// produceRefusal is the error message of refused produce partitions (v8+).
const produceRefusal = "tiered's fetch service is read-only: produce to the broker (or with tiered produce)"

// produce refuses every partition of q with POLICY_VIOLATION; acks=0 gets
// no response.
func (s *KafkaServer) produce(_ context.Context, _ *kafkaConn, q *kmsg.ProduceRequest) (kmsg.Response, string, time.Duration) {
	if q.Acks == 0 {
		return nil, fetchcache.CodePolicyViolation, 0 // acks=0: no response is expected
	}
	r := kmsg.NewPtrProduceResponse()
	r.Version = q.Version
	for _, qt := range q.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = qt.Topic
		for _, qp := range qt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = qp.Partition
			rp.ErrorCode = kerr.PolicyViolation.Code
			msg := produceRefusal
			rp.ErrorMessage = &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, fetchcache.CodePolicyViolation, 0
}
