package kafkasrv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/groupkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// startCoordinator runs a coordinator over b with test timings until the
// test ends.
func startCoordinator(t testing.TB, b objstore.Bucket, mod func(*groups.Options)) *groups.Coordinator {
	t.Helper()
	o := groups.Options{Store: groups.NewStore(b, groups.StoreOptions{}), MinSessionTimeout: time.Second,
		InitialRebalanceDelay: 200 * time.Millisecond, Tick: 20 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	c, err := groups.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// groupEnv is a topic of parts partitions with n records each, served
// with a coordinator over a watched memory bucket.
func groupEnv(t *testing.T, parts int, n int) (addr string, w *groupkit.Watch, end map[groupkit.TP]int64) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", parts, nil)
	end = map[groupkit.TP]int64{}
	for p := range int32(parts) {
		e.Produce(e.Log("orders", p), fetchkit.ProduceOpts{Per: 10}, fetchkit.GenRecs(n, ts0, "g"))
		end[groupkit.TP{Topic: "orders", Partition: p}] = int64(n)
	}
	w = groupkit.NewWatch(objstore.NewMemory())
	c := startCoordinator(t, w, nil)
	return startKafka(t, e.Cat, KafkaOptions{Groups: c}), w, end
}

// TestGroupCooperativeChurn: a franz-go group of three cooperative-sticky
// members joins, loses one, gains one: every offset is delivered, the
// committed offsets never go backwards (every write of the group object
// checked) and end at the log end, and a commit of a fenced generation is
// refused.
func TestGroupCooperativeChurn(t *testing.T) {
	addr, w, end := groupEnv(t, 6, 300)
	var d groupkit.Delivered
	opts := append(groupkit.Fast(), kgo.ConsumeTopics("orders"), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchMaxPartitionBytes(2048))
	m := []*groupkit.Member{groupkit.Start(t, addr, "churn", &d, opts...), groupkit.Start(t, addr, "churn", &d, opts...), groupkit.Start(t, addr, "churn", &d, opts...)}
	groupkit.Eventually(t, 20*time.Second, "some records delivered to all three", func() bool { return d.Count() > 100 })
	firstID, firstGen := m[0].Client.GroupMetadata()
	m[2].Stop()
	groupkit.Eventually(t, 20*time.Second, "a rebalance after a member left", func() bool {
		_, g := m[0].Client.GroupMetadata()
		return g > firstGen
	})
	m = append(m[:2], groupkit.Start(t, addr, "churn", &d, opts...))
	groupkit.Eventually(t, 30*time.Second, "every record delivered", func() bool { return len(d.Missing(end)) == 0 })
	id, gen := m[0].Client.GroupMetadata()
	if id != firstID || gen <= firstGen {
		t.Fatalf("member 0: %s gen %d, was %s gen %d", id, gen, firstID, firstGen)
	}
	// A commit of the old generation is fenced.
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Group, q.MemberID, q.Generation = "churn", firstID, firstGen
	q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	resp, err := q.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.IllegalGeneration.Code {
		t.Fatalf("fenced commit: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(c))
	}
	for _, mem := range m {
		mem.Stop()
	}
	w.Check(t)
	// The group object is read once, when the coordinator first meets the
	// group (it has none yet); every commit and OffsetFetch after that is
	// answered from the coordinator's copy: one PUT per commit, no GET.
	puts, gets := w.Counts()
	t.Logf("group object: %d PUTs, %d GETs", puts, gets)
	if gets > 1 || puts == 0 {
		t.Errorf("group object: %d GETs (want at most 1), %d PUTs", gets, puts)
	}
	got := w.Committed("churn")
	for tp, e := range end {
		if got[tp] != e {
			t.Errorf("%v committed %d, want %d (the end)", tp, got[tp], e)
		}
	}
}

// TestGroupStaticRestart: a static member restarted within the session
// timeout gets its partitions back with no rebalance.
func TestGroupStaticRestart(t *testing.T) {
	addr, _, end := groupEnv(t, 4, 50)
	groupkit.StaticRestart(t, addr, "static", "orders", end)
}

// TestGroupAPIsWithoutCoordinator: with no coordinator (or a read-only
// bucket) the group APIs answer COORDINATOR_NOT_AVAILABLE and reads go on.
func TestGroupAPIsWithoutCoordinator(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	ro, err := objstore.OpenReadOnly(context.Background(), "mem://ro-kafka")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, o := range map[string]KafkaOptions{
		"none":      {},
		"read_only": {Groups: startCoordinator(t, ro, func(o *groups.Options) { o.Store = groups.NewStore(ro, groups.StoreOptions{ReadOnly: true}) })},
	} {
		t.Run(name, func(t *testing.T) {
			addr := startKafka(t, e.Cat, o)
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
			fq := kmsg.NewPtrFindCoordinatorRequest()
			fq.CoordinatorKeys = []string{"g"}
			fr, err := fq.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if c := fr.Coordinators[0].ErrorCode; c != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(c))
			}
			q := kmsg.NewPtrOffsetFetchRequest()
			q.Group = "g"
			q.Version = 7
			r, err := q.RequestWith(context.Background(), cl)
			if err == nil && r.ErrorCode != kerr.CoordinatorNotAvailable.Code || err != nil && !errors.Is(err, kerr.CoordinatorNotAvailable) {
				t.Fatalf("OffsetFetch: %v %+v, want COORDINATOR_NOT_AVAILABLE", err, r)
			}
			mq := kmsg.NewPtrMetadataRequest()
			if _, err := mq.RequestWith(context.Background(), cl); err != nil {
				t.Fatalf("Metadata beside the group APIs: %v", err)
			}
		})
	}
}
