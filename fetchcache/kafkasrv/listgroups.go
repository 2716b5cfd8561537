package kafkasrv

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const listGroupsKey int16 = 16

// listGroupsAPI serves ListGroups v0-5 (v4+ filter by state, v5+ by type:
// every group here is "classic").
var listGroupsAPI = api{key: listGroupsKey, min: 0, max: 5, group: true, handle: handler((*KafkaServer).listGroups)}

// listGroups lists the groups this replica coordinates that the principal
// may use (Kafka lists those it may describe).
func (s *KafkaServer) listGroups(ctx context.Context, kc *kafkaConn, q *kmsg.ListGroupsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrListGroupsResponse()
	r.Version = q.Version
	c := s.coordinator()
	if c == nil {
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return r, groupCode(r.ErrorCode), 0
	}
	if code := c.Owner(""); code == kerr.CoordinatorNotAvailable.Code {
		r.ErrorCode = code
		return r, groupCode(code), 0
	}
	all, err := c.List(ctx)
	if err != nil {
		s.log.Warn("kafka list groups", "err", err)
		r.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return r, groupCode(r.ErrorCode), 0
	}
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range all {
		if !match(q.StatesFilter, g.GroupState) || !match(q.TypesFilter, g.GroupType) || !s.o.Auth.GroupAllowed(kc.principalOf(), g.Group) {
			// Not the principal's to see: left out, not a denial to log.
			continue
		}
		r.Groups = append(r.Groups, g)
	}
	return r, groupCode(0), 0
}
