package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier/codec"
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
	if r := c.Commit(ctx, commitReq("bench", 0)); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("first commit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	gets, puts := objstoreOps(reg, "get"), objstoreOps(reg, "put")
	const n = 20
	for i := 1; i <= n; i++ {
		if r := c.Commit(ctx, commitReq("bench", int64(i))); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %d: %d", i, r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	if g, p := objstoreOps(reg, "get")-gets, objstoreOps(reg, "put")-puts; g != 0 || p != n {
		t.Fatalf("%d commits made %v GETs and %v PUTs, want 0 and %d", n, g, p, n)
	}
}

// BenchmarkGroupCommit: OffsetCommit of 4 partitions, durable in MinIO before it returns
// (one conditional PUT of the group object). Reports p50/p99 latency and PUTs and GETs per
// commit.
func BenchmarkGroupCommit(b *testing.B) {
	c, reg := groupOnMinIO(b)
	ctx := context.Background()
	if r := c.Commit(ctx, commitReq("bench", 0)); r.Topics[0].Partitions[0].ErrorCode != 0 {
		b.Fatalf("first commit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	gets, puts := objstoreOps(reg, "get"), objstoreOps(reg, "put")
	var lat []time.Duration
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		start := time.Now()
		if r := c.Commit(ctx, commitReq("bench", i)); r.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("commit %d: %d", i, r.Topics[0].Partitions[0].ErrorCode)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric((objstoreOps(reg, "put")-puts)/float64(len(lat)), "puts/commit")
	b.ReportMetric((objstoreOps(reg, "get")-gets)/float64(len(lat)), "gets/commit")
}

// BenchmarkGroupStabilise10: ten franz-go consumers (cooperative-sticky) join one group
// of a cold 10-partition topic through the fetch service's Kafka listener (coordinator
// over MinIO, Kafka's 3 s group.initial.rebalance.delay.ms); the time until every member
// has its partitions is reported as ms-to-stable.
func BenchmarkGroupStabilise10(b *testing.B) {
	g := buildGroupTopic(b, "stab", 10, 20, codec.None)
	c, err := groups.New(groups.Options{Store: groups.NewStore(g.cd.store, groups.StoreOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Wait)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	fs := startFetch(b, g.cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{Groups: c})
	var total time.Duration
	iter := 0
	for b.Loop() {
		iter++
		group := fmt.Sprintf("stab-%d", iter)
		var mu sync.Mutex
		assigned := map[int]int{}
		all := make(chan struct{})
		start := time.Now()
		var clients []*kgo.Client
		for m := range 10 {
			cl, err := kgo.NewClient(kgo.SeedBrokers(fs.kafkaAddr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(g.name),
				kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(200*time.Millisecond),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, as map[string][]int32) {
					mu.Lock()
					defer mu.Unlock()
					assigned[m] += len(as[g.name])
					n := 0
					for _, k := range assigned {
						n += k
					}
					if len(assigned) == 10 && n == 10 {
						select {
						case <-all:
						default:
							close(all)
						}
					}
				}),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, rs map[string][]int32) {
					mu.Lock()
					defer mu.Unlock()
					assigned[m] -= len(rs[g.name])
				}))
			if err != nil {
				b.Fatal(err)
			}
			clients = append(clients, cl)
			go func() {
				for cl.Context().Err() == nil {
					cl.PollFetches(cl.Context())
				}
			}()
		}
		select {
		case <-all:
		case <-time.After(2 * time.Minute):
			b.Fatalf("10 members not all assigned in 2 minutes: %v", assigned)
		}
		total += time.Since(start)
		for _, cl := range clients {
			cl.Close()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(iter), "ms-to-stable")
}
