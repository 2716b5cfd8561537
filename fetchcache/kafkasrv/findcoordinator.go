package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const findCoordinatorKey int16 = 10

// findCoordinatorAPI serves FindCoordinator v0-6 (v4+: a batch of keys).
var findCoordinatorAPI = api{key: findCoordinatorKey, min: 0, max: 6, group: true, handle: handler((*KafkaServer).findCoordinator)}

// Coordinator types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// findCoordinator names the replica that coordinates each group: this one
// (its advertised address), or the one the fleet's Ring names.
// Transaction coordinators are not served (the service takes no writes).
func (s *KafkaServer) findCoordinator(_ context.Context, kc *kafkaConn, q *kmsg.FindCoordinatorRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrFindCoordinatorResponse()
	r.Version = q.Version
	keys := q.CoordinatorKeys
	if q.Version < 4 {
		keys = []string{q.CoordinatorKey}
	}
	worst := int16(0)
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = key, -1, -1
		c.ErrorCode = s.locate(kc, q.CoordinatorType, key, &c)
		if c.ErrorCode != 0 {
			msg := kerr.ErrorForCode(c.ErrorCode).Error()
			c.ErrorMessage = &msg
			c.NodeID, c.Host, c.Port = -1, "", -1
			if worst == 0 {
				worst = c.ErrorCode
			}
		}
		r.Coordinators = append(r.Coordinators, c)
	}
	if q.Version < 4 {
		c := r.Coordinators[0]
		r.ErrorCode, r.NodeID, r.Host, r.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		if q.Version >= 1 {
			r.ErrorMessage = c.ErrorMessage
		}
		r.Coordinators = nil
	}
	return r, groupCode(worst), 0
}

func (s *KafkaServer) locate(kc *kafkaConn, typ int8, key string, c *kmsg.FindCoordinatorResponseCoordinator) int16 {
	switch {
	case typ == coordinatorTransaction:
		// No transactional writes: Kafka's answer to a principal that
		// may not use transactional ids.
		return kerr.TransactionalIDAuthorizationFailed.Code
	case typ != coordinatorGroup:
		return kerr.InvalidRequest.Code
	case !s.groupAllowed(kc, key):
		return kerr.GroupAuthorizationFailed.Code
	}
	co := s.coordinator()
	if co == nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	node, self, err := co.Ring().Coordinator(key)
	switch {
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	case self:
		if code := co.Owner(key); code != 0 {
			return code
		}
		c.Host, c.Port = s.broker(kc)
		c.NodeID = s.o.NodeID
	default:
		c.NodeID, c.Host, c.Port = node.ID, node.Host, node.Port
	}
	return 0
}
