package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const deleteGroupsKey int16 = 42

// deleteGroupsAPI serves DeleteGroups v0-2. Deleting a group and its
// committed offsets needs admin (as `tiered groups delete` does), and the
// group in the principal's groups patterns.
var deleteGroupsAPI = api{key: deleteGroupsKey, min: 0, max: 2, group: true, admin: true, handle: handler((*KafkaServer).deleteGroups)}

func (s *KafkaServer) deleteGroups(ctx context.Context, kc *kafkaConn, q *kmsg.DeleteGroupsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrDeleteGroupsResponse()
	r.Version = q.Version
	admin := s.adminAllowed(kc)
	worst := int16(0)
	for _, id := range q.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		switch {
		case !admin || !s.groupAllowed(kc, id):
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		default:
			g.ErrorCode = s.coordinator().Delete(ctx, id) // checks ownership first
		}
		if worst == 0 {
			worst = g.ErrorCode
		}
		r.Groups = append(r.Groups, g)
	}
	return r, groupCode(worst), 0
}
