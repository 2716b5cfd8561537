package kafkasrv

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groups"
)

// The consumer-group APIs (findcoordinator.go, joingroup.go, syncgroup.go,
// heartbeat.go, leavegroup.go, offsetcommit.go, offsetfetch.go,
// describegroups.go, listgroups.go, deletegroups.go, offsetdelete.go) are
// served by KafkaOptions.Groups, the coordinator (fetchcache/groups). Without
// one, or on a bucket the service may only read, they answer
// COORDINATOR_NOT_AVAILABLE while every read goes on. Each checks the
// principal's auth.acls groups entry (GROUP_AUTHORIZATION_FAILED); the
// offset APIs check the topic too (the registry's perm); deleting groups
// or offsets needs admin.

// coordinator is the listener's group coordinator, nil when none.
func (s *KafkaServer) coordinator() *groups.Coordinator { return s.o.Groups }

// groupAllowed reports whether the connection's principal may use group
// (its auth.acls groups patterns) and logs a denial.
func (s *KafkaServer) groupAllowed(kc *kafkaConn, group string) bool {
	p := kc.principalOf()
	if s.o.Auth.GroupAllowed(p, group) {
		return true
	}
	s.o.Auth.LogGroupDenied(s.log, fetchcache.InterfaceKafka, p, group, kc.remote())
	return false
}

// adminAllowed reports whether the principal has admin (group and offset
// deletion) and logs a denial.
func (s *KafkaServer) adminAllowed(kc *kafkaConn) bool {
	p := kc.principalOf()
	if s.o.Auth.May(p, auth.PermAdmin, "") {
		return true
	}
	s.o.Auth.LogDenied(s.log, fetchcache.InterfaceKafka, p, auth.PermAdmin, "", kc.remote())
	return false
}

// Bounds on the groups of one OffsetFetch (v8+, several groups) or
// DescribeGroups; Kafka has none. maxRequestGroupEntries bounds the
// entries (a megabyte frame holds hundreds of thousands of one-byte ids,
// and repeats of one large group each carry its whole answer): a request
// with more is refused whole (every group INVALID_REQUEST) and the
// connection closed, as a Fetch over MaxFetchPartitions is.
// maxRequestGroups bounds the distinct groups one request looks up (a group
// without members is read from the bucket, for its offsets or its state):
// the groups after those are answered COORDINATOR_LOAD_IN_PROGRESS, which
// clients retry (the Java AdminClient asks again for those groups), so an
// admin tool listing many groups' offsets gets them a thousand at a time.
// Within a request a repeated group is looked up once and answered where
// it appears.
// maxGroupAnswerBytes bounds the answer itself (the groups' descriptions
// or committed offsets, each repeat carrying its group's whole answer, of
// up to thousands of members' metadata or offsets with 4 KiB of metadata
// each): a request whose answer would hold more is refused whole too,
// before more of it is built.
const (
	maxRequestGroupEntries = 10000
	maxRequestGroups       = 1000
	maxGroupAnswerBytes    = 64 << 20
)

// tooManyGroupEntries reports whether a request of n group entries is over
// maxRequestGroupEntries; if so it refuses it (refuseGroups).
func (s *KafkaServer) tooManyGroupEntries(kc *kafkaConn, api string, n int) bool {
	if n <= maxRequestGroupEntries {
		return false
	}
	s.refuseGroups(kc, api, "too many groups", "groups", n, "max", maxRequestGroupEntries)
	return true
}

// refuseGroups logs the refusal of a group request and closes the
// connection after its answer (every group INVALID_REQUEST).
func (s *KafkaServer) refuseGroups(kc *kafkaConn, api, why string, kv ...any) {
	s.log.Warn("kafka "+api+" refused: "+why+", closing connection", append([]any{"remote", kc.remote()}, kv...)...)
	if kc != nil {
		kc.closeAfter = true
	}
}

// describedBytes is about what a group's description adds to an answer.
func describedBytes(d kmsg.DescribeGroupsResponseGroup) int {
	n := 64 + len(d.Group) + len(d.State) + len(d.ProtocolType) + len(d.Protocol)
	for _, m := range d.Members {
		n += 32 + len(m.MemberID) + len(m.ClientID) + len(m.ClientHost) + len(m.ProtocolMetadata) + len(m.MemberAssignment)
		if m.InstanceID != nil {
			n += len(*m.InstanceID)
		}
	}
	return n
}

// fetchedBytes is about what a group's committed offsets add to an answer.
func fetchedBytes(group string, topics []fetchedTopic) int {
	n := 32 + len(group)
	for _, t := range topics {
		n += 16 + len(t.topic)
		for _, p := range t.parts {
			n += 24
			if p.Metadata != nil {
				n += len(*p.Metadata)
			}
		}
	}
	return n
}

// groupCode is the metrics result code of a group API's Kafka error.
func groupCode(code int16) string {
	switch code {
	case 0:
		return fetchcache.CodeOK
	case kerr.GroupAuthorizationFailed.Code:
		return fetchcache.CodeGroupAuthorizationFailed
	case kerr.TopicAuthorizationFailed.Code:
		return fetchcache.CodeTopicAuthorizationFailed
	case kerr.ClusterAuthorizationFailed.Code:
		return fetchcache.CodeClusterAuthorizationFailed
	case kerr.CoordinatorNotAvailable.Code:
		return fetchcache.CodeCoordinatorNotAvailable
	case kerr.NotCoordinator.Code:
		return fetchcache.CodeNotCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		return fetchcache.CodeThrottled // more groups than one request reads
	case kerr.InvalidGroupID.Code, kerr.InvalidSessionTimeout.Code, kerr.InconsistentGroupProtocol.Code,
		kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code:
		return fetchcache.CodeInvalidRequest
	default: // the protocol's own flow: rebalance, fencing, empty or unknown groups
		return fetchcache.CodeGroupMembership
	}
}

// groupContext is ctx ended also when a graceful shutdown begins, for the
// requests that wait on a rebalance (JoinGroup, SyncGroup): they are
// answered REBALANCE_IN_PROGRESS then and the shutdown need not wait.
func groupContext(ctx context.Context, kc *kafkaConn) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if kc == nil || kc.stopping == nil {
		return ctx, cancel
	}
	go func() {
		select {
		case <-kc.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// client is the coordinator's view of the connection: client.id and the
// host as Kafka shows it ("/" and the address).
func (kc *kafkaConn) client() groups.Client {
	if kc == nil {
		return groups.Client{}
	}
	cl := groups.Client{ID: kc.clientID}
	if kc.c != nil {
		host := kc.c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		cl.Host = "/" + host
	}
	return cl
}
