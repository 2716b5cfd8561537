package kafkasrv

import (
	"context"
	"math"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const describeGroupsKey int16 = 15

// describeGroupsAPI serves DescribeGroups v0-5 (v3+ authorized operations,
// v4+ group.instance.id).
var describeGroupsAPI = api{key: describeGroupsKey, min: 0, max: 5, group: true, handle: handler((*KafkaServer).describeGroups)}

// Kafka's ACL operation bits (AclOperation) a group may show: READ (3),
// DESCRIBE (8) and, with admin, DELETE (6).
const (
	aclOpRead     = 3
	aclOpDelete   = 6
	aclOpDescribe = 8
)

func (s *KafkaServer) describeGroups(ctx context.Context, kc *kafkaConn, q *kmsg.DescribeGroupsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrDescribeGroupsResponse()
	r.Version = q.Version
	worst := int16(0)
	// The operations a group's answer lists: asking is no denial to log.
	admin := q.IncludeAuthorizedOperations && s.o.Auth.May(kc.principalOf(), auth.PermAdmin, "")
	refuse := func() (kmsg.Response, string, time.Duration) {
		r.Groups = r.Groups[:0]
		for _, id := range q.Groups {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode, d.AuthorizedOperations = id, kerr.InvalidRequest.Code, math.MinInt32
			r.Groups = append(r.Groups, d)
		}
		return r, fetchcache.CodeInvalidRequest, 0
	}
	if s.tooManyGroupEntries(kc, "describe groups", len(q.Groups)) {
		return refuse()
	}
	size := 0                                                 // of the answer so far (describedBytes)
	answered := map[string]kmsg.DescribeGroupsResponseGroup{} // repeats collapse
	looked := 0                                               // groups asked of the coordinator
	for _, id := range q.Groups {
		d, ok := answered[id]
		switch {
		case ok:
		case !s.groupAllowed(kc, id):
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		case looked >= maxRequestGroups:
			// A group not in memory is read from the bucket: the rest
			// wait for another request (groups.go).
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = id, kerr.CoordinatorLoadInProgress.Code
		default:
			looked++
			d = s.coordinator().Describe(ctx, id) // checks ownership first
		}
		d.AuthorizedOperations = math.MinInt32 // not asked for
		if q.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			ops := int32(1<<aclOpRead | 1<<aclOpDescribe)
			if admin {
				ops |= 1 << aclOpDelete
			}
			d.AuthorizedOperations = ops
		}
		if worst == 0 {
			worst = d.ErrorCode
		}
		answered[id] = d
		r.Groups = append(r.Groups, d)
		if size += describedBytes(d); size > maxGroupAnswerBytes {
			s.refuseGroups(kc, "describe groups", "answer too large", "groups", len(q.Groups), "max_bytes", maxGroupAnswerBytes)
			return refuse()
		}
	}
	return r, groupCode(worst), 0
}
