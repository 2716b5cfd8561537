package kafkasrv

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// versionsOfAPI is the served range of key.
func versionsOfAPI(t *testing.T, key int16) (int16, int16) {
	t.Helper()
	a := registered(key)
	if a == nil {
		t.Fatalf("API %d not registered", key)
	}
	return a.min, a.max
}

// TestGroupAPIsEveryVersion sends every served version of each group API
// over a raw connection and decodes the answer with kmsg: the fields each
// version carries (v0-3 FindCoordinator's single coordinator, v4+ batch;
// LeaveGroup's v3+ members; OffsetFetch's v1 per-partition errors and v8+
// groups) hold what the coordinator decided.
func TestGroupAPIsEveryVersion(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 2, nil)
	c := startCoordinator(t, objstore.NewMemory(), nil)
	addr := startKafka(t, e.Cat, KafkaOptions{Groups: c, NodeID: 7})
	rc := fetchkit.DialRaw(t, addr)
	corr := int32(0)
	do := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		corr++
		resp := req.ResponseKind()
		if err := rc.Request(corr, req, resp); err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		return resp
	}
	want := func(what string, got, w int16) {
		t.Helper()
		if got != w {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
		}
	}

	lo, hi := versionsOfAPI(t, findCoordinatorKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrFindCoordinatorRequest()
		q.Version, q.CoordinatorKey, q.CoordinatorKeys = v, "g", []string{"g", "h"}
		r := do(q).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if r.ErrorCode != 0 || r.NodeID != 7 || r.Host == "" || r.Port <= 0 {
				t.Errorf("FindCoordinator v%d: %+v", v, r)
			}
			continue
		}
		if len(r.Coordinators) != 2 || r.Coordinators[1].Key != "h" || r.Coordinators[0].NodeID != 7 || r.Coordinators[0].ErrorCode != 0 {
			t.Errorf("FindCoordinator v%d: %+v", v, r.Coordinators)
		}
	}
	q := kmsg.NewPtrFindCoordinatorRequest()
	q.Version, q.CoordinatorKey, q.CoordinatorType = 3, "txn", 1
	want("FindCoordinator for a transaction", do(q).(*kmsg.FindCoordinatorResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed.Code)

	lo, hi = versionsOfAPI(t, joinGroupKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrJoinGroupRequest()
		q.Version, q.Group, q.SessionTimeoutMillis, q.RebalanceTimeoutMillis = v, fmt.Sprintf("j%d", v), 6000, 6000
		q.ProtocolType, q.Protocols = "consumer", []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
		r := do(q).(*kmsg.JoinGroupResponse)
		if v < 4 {
			// No KIP-394 before v4: the join completes (after the initial delay).
			if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 {
				t.Errorf("JoinGroup v%d: %+v", v, r)
			}
			continue
		}
		if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
			t.Errorf("JoinGroup v%d: %v %q, want MEMBER_ID_REQUIRED with an id", v, kerr.ErrorForCode(r.ErrorCode), r.MemberID)
		}
	}

	lo, hi = versionsOfAPI(t, syncGroupKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrSyncGroupRequest()
		q.Version, q.Group, q.MemberID, q.Generation = v, "j2", "nobody", 1
		want(fmt.Sprintf("SyncGroup v%d of an unknown member", v), do(q).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID.Code)
	}
	lo, hi = versionsOfAPI(t, heartbeatKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrHeartbeatRequest()
		q.Version, q.Group, q.MemberID, q.Generation = v, "j2", "nobody", 1
		want(fmt.Sprintf("Heartbeat v%d of an unknown member", v), do(q).(*kmsg.HeartbeatResponse).ErrorCode, kerr.UnknownMemberID.Code)
	}
	lo, hi = versionsOfAPI(t, leaveGroupKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrLeaveGroupRequest()
		q.Version, q.Group, q.MemberID = v, "j2", "nobody"
		q.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "nobody"}}
		r := do(q).(*kmsg.LeaveGroupResponse)
		if v < 3 {
			want(fmt.Sprintf("LeaveGroup v%d", v), r.ErrorCode, kerr.UnknownMemberID.Code)
			continue
		}
		if r.ErrorCode != 0 || len(r.Members) != 1 || r.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
			t.Errorf("LeaveGroup v%d: %+v", v, r)
		}
	}

	// Commits at every version, read back at every version.
	lo, hi = versionsOfAPI(t, offsetCommitKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrOffsetCommitRequest()
		md := fmt.Sprintf("v%d", v)
		q.Version, q.Group, q.Generation = v, "c", -1
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: int64(100 + v), LeaderEpoch: 3, Metadata: &md}}}}
		want(fmt.Sprintf("OffsetCommit v%d", v), do(q).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, 0)
	}
	lastCommit := int64(100 + hi)
	lo, hi = versionsOfAPI(t, offsetFetchKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version = v
		var parts []kmsg.OffsetFetchResponseGroupTopicPartition
		if v >= 8 {
			q.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "c", MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}},
				{Group: "missing", MemberEpoch: -1}}
			r := do(q).(*kmsg.OffsetFetchResponse)
			if len(r.Groups) != 2 || r.Groups[1].ErrorCode != 0 || len(r.Groups[1].Topics) != 0 {
				t.Errorf("OffsetFetch v%d groups: %+v", v, r.Groups)
				continue
			}
			parts = r.Groups[0].Topics[0].Partitions
		} else {
			q.Group, q.Topics = "c", []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
			r := do(q).(*kmsg.OffsetFetchResponse)
			for _, p := range r.Topics[0].Partitions {
				parts = append(parts, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
			}
		}
		if len(parts) != 2 || parts[0].Offset != lastCommit || *parts[0].Metadata != "v9" || parts[1].Offset != -1 {
			t.Errorf("OffsetFetch v%d: %+v", v, parts)
		}
		if v >= 5 && parts[0].LeaderEpoch != 3 {
			t.Errorf("OffsetFetch v%d: leader epoch %d, want 3", v, parts[0].LeaderEpoch)
		}
	}

	lo, hi = versionsOfAPI(t, describeGroupsKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrDescribeGroupsRequest()
		q.Version, q.Groups, q.IncludeAuthorizedOperations = v, []string{"c", "j2", "never"}, true
		r := do(q).(*kmsg.DescribeGroupsResponse)
		if len(r.Groups) != 3 || r.Groups[0].State != "Empty" || r.Groups[1].State != "CompletingRebalance" || len(r.Groups[1].Members) != 1 || r.Groups[2].State != "Dead" {
			t.Errorf("DescribeGroups v%d: %+v", v, r.Groups)
		}
	}
	lo, hi = versionsOfAPI(t, listGroupsKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrListGroupsRequest()
		q.Version = v
		if v >= 4 {
			q.StatesFilter = []string{"Empty"}
		}
		r := do(q).(*kmsg.ListGroupsResponse)
		found := false
		for _, g := range r.Groups {
			found = found || g.Group == "c"
			if v >= 4 && g.GroupState != "Empty" {
				t.Errorf("ListGroups v%d filtered Empty: %+v", v, g)
			}
		}
		if r.ErrorCode != 0 || !found {
			t.Errorf("ListGroups v%d: %+v", v, r)
		}
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "c"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := do(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("OffsetDelete: %+v", r)
	}
	lo, hi = versionsOfAPI(t, deleteGroupsKey)
	for v := lo; v <= hi; v++ {
		q := kmsg.NewPtrDeleteGroupsRequest()
		q.Version, q.Groups = v, []string{"c", "j2"}
		r := do(q).(*kmsg.DeleteGroupsResponse)
		// c was deleted by the first version; j2 has a member.
		wantC := int16(0)
		if v > lo {
			wantC = kerr.GroupIDNotFound.Code
		}
		want(fmt.Sprintf("DeleteGroups v%d of c", v), r.Groups[0].ErrorCode, wantC)
		want(fmt.Sprintf("DeleteGroups v%d of j2", v), r.Groups[1].ErrorCode, kerr.NonEmptyGroup.Code)
	}
}
