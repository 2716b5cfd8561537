package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/groupkit"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// groupFixture uploads a topic "orders" of 4 partitions, 120 records each
// produced in 4 batches, with tiny segments, to the bucket at url, and
// returns each partition's end in the bucket (the rolled segments).
func groupFixture(t *testing.T, bin, url string) map[groupkit.TP]int64 {
	t.Helper()
	data := t.TempDir() + "/data"
	mustCmd(t, bin, "", "topic", "create", "--data-dir", data, "--topic", "orders", "--partitions", "4",
		"--config", "remote.storage.enable=true", "--config", "internal.segment.bytes=2048")
	for p := range 4 {
		for batch := range 4 {
			var in strings.Builder
			for i := range 30 {
				fmt.Fprintf(&in, "{\"key\":\"k%d\",\"value\":\"p%d value %d %s\"}\n", i%5, p, batch*30+i, strings.Repeat("v", i))
			}
			mustCmd(t, bin, in.String(), "produce", "--data-dir", data, "--topic", "orders", "--partition", fmt.Sprint(p))
		}
	}
	mustCmd(t, bin, "", "upload", "--data-dir", data, "--bucket", url)
	end := map[groupkit.TP]int64{}
	for p := range int32(4) {
		n := len(parseLines(t, mustCmd(t, bin, "", "consume", "--bucket", url, "--topic", "orders", "--partition", fmt.Sprint(p))))
		if n < 30 {
			t.Fatalf("fixture: partition %d has %d records in the bucket", p, n)
		}
		end[groupkit.TP{Topic: "orders", Partition: p}] = int64(n)
	}
	return end
}

// watchBucket polls the group's object in the bucket every 25 ms until
// stop and reports any committed offset that moved backwards.
func watchBucket(t *testing.T, url, group string) (stop func() []string) {
	t.Helper()
	b, err := objstore.OpenReadOnly(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg   sync.WaitGroup
		errs []string
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		st := groups.NewStore(b, groups.StoreOptions{})
		last := map[groupkit.TP]int64{}
		for ctx.Err() == nil {
			if o, err := st.Reload(ctx, group); err == nil && o != nil {
				for _, off := range o.Offsets {
					tp := groupkit.TP{Topic: off.Topic, Partition: off.Partition}
					if off.Offset < last[tp] {
						errs = append(errs, fmt.Sprintf("%v committed %d after %d", tp, off.Offset, last[tp]))
					}
					last[tp] = off.Offset
				}
			}
			time.Sleep(25 * time.Millisecond)
		}
	}()
	return func() []string { cancel(); wg.Wait(); b.Close(); return errs }
}

// committedOf is group's committed offsets as OffsetFetch answers them.
func committedOf(t *testing.T, addr, group string) map[groupkit.TP]int64 {
	t.Helper()
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	q := kmsg.NewPtrOffsetFetchRequest()
	q.Version = 9
	q.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1}}
	r, err := q.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	out := map[groupkit.TP]int64{}
	for _, g := range r.Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(g.ErrorCode))
		}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				out[groupkit.TP{Topic: tp.Topic, Partition: p.Partition}] = p.Offset
			}
		}
	}
	return out
}

// TestFetchGroupsOnMinIO runs `tiered fetch` over MinIO: a franz-go group
// of three cooperative-sticky members joins, loses one, gains one — every
// offset delivered, committed offsets never go backwards (the object in
// the bucket watched throughout), a commit of a fenced generation refused;
// the commits survive a restart of the service; a static member restarts
// with no rebalance; and with credentials that
// may only read, reads are served and the group APIs answer
// COORDINATOR_NOT_AVAILABLE.
func TestFetchGroupsOnMinIO(t *testing.T) {
	bin := tieredBin(t)
	srv := testminio.Shared(t)
	bucket := srv.NewBucket(t)
	url := srv.URL(bucket, "groups-e2e")
	testminio.SetCredentialsEnv(t)
	end := groupFixture(t, bin, url)

	f := startProc(t, bin, nil, "fetch", "--bucket", url)
	stopWatch := watchBucket(t, url, "app")
	var d groupkit.Delivered
	opts := append(groupkit.Fast(), kgo.ConsumeTopics("orders"), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchMaxPartitionBytes(512))
	m := []*groupkit.Member{groupkit.Start(t, f.kafka, "app", &d, opts...), groupkit.Start(t, f.kafka, "app", &d, opts...), groupkit.Start(t, f.kafka, "app", &d, opts...)}
	groupkit.Eventually(t, 30*time.Second, "records delivered", func() bool { return d.Count() > 40 })
	firstID, firstGen := m[0].Client.GroupMetadata()
	m[2].Stop()
	groupkit.Eventually(t, 30*time.Second, "a rebalance after a member left", func() bool {
		_, g := m[0].Client.GroupMetadata()
		return g > firstGen
	})
	m = append(m[:2], groupkit.Start(t, f.kafka, "app", &d, opts...))
	groupkit.Eventually(t, 60*time.Second, "every record delivered", func() bool { return len(d.Missing(end)) == 0 })

	cl := fetchkit.MustClient(t, kgo.SeedBrokers(f.kafka))
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Group, q.MemberID, q.Generation = "app", firstID, firstGen
	q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0, LeaderEpoch: -1}}}}
	resp, err := q.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of fenced generation %d: %v, want ILLEGAL_GENERATION", firstGen, kerr.ErrorForCode(c))
	}
	for _, mem := range m {
		mem.Stop()
	}
	if errs := stopWatch(); len(errs) > 0 {
		t.Fatalf("committed offsets went backwards: %q", errs)
	}
	if got := committedOf(t, f.kafka, "app"); len(got) != len(end) {
		t.Fatalf("committed %v, want %v", got, end)
	}
	f.stop()

	// A new fetch service has the commits from the bucket. (It allows
	// session timeouts from 2s: the groups section reaches the coordinator.)
	f = startProc(t, bin, []string{"TIERED_GROUPS_MIN_SESSION_TIMEOUT=2s"}, "fetch", "--bucket", url)
	jq := kmsg.NewPtrJoinGroupRequest()
	jq.Group, jq.SessionTimeoutMillis, jq.RebalanceTimeoutMillis, jq.ProtocolType = "short", 3000, 3000, "consumer"
	jq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if jr, err := jq.RequestWith(context.Background(), fetchkit.MustClient(t, kgo.SeedBrokers(f.kafka))); err != nil || jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("JoinGroup with a 3s session under groups.min_session_timeout=2s: %v %v", err, jr)
	}
	got := committedOf(t, f.kafka, "app")
	for tp, e := range end {
		if got[tp] != e {
			t.Errorf("%v committed %d after the restart, want %d", tp, got[tp], e)
		}
	}
	// Static membership: a member restarted within its session timeout
	// gets its partitions back with no rebalance.
	groupkit.StaticRestart(t, f.kafka, "static", "orders", end)
	f.stop()

	// Credentials that may only read: reads work, groups do not.
	access, secret, token := srv.ReadOnlyCredentials(t, bucket)
	ro := startProc(t, bin, []string{"AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_SESSION_TOKEN=" + token}, "fetch", "--bucket", url)
	rocl := fetchkit.MustClient(t, kgo.SeedBrokers(ro.kafka))
	groupkit.Eventually(t, 10*time.Second, "COORDINATOR_NOT_AVAILABLE on read-only credentials", func() bool {
		fq := kmsg.NewPtrFindCoordinatorRequest()
		fq.CoordinatorKeys = []string{"app"}
		fr, err := fq.RequestWith(context.Background(), rocl)
		return err == nil && fr.Coordinators[0].ErrorCode == kerr.CoordinatorNotAvailable.Code
	})
	n := 0
	for _, e := range end {
		n += int(e)
	}
	var rd groupkit.Delivered
	reader, err := kgo.NewClient(kgo.SeedBrokers(ro.kafka), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	groupkit.Eventually(t, 20*time.Second, "every record read without a group", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { rd.Add(groupkit.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset) })
		return rd.Count() == n
	})
	ro.stop()
	if !strings.Contains(ro.stderr.String(), "COORDINATOR_NOT_AVAILABLE") {
		t.Errorf("no log line says groups are unavailable:\n%s", ro.stderr)
	}
}
