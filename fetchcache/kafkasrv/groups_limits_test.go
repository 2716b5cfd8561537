package kafkasrv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// countedGets counts the whole-object reads (the group objects') of a
// bucket.
type countedGets struct {
	objstore.Bucket
	n atomic.Int64
}

func (c *countedGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Bucket.Get(ctx, key)
}

// TestGroupRequestsBoundTheirGroups: an OffsetFetch (v8+, several groups)
// or DescribeGroups naming each of maxRequestGroups groups three times is
// answered entry by entry, every group looked up once (both read a group
// without members from the store: at most one read per distinct group),
// and the connection goes on. One naming a group more reads no more: that
// group is answered COORDINATOR_LOAD_IN_PROGRESS, for the client to ask
// again. A request of more than maxRequestGroupEntries entries is refused
// whole, every group INVALID_REQUEST, without a read, and the connection
// closed.
func TestGroupRequestsBoundTheirGroups(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	b := &countedGets{Bucket: objstore.NewMemory()}
	addr := startKafka(t, e.Cat, KafkaOptions{Groups: startCoordinator(t, b, nil)})
	names := func(distinct, each int) []string {
		var out []string
		for range each {
			for i := range distinct {
				out = append(out, fmt.Sprintf("g%d", i))
			}
		}
		return out
	}
	offsetFetch := func(ids []string) kmsg.Request {
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version = 8
		for _, id := range ids {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = id
			q.Groups = append(q.Groups, g)
		}
		return q
	}
	describe := func(ids []string) kmsg.Request {
		q := kmsg.NewPtrDescribeGroupsRequest()
		q.Version = 5
		q.Groups = ids
		return q
	}
	// codes are the groups answered, in order, with their error codes.
	codes := func(resp kmsg.Response) (groups []string, codes []int16) {
		switch r := resp.(type) {
		case *kmsg.OffsetFetchResponse:
			for _, g := range r.Groups {
				groups, codes = append(groups, g.Group), append(codes, g.ErrorCode)
			}
		case *kmsg.DescribeGroupsResponse:
			for _, g := range r.Groups {
				groups, codes = append(groups, g.Group), append(codes, g.ErrorCode)
			}
		}
		return groups, codes
	}
	for _, tc := range []struct {
		api  string
		req  func([]string) kmsg.Request
		resp func() kmsg.Response
		over int16 // the code of the group past maxRequestGroups distinct
	}{
		{"OffsetFetch", offsetFetch, func() kmsg.Response { return kmsg.NewPtrOffsetFetchResponse() }, kerr.CoordinatorLoadInProgress.Code},
		{"DescribeGroups", describe, func() kmsg.Response { return kmsg.NewPtrDescribeGroupsResponse() }, kerr.CoordinatorLoadInProgress.Code},
	} {
		t.Run(tc.api, func(t *testing.T) {
			rc := fetchkit.DialRaw(t, addr)
			corr := int32(0)
			// ask sends ids on rc and checks the answer: every entry in
			// order, each with want(i)'s code, in at most maxReads reads.
			ask := func(ids []string, maxReads int64, want func(i int) int16) {
				t.Helper()
				corr++
				before := b.n.Load()
				resp := tc.resp()
				if err := rc.Request(corr, tc.req(ids), resp); err != nil {
					t.Fatal(err)
				}
				if reads := b.n.Load() - before; reads > maxReads {
					t.Errorf("%d store reads for %d entries, want at most %d", reads, len(ids), maxReads)
				}
				got, cs := codes(resp)
				if len(got) != len(ids) {
					t.Fatalf("%d groups answered, want %d", len(got), len(ids))
				}
				for i := range ids {
					if got[i] != ids[i] || cs[i] != want(i) {
						t.Fatalf("group %d: %q error %v, want %q with %v", i, got[i], kerr.ErrorForCode(cs[i]), ids[i], kerr.ErrorForCode(want(i)))
					}
				}
			}
			ok := func(int) int16 { return 0 }
			ask(names(maxRequestGroups, 3), maxRequestGroups, ok)
			ask(names(maxRequestGroups+1, 1), maxRequestGroups, func(i int) int16 {
				if i == maxRequestGroups {
					return tc.over
				}
				return 0
			})
			ask([]string{"g0"}, 1, ok) // the connection goes on

			ask(names(maxRequestGroupEntries+1, 1), 0, func(int) int16 { return kerr.InvalidRequest.Code })
			fetchkit.ClosedWithin(t, rc.C, 5*time.Second)
		})
	}
}

// TestGroupAnswerBytesBounded: an OffsetFetch that names, again and
// again, a group whose committed offsets carry the most metadata allowed
// is answered while the answer stays within maxGroupAnswerBytes, and
// refused whole (every group INVALID_REQUEST, the connection closed) once
// it would not, rather than built to the client's multiple of the group.
func TestGroupAnswerBytesBounded(t *testing.T) {
	const parts = 200
	e := fetchkit.NewEnv(t)
	e.Topic("big", parts, nil)
	addr := startKafka(t, e.Cat, KafkaOptions{Groups: startCoordinator(t, objstore.NewMemory(), nil)})
	rc := fetchkit.DialRaw(t, addr)
	md := strings.Repeat("m", 4000) // under offset.metadata.max.bytes
	cq := kmsg.NewPtrOffsetCommitRequest()
	cq.Version, cq.Group, cq.Generation = 8, "c", -1
	ct := kmsg.OffsetCommitRequestTopic{Topic: "big"}
	for p := range int32(parts) {
		ct.Partitions = append(ct.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 0, LeaderEpoch: -1, Metadata: &md})
	}
	cq.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	var cr kmsg.OffsetCommitResponse
	if err := rc.Request(1, cq, &cr); err != nil {
		t.Fatal(err)
	}
	for _, p := range cr.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	perGroup := parts * (len(md) + 24) // what one entry's answer holds, at least
	fetch := func(corr int32, entries int) *kmsg.OffsetFetchResponse {
		t.Helper()
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version = 8
		for range entries {
			q.Groups = append(q.Groups, kmsg.OffsetFetchRequestGroup{Group: "c", MemberEpoch: -1}) // every topic
		}
		resp := kmsg.NewPtrOffsetFetchResponse()
		if err := rc.Request(corr, q, resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Groups) != entries {
			t.Fatalf("%d groups answered, want %d", len(resp.Groups), entries)
		}
		return resp
	}
	within := maxGroupAnswerBytes / perGroup / 2
	for i, g := range fetch(2, within).Groups {
		if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != parts {
			t.Fatalf("entry %d of %d within the bound: %v, %d topics", i, within, kerr.ErrorForCode(g.ErrorCode), len(g.Topics))
		}
	}
	over := maxGroupAnswerBytes/perGroup + 1
	for i, g := range fetch(3, over).Groups {
		if g.ErrorCode != kerr.InvalidRequest.Code || len(g.Topics) != 0 {
			t.Fatalf("entry %d of %d over the bound: %v, %d topics, want INVALID_REQUEST", i, over, kerr.ErrorForCode(g.ErrorCode), len(g.Topics))
		}
	}
	fetchkit.ClosedWithin(t, rc.C, 5*time.Second)
}

// TestGroupDescribeBytesBounded: DescribeGroups naming, again and again, a
// Stable group whose member joined with large protocol metadata is
// answered within maxGroupAnswerBytes and refused whole past it, as
// OffsetFetch is.
func TestGroupDescribeBytesBounded(t *testing.T) {
	addr, _, _ := groupEnv(t, 1, 10)
	rc := fetchkit.DialRaw(t, addr)
	corr := int32(0)
	req := func(q kmsg.Request, resp kmsg.Response) {
		t.Helper()
		corr++
		if err := rc.Request(corr, q, resp); err != nil {
			t.Fatal(err)
		}
	}
	meta := bytes.Repeat([]byte{'p'}, 100<<10)
	join := func(member string) *kmsg.JoinGroupResponse {
		q := kmsg.NewPtrJoinGroupRequest()
		q.Version, q.Group, q.MemberID, q.ProtocolType = 5, "wide", member, "consumer"
		q.SessionTimeoutMillis, q.RebalanceTimeoutMillis = 30000, 30000
		q.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
		resp := kmsg.NewPtrJoinGroupResponse()
		req(q, resp)
		return resp
	}
	jr := join("")
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		jr = join(jr.MemberID)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("JoinGroup: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sq := kmsg.NewPtrSyncGroupRequest()
	sq.Version, sq.Group, sq.Generation, sq.MemberID = 3, "wide", jr.Generation, jr.MemberID
	sq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{0}}}
	sr := kmsg.NewPtrSyncGroupResponse()
	req(sq, sr)
	if sr.ErrorCode != 0 {
		t.Fatalf("SyncGroup: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	describe := func(entries int) *kmsg.DescribeGroupsResponse {
		t.Helper()
		q := kmsg.NewPtrDescribeGroupsRequest()
		q.Version = 5
		for range entries {
			q.Groups = append(q.Groups, "wide")
		}
		resp := kmsg.NewPtrDescribeGroupsResponse()
		req(q, resp)
		if len(resp.Groups) != entries {
			t.Fatalf("%d groups answered, want %d", len(resp.Groups), entries)
		}
		return resp
	}
	perGroup := len(meta) + 64
	within := maxGroupAnswerBytes / perGroup / 2
	for i, g := range describe(within).Groups {
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 1 || len(g.Members[0].ProtocolMetadata) != len(meta) {
			t.Fatalf("entry %d of %d within the bound: %v, state %s, %d members", i, within, kerr.ErrorForCode(g.ErrorCode), g.State, len(g.Members))
		}
	}
	over := maxGroupAnswerBytes/perGroup + 1
	for i, g := range describe(over).Groups {
		if g.ErrorCode != kerr.InvalidRequest.Code || len(g.Members) != 0 {
			t.Fatalf("entry %d of %d over the bound: %v, %d members, want INVALID_REQUEST", i, over, kerr.ErrorForCode(g.ErrorCode), len(g.Members))
		}
	}
	fetchkit.ClosedWithin(t, rc.C, 5*time.Second)
}
