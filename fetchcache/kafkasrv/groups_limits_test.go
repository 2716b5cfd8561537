package kafkasrv

import (
	"context"
	"fmt"
	"io"
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
