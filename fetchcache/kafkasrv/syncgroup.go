package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const syncGroupKey int16 = 14

// syncGroupAPI serves SyncGroup v0-5 (v3+ static membership; v5 protocol
// type and name).
var syncGroupAPI = api{key: syncGroupKey, min: 0, max: 5, group: true, handle: handler((*KafkaServer).syncGroup)}

// syncGroup relays the leader's assignment: a follower's waits for it.
func (s *KafkaServer) syncGroup(ctx context.Context, kc *kafkaConn, q *kmsg.SyncGroupRequest) (kmsg.Response, string, time.Duration) {
	if !s.groupAllowed(kc, q.Group) {
		code := kerr.GroupAuthorizationFailed.Code
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode, r.MemberAssignment = q.Version, code, []byte{}
		return r, groupCode(code), 0
	}
	ctx, cancel := groupContext(ctx, kc)
	defer cancel()
	r := s.coordinator().Sync(ctx, q) // checks ownership first
	return r, groupCode(r.ErrorCode), 0
}
