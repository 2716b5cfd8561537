package integration

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// groupOnMinIO is a group coordinator over a fresh MinIO bucket, its object-store calls
// counted.
func groupOnMinIO(t testing.TB) (*groups.Coordinator, *prometheus.Registry) {
	t.Helper()
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	reg := prometheus.NewRegistry()
	metered := objstore.WithMetrics(openS3(t, srv, srv.NewBucket(t)), reg)
	c, err := groups.New(groups.Options{Store: groups.NewStore(metered, groups.StoreOptions{}), InitialRebalanceDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Wait)
	return c, reg
}

// commitReq is a commit of offset for 4 partitions of "orders" by a consumer outside any
// generation (assign() with a group.id: generation -1), as Kafka accepts for an empty group.
func commitReq(group string, offset int64) *kmsg.OffsetCommitRequest {
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.Generation = 8, group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "orders"
	for p := int32(0); p < 4; p++ {
		t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: offset, LeaderEpoch: -1})
	}
	q.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return q
}

func objstoreOps(reg *prometheus.Registry, op string) float64 {
	mfs, _ := reg.Gather()
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "tiered_objstore_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == op {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestGroupCommitsAddNoGET: once a group's object is cached, every OffsetCommit is one
// conditional PUT on MinIO and no GET — group traffic adds nothing to the read path's GETs
// (the object is cached with its ETag).
func TestGroupCommitsAddNoGET(t *testing.T) {
	c, reg := groupOnMinIO(t)
	ctx := context.Background()
	if r := c.Commit(ctx, commitReq("bench", 0), nil); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("first commit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	gets, puts := objstoreOps(reg, "get"), objstoreOps(reg, "put")
	const n = 20
	for i := 1; i <= n; i++ {
		if r := c.Commit(ctx, commitReq("bench", int64(i)), nil); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %d: %d", i, r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	if g, p := objstoreOps(reg, "get")-gets, objstoreOps(reg, "put")-puts; g != 0 || p != n {
		t.Fatalf("%d commits made %v GETs and %v PUTs, want 0 and %d", n, g, p, n)
	}
}
