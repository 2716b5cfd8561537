package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const heartbeatKey int16 = 12

// heartbeatAPI serves Heartbeat v0-4 (v3+ static membership).
var heartbeatAPI = api{key: heartbeatKey, min: 0, max: 4, group: true, handle: handler((*KafkaServer).heartbeat)}

func (s *KafkaServer) heartbeat(_ context.Context, kc *kafkaConn, q *kmsg.HeartbeatRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = q.Version
	switch {
	case !s.groupAllowed(kc, q.Group):
		r.ErrorCode = kerr.GroupAuthorizationFailed.Code
	default:
		r = s.coordinator().Heartbeat(q) // checks ownership first
	}
	return r, groupCode(r.ErrorCode), 0
}
