package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const joinGroupKey int16 = 11

// joinGroupAPI serves JoinGroup v2-9 (Kafka 4.0 removed v0-1, KIP-896;
// v4+ answers a first join MEMBER_ID_REQUIRED, KIP-394; v5+ static
// membership; v9 SkipAssignment).
var joinGroupAPI = api{key: joinGroupKey, min: 2, max: 9, group: true, handle: handler((*KafkaServer).joinGroup)}

// joinGroup blocks until the group's rebalance completes (or the listener
// shuts down: REBALANCE_IN_PROGRESS, and the client rejoins elsewhere).
func (s *KafkaServer) joinGroup(ctx context.Context, kc *kafkaConn, q *kmsg.JoinGroupRequest) (kmsg.Response, string, time.Duration) {
	fail := func(code int16) (kmsg.Response, string, time.Duration) {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version, r.ErrorCode, r.Generation, r.MemberID = q.Version, code, -1, q.MemberID
		r.Protocol = new(string)
		if q.Version >= 7 {
			r.ProtocolType = new(string)
		}
		return r, groupCode(code), 0
	}
	if !s.groupAllowed(kc, q.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	ctx, cancel := groupContext(ctx, kc)
	defer cancel()
	r := s.coordinator().Join(ctx, kc.client(), q) // checks ownership first
	return r, groupCode(r.ErrorCode), 0
}
