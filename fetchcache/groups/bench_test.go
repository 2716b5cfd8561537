package groups

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// BenchmarkCommitMinIO measures an OffsetCommit of one group member (8
// partitions) end to end on real MinIO: validation, the conditional PUT of
// the group object, the answer. It reports the PUTs per commit (1 when no
// other writer races), the store reads per commit (0: nothing is read
// back) and the latency percentiles.
func BenchmarkCommitMinIO(b *testing.B) {
	srv := testminio.Shared(b)
	testminio.SetCredentialsEnv(b)
	ctx := context.Background()
	raw, err := objstore.Open(ctx, srv.URL(srv.NewBucket(b), "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	// The store's requests, by operation: a commit must be one PUT and no
	// read (OffsetFetch and the Fetch path answer from memory).
	reg := prometheus.NewRegistry()
	bkt := objstore.WithMetrics(raw, reg)
	m := NewMetrics(nil)
	c, err := New(Options{Store: NewStore(bkt, StoreOptions{Metrics: m}), Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.Generation = 9, "bench", -1
	qt := kmsg.OffsetCommitRequestTopic{Topic: "orders"}
	for p := range int32(8) {
		qt.Partitions = append(qt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, LeaderEpoch: -1})
	}
	q.Topics = []kmsg.OffsetCommitRequestTopic{qt}
	lat := make([]time.Duration, 0, b.N)
	readsBefore := storeReads(b, reg)
	putsBefore := testutilCount(m.puts.WithLabelValues(PutOK)) + testutilCount(m.puts.WithLabelValues(PutConflict))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for j := range q.Topics[0].Partitions {
			q.Topics[0].Partitions[j].Offset = int64(i)
		}
		start := time.Now()
		r := c.Commit(ctx, q, nil)
		lat = append(lat, time.Since(start))
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("commit %d: %s", i, codeName(code))
		}
	}
	b.StopTimer()
	puts := testutilCount(m.puts.WithLabelValues(PutOK)) + testutilCount(m.puts.WithLabelValues(PutConflict)) - putsBefore
	slices.Sort(lat)
	b.ReportMetric(puts/float64(b.N), "PUTs/commit")
	b.ReportMetric((storeReads(b, reg)-readsBefore)/float64(b.N), "GETs/commit")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// storeReads is the GETs, range GETs and HEADs the metered bucket counted.
func storeReads(b *testing.B, reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "tiered_objstore_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && (l.GetValue() == objstore.OpGet || l.GetValue() == objstore.OpGetRange || l.GetValue() == objstore.OpAttributes) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// BenchmarkGroupStabilise10 measures how long ten members that start
// together take to form a Stable generation (every JoinGroup answered and
// the leader's SyncGroup delivered), with no initial rebalance delay and
// with Kafka's 3 s default (which dominates).
func BenchmarkGroupStabilise10(b *testing.B) {
	for _, delay := range []time.Duration{-1, DefaultInitialRebalanceDelay} {
		name := "initial_delay=0"
		if delay > 0 {
			name = "initial_delay=3s"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				c, err := New(Options{Store: NewStore(objstore.NewMemory(), StoreOptions{}), InitialRebalanceDelay: delay, Tick: 10 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				start := time.Now()
				stabilise(b, c, 10)
				b.ReportMetric(time.Since(start).Seconds(), "s-to-stable")
				cancel()
				<-done
			}
		})
	}
}

// stabilise runs n members of group "g" as clients do — MEMBER_ID_REQUIRED,
// rejoin, sync, heartbeats, rejoining when told to — and returns when the
// group is Stable with all n members assigned.
func stabilise(b *testing.B, c *Coordinator, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, n)
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			q := joinReq("g", "", nil)
			q.MemberID = c.Join(ctx, Client{ID: "bench"}, q).MemberID
			for ctx.Err() == nil {
				r := c.Join(ctx, Client{ID: "bench"}, q)
				if r.ErrorCode != 0 {
					continue
				}
				sq := kmsg.NewPtrSyncGroupRequest()
				sq.Version, sq.Group, sq.MemberID, sq.Generation = 5, "g", r.MemberID, r.Generation
				for _, m := range r.Members {
					sq.GroupAssignment = append(sq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte("a")})
				}
				if c.Sync(ctx, sq).ErrorCode != 0 {
					continue
				}
				hq := kmsg.NewPtrHeartbeatRequest()
				hq.Version, hq.Group, hq.MemberID, hq.Generation = 4, "g", r.MemberID, r.Generation
				for ctx.Err() == nil && c.Heartbeat(hq).ErrorCode == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	for {
		d := c.Describe(ctx, "g")
		ok := d.State == StateStable && len(d.Members) == n
		for _, m := range d.Members {
			ok = ok && len(m.MemberAssignment) > 0
		}
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	for range n {
		<-done
	}
}
