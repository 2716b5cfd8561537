package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const leaveGroupKey int16 = 13

// leaveGroupAPI serves LeaveGroup v0-5 (v3+: a batch of members, by member
// id or group.instance.id).
var leaveGroupAPI = api{key: leaveGroupKey, min: 0, max: 5, group: true, handle: handler((*KafkaServer).leaveGroup)}

func (s *KafkaServer) leaveGroup(_ context.Context, kc *kafkaConn, q *kmsg.LeaveGroupRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = q.Version
	switch {
	case !s.groupAllowed(kc, q.Group):
		r.ErrorCode = kerr.GroupAuthorizationFailed.Code
	default:
		r = s.coordinator().Leave(q) // checks ownership first
	}
	code := r.ErrorCode
	for _, m := range r.Members {
		if code == 0 {
			code = m.ErrorCode
		}
	}
	return r, groupCode(code), 0
}
