package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier/codec"
)

// TestGroupKafkajs: kafkajs — which has no assign() — reads a cold topic of four partitions
// through a consumer group of the real `tiered fetch` over MinIO: a first run reads 70
// records and commits them; the fetch service is killed with -9 and restarted; a second run
// resumes exactly at the committed offsets and reads the rest, every record once. Then
// `tiered groups reset-offsets --to-datetime T --execute` moves the group, and the next run
// starts exactly at T's offset (ListOffsets' rule) on every partition.
func TestGroupKafkajs(t *testing.T) {
	node := requireClients(t)
	bin := tiered(t)
	g := buildGroupTopic(t, "kjs", 4, 60, codec.Gzip) // kafkajs decodes gzip itself (LZ4, Snappy, Zstd need plug-ins)
	bucket := g.cd.srv.URL(g.cd.bucket, "")
	addrs := pickAddrs(t, 2)
	cfg := fleetConfig(t, addrs[0], addrs[1], nil, 0, "")
	f := startFetchAt(t, bin, bucket, cfg, addrs[0], addrs[1])

	first := runGroupClient(t, 2*time.Minute, "kafkajs run 1", kafkajsArgs(node, addrs[1], "kjs-app", g.name, 70, 6*time.Second)...)
	if len(first) != 70 {
		t.Fatalf("kafkajs run 1 printed %d records, want 70", len(first))
	}
	g.check(t, "kafkajs run 1", first, false)
	committed := nextOffsets(first)
	got, code, err := offsetFetch(addrs[1], "kjs-app", g.name, g.parts)
	if err != nil || code != 0 {
		t.Fatalf("OffsetFetch after run 1: %v, code %d", err, code)
	}
	for p := int32(0); p < int32(g.parts); p++ {
		want, ok := committed[p]
		if !ok {
			want = -1
		}
		if got[p] != want {
			t.Fatalf("partition %d: committed %d, want %d (one past the last record run 1 printed)", p, got[p], want)
		}
	}

	f.kill9()
	f = startFetchAt(t, bin, bucket, cfg, addrs[0], addrs[1])
	second := runGroupClient(t, 2*time.Minute, "kafkajs run 2", kafkajsArgs(node, addrs[1], "kjs-app", g.name, 1000, 6*time.Second)...)
	for p, off := range firstOffsets(second) {
		want := committed[p]
		if off != want {
			t.Fatalf("after kill -9, partition %d resumed at %d, want the committed %d", p, off, want)
		}
	}
	seen := g.check(t, "kafkajs runs 1+2", append(append([]groupRec(nil), first...), second...), false)
	total := 0
	for _, offs := range seen {
		total += len(offs)
	}
	if total != g.parts*g.per {
		t.Fatalf("kafkajs read %d distinct records in two runs, want all %d", total, g.parts*g.per)
	}

	// Replay from T with the operator's command, then the application again.
	at := ts0 + 10*23 + 5 // between records 23 and 24: the first offset >= T is 24
	code2, out, stderr := runTiered(t, bin, "groups", "reset-offsets", "--fetch", f.url(), "--group", "kjs-app", "--topic", g.name,
		"--to-datetime", time.UnixMilli(at).UTC().Format(time.RFC3339Nano), "--execute")
	if code2 != 0 {
		t.Fatalf("groups reset-offsets: exit %d\n%s%s", code2, out, stderr)
	}
	third := runGroupClient(t, 2*time.Minute, "kafkajs after reset", kafkajsArgs(node, addrs[1], "kjs-app", g.name, 1000, 6*time.Second)...)
	g.check(t, "kafkajs after reset", third, false)
	want := g.offsetAt(at)
	starts := firstOffsets(third)
	for p := int32(0); p < int32(g.parts); p++ {
		if starts[p] != want {
			t.Fatalf("after reset-offsets --to-datetime, partition %d starts at %d, want %d (%v)", p, starts[p], want, starts)
		}
	}
	if len(third) != g.parts*(g.per-int(want)) {
		t.Fatalf("after reset: %d records, want %d", len(third), g.parts*(g.per-int(want)))
	}
	f.stop()
}

// TestGroupKcatAndConfluent: librdkafka's balanced consumer, through kcat -G and a
// confluent-kafka-python subscribe() consumer (Debian's /usr/bin/python3), reads every
// record of a cold topic through the fetch service's group coordinator.
func TestGroupKcatAndConfluent(t *testing.T) {
	requireClients(t)
	kcat := kcatPath(t)
	bin := tiered(t)
	g := buildGroupTopic(t, "rdk", 3, 40, codec.LZ4)
	addrs := pickAddrs(t, 2)
	f := startFetchAt(t, bin, g.cd.srv.URL(g.cd.bucket, ""), fleetConfig(t, addrs[0], addrs[1], nil, 0, ""), addrs[0], addrs[1])
	defer f.stop()

	recs := runGroupClient(t, 2*time.Minute, "confluent-kafka-python", confluentArgs(addrs[1], "rdk-py", g.name, 1000, 6*time.Second)...)
	seen := g.check(t, "confluent-kafka-python", recs, false)
	if len(recs) != g.parts*g.per || len(seen) != g.parts {
		t.Fatalf("confluent-kafka-python read %d records, want %d", len(recs), g.parts*g.per)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", addrs[1], "-G", "rdk-kcat", g.name, "-o", "beginning", "-e", "-q",
		"-X", "broker.address.family=v4", "-f", "%p %o %s\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -G: %v\n%s", err, stderr.String())
	}
	var krecs []groupRec
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		fs := strings.Fields(line)
		if len(fs) != 3 {
			t.Fatalf("kcat -G printed %q", line)
		}
		p, _ := strconv.Atoi(fs[0])
		off, _ := strconv.ParseInt(fs[1], 10, 64)
		v := b64(fs[2])
		krecs = append(krecs, groupRec{Partition: int32(p), Offset: off, Value: &v})
	}
	t.Logf("kcat -G: %d records in %s", len(krecs), time.Since(start).Round(time.Millisecond))
	if seen := g.check(t, "kcat -G", krecs, false); len(krecs) != g.parts*g.per || len(seen) != g.parts {
		t.Fatalf("kcat -G read %d records, want %d", len(krecs), g.parts*g.per)
	}
}

// groupKillRuns is TIERED_GROUP_KILL_RUNS: kill -9 runs of TestGroupFleetTakeover (2 in the
// suite; scripts/reliability runs 20).
func groupKillRuns(t testing.TB) int {
	if v := os.Getenv("TIERED_GROUP_KILL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TIERED_GROUP_KILL_RUNS=%q: want a positive count", v)
		}
		return n
	}
	return 2
}

// TestGroupFleetTakeover: two `tiered fetch` replicas over one MinIO bucket (fetch.peers,
// a 2s lease). Both name the same coordinator for the group; the other answers the group's
// OffsetFetch NOT_COORDINATOR. A franz-go group consumer
// reads and commits continuously (a synchronous commit after every few records); after a
// seeded delay the coordinator is killed with -9. Within the documented bound
// (fleet.TakeoverBound) the other replica names itself; the consumer goes on there; when it
// stops, the new coordinator's committed offsets are at least the last ones acknowledged —
// none lost, none rewound — and the next run's consumer starts at them. The killed replica
// comes back and both agree again. A commit whose answer was lost may still have landed:
// the committed offset may be above the last acknowledged one, never below it.
// TIERED_GROUP_KILL_RUNS times (seed TIERED_GROUP_KILL_SEED).
func TestGroupFleetTakeover(t *testing.T) {
	bin := tiered(t)
	runs := groupKillRuns(t)
	seed := uint64(envInt(t, "TIERED_GROUP_KILL_SEED", 1))
	const lease = 2 * time.Second
	bound := fleet.TakeoverBound(lease)
	g := buildGroupTopic(t, "fleet", 4, 400*runs+400, codec.Zstd)
	bucket := g.cd.srv.URL(g.cd.bucket, "")
	testminio.SetCredentialsEnv(t)
	addrs := pickAddrs(t, 4)
	kafka := []string{addrs[1], addrs[3]}
	replicas := make([]*fetchProc, 2)
	cfgs := make([]string, 2)
	for i := range replicas {
		cfgs[i] = fleetConfig(t, addrs[2*i], kafka[i], kafka, lease, "")
		replicas[i] = startFetchAt(t, bin, bucket, cfgs[i], addrs[2*i], kafka[i])
	}
	const group = "fleet-app"
	agree := func(limit time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			var names []string
			for _, k := range kafka {
				code, c, err := findCoordinator(k, group)
				if err == nil && code == 0 {
					names = append(names, c)
				}
			}
			if len(names) == 2 && names[0] == names[1] {
				return names[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("replicas do not agree on the coordinator of %s within %s: %v", group, limit, names)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 16))
	committed := map[int32]int64{} // what the last run left committed
	var worst time.Duration
	checked, lost := 0, 0
	for run := 0; run < runs; run++ {
		coord := agree(bound + 5*time.Second)
		c := startGroupFranz(t, kafka, group, g)
		c.waitCommitsBeyond(0, 30*time.Second) // joined and committing
		delay := time.Duration(rng.IntN(1000)) * time.Millisecond
		time.Sleep(delay)
		victim := 0
		if coord == kafka[1] {
			victim = 1
		}
		survivor := kafka[1-victim]
		// The replica that does not coordinate the group refuses its requests.
		if _, code, err := offsetFetch(survivor, group, g.name, g.parts); err != nil || code != kerr.NotCoordinator.Code {
			t.Fatalf("run %d: OffsetFetch at the other replica %s: %v, code %d, want NOT_COORDINATOR", run, survivor, err, code)
		}
		ackedAtKill := c.acked()
		replicas[victim].kill9()
		killed := time.Now()
		for {
			code, cn, err := findCoordinator(survivor, group)
			if err == nil && code == 0 && cn == survivor {
				break
			}
			if time.Since(killed) > bound+10*time.Second {
				t.Fatalf("run %d: %s still names %s (code %d, %v) %s after the kill", run, survivor, cn, code, err, time.Since(killed))
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(killed)
		worst = max(worst, took)
		// The bound, plus one poll interval for the GETs and the process's scheduling.
		if took > bound+fleet.Interval(lease) {
			t.Errorf("run %d: the group moved after %s, beyond the documented bound %s", run, took, bound)
		}
		// The consumer goes on at the new coordinator: it commits again past what it had.
		c.waitCommitsBeyond(ackedAtKill+2, 30*time.Second)
		recs, final := c.stop()
		// Its first records start where the previous run left its commits: nothing rewound.
		for p, off := range firstOffsets(recs) {
			want, ok := committed[p]
			if !ok {
				want = 0
			}
			if off != want {
				t.Errorf("run %d: partition %d started at %d, want the committed %d", run, p, off, want)
			}
		}
		got, code, err := offsetFetch(survivor, group, g.name, g.parts)
		if err != nil || code != 0 {
			t.Fatalf("run %d: OffsetFetch at the new coordinator: %v, code %d", run, err, code)
		}
		read := nextOffsets(recs)
		for p := int32(0); p < int32(g.parts); p++ {
			want, ok := final[p]
			if !ok {
				want = committed[p]
				if want == 0 {
					want = -1
				}
			}
			// A commit whose answer the consumer lost may have landed (at least once):
			// the committed offset may be above the last acknowledged one, never below
			// it (lost or rewound) nor beyond what the consumer read.
			checked++
			if got[p] < want {
				lost++
				t.Errorf("run %d: partition %d: the new coordinator has committed offset %d, below the last acknowledged %d", run, p, got[p], want)
			}
			if limit := max(read[p], committed[p]); got[p] > limit && got[p] > want {
				t.Errorf("run %d: partition %d: committed offset %d beyond the %d records read", run, p, got[p], limit)
			}
			if got[p] >= 0 {
				committed[p] = got[p]
			}
		}
		t.Logf("run %d: %d records, killed the coordinator %s after %s, moved to %s in %s (bound %s); committed %v",
			run, len(recs), coord, delay, survivor, took.Round(time.Millisecond), bound, got)
		replicas[victim] = startFetchAt(t, bin, bucket, cfgs[victim], addrs[2*victim], kafka[victim])
	}
	// `tiered groups describe --fetch` at the replica that does not coordinate the group is
	// redirected (421 NOT_COORDINATOR, the coordinator's HTTP URL from its lease) and shows
	// the committed offsets.
	coord := agree(bound + 5*time.Second)
	other := 0
	if coord == kafka[0] {
		other = 1
	}
	code, out, stderr := runTiered(t, bin, "groups", "describe", "--fetch", replicas[other].url(), "--group", group, "--json")
	if code != 0 {
		t.Fatalf("groups describe at the other replica: exit %d\n%s%s", code, out, stderr)
	}
	var desc struct {
		Source  string `json:"source"`
		Offsets []struct {
			Partition int32 `json:"partition"`
			Committed int64 `json:"committed"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(out, &desc); err != nil {
		t.Fatalf("groups describe --json: %v\n%s", err, out)
	}
	for _, o := range desc.Offsets {
		if o.Committed != committed[o.Partition] {
			t.Fatalf("groups describe through the other replica: partition %d committed %d, want %d", o.Partition, o.Committed, committed[o.Partition])
		}
	}
	if desc.Source != "coordinator" || len(desc.Offsets) == 0 {
		t.Fatalf("groups describe through the other replica: %s", out)
	}
	reliability.Record(t, "fetch fleet: kill -9 of the group coordinator while a franz-go group commits (2 replicas; committed offsets at the new coordinator, none below the acknowledged)", runs, checked, lost)
	t.Logf("%d kills, worst takeover %s (bound %s), %d committed offsets checked, %d lost or rewound", runs, worst.Round(time.Millisecond), bound, checked, lost)
	for _, r := range replicas {
		r.stop()
	}
}

// groupFranz is a franz-go group consumer (cooperative-sticky, from the start when nothing
// is committed) reading a few records at a time and committing each batch synchronously.
type groupFranz struct {
	t      testing.TB
	g      *groupTopic
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	recs []groupRec
	ack  map[int32]int64 // offsets of the last acknowledged commit, per partition
	n    int             // acknowledged commits
}

func startGroupFranz(t testing.TB, seeds []string, group string, g *groupTopic) *groupFranz {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(g.name),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(10*time.Second), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &groupFranz{t: t, g: g, cl: cl, cancel: cancel, done: make(chan struct{}), ack: map[int32]int64{}}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 3)
			var batch []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { batch = append(batch, r) })
			if len(batch) == 0 {
				continue
			}
			c.mu.Lock()
			for _, r := range batch {
				v := b64(string(r.Value))
				c.recs = append(c.recs, groupRec{Partition: r.Partition, Offset: r.Offset, Value: &v})
			}
			c.mu.Unlock()
			// A commit may fail while the coordinator moves; the next one covers it.
			if err := cl.CommitRecords(context.Background(), batch...); err == nil {
				c.mu.Lock()
				for _, r := range batch {
					c.ack[r.Partition] = max(c.ack[r.Partition], r.Offset+1)
				}
				c.n++
				c.mu.Unlock()
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()
	return c
}

// acked is the number of acknowledged commits so far.
func (c *groupFranz) acked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// waitCommitsBeyond waits until more than n commits were acknowledged.
func (c *groupFranz) waitCommitsBeyond(n int, limit time.Duration) {
	c.t.Helper()
	for deadline := time.Now().Add(limit); c.acked() <= n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("the group consumer acknowledged no commit beyond its %d-th within %s", n, limit)
		}
	}
}

// stop ends the consumer after its last commit and leaves the group; it returns what it
// read (checked against the topic; repeats refused, since every batch was committed before
// the next poll) and its last acknowledged offsets.
func (c *groupFranz) stop() ([]groupRec, map[int32]int64) {
	c.t.Helper()
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cl.LeaveGroupContext(ctx); err != nil {
		c.t.Logf("leave group: %v", err)
	}
	c.cl.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.g.check(c.t, "group consumer", c.recs, true)
	return c.recs, c.ack
}

// b64 is s in standard base64, as the client programs print values.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestGroupKafkajsFleet: kafkajs bootstrapped at the replica of a two-replica fleet that
// does not coordinate its group follows FindCoordinator to the other and reads every
// record of the cold topic once.
func TestGroupKafkajsFleet(t *testing.T) {
	node := requireClients(t)
	bin := tiered(t)
	g := buildGroupTopic(t, "kjsfleet", 3, 30, codec.Gzip)
	bucket := g.cd.srv.URL(g.cd.bucket, "")
	addrs := pickAddrs(t, 4)
	kafka := []string{addrs[1], addrs[3]}
	var replicas []*fetchProc
	for i := range 2 {
		cfg := fleetConfig(t, addrs[2*i], kafka[i], kafka, 2*time.Second, "")
		replicas = append(replicas, startFetchAt(t, bin, bucket, cfg, addrs[2*i], kafka[i]))
	}
	const group = "kjs-fleet-app"
	var coord string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c0, n0, err0 := findCoordinator(kafka[0], group)
		c1, n1, err1 := findCoordinator(kafka[1], group)
		if err0 == nil && err1 == nil && c0 == 0 && c1 == 0 && n0 == n1 {
			coord = n0
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas do not agree: %s/%d/%v, %s/%d/%v", n0, c0, err0, n1, c1, err1)
		}
	}
	other := kafka[0]
	if coord == kafka[0] {
		other = kafka[1]
	}
	recs := runGroupClient(t, 2*time.Minute, "kafkajs via the other replica", kafkajsArgs(node, other, group, g.name, 1000, 6*time.Second)...)
	if seen := g.check(t, "kafkajs in a fleet", recs, false); len(recs) != g.parts*g.per || len(seen) != g.parts {
		t.Fatalf("kafkajs read %d records through the fleet, want %d", len(recs), g.parts*g.per)
	}
	got, code, err := offsetFetch(coord, group, g.name, g.parts)
	if err != nil || code != 0 {
		t.Fatalf("OffsetFetch at the coordinator: %v %d", err, code)
	}
	for p := int32(0); p < int32(g.parts); p++ {
		if got[p] != int64(g.per) {
			t.Fatalf("partition %d committed %d at the coordinator, want %d", p, got[p], g.per)
		}
	}
	for _, r := range replicas {
		r.stop()
	}
}

// TestGroupConfluentCooperative: two confluent-kafka-python consumers with librdkafka's
// cooperative-sticky strategy (incremental rebalances, the setting many applications
// run) in one group over a cold topic: the first reads the whole topic, the second joins
// while the first is still a member, and the incremental rebalance hands it partitions,
// which it reads from the start (the first commits only when it leaves). Both end
// cleanly, and between them every record is read.
func TestGroupConfluentCooperative(t *testing.T) {
	requireClients(t)
	bin := tiered(t)
	g := buildGroupTopic(t, "coop", 4, 40, codec.Snappy)
	addrs := pickAddrs(t, 2)
	f := startFetchAt(t, bin, g.cd.srv.URL(g.cd.bucket, ""), fleetConfig(t, addrs[0], addrs[1], nil, 0, ""), addrs[0], addrs[1])
	defer f.stop()

	type result struct {
		recs   []groupRec
		stderr string
		err    error
	}
	run := func(name string, idle time.Duration, out chan<- result) {
		recs, stderr, _, err := groupClient(2*time.Minute, name, confluentArgs(addrs[1], "coop-py", g.name, 1000, idle, "cooperative-sticky")...)
		out <- result{recs, stderr, err}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go run("first", 12*time.Second, first)
	time.Sleep(4 * time.Second)
	go run("second", 6*time.Second, second)
	r1, r2 := <-first, <-second
	for _, r := range []struct {
		name string
		result
	}{{"first", r1}, {"second", r2}} {
		t.Logf("%s consumer: %d records; stderr:\n%s", r.name, len(r.recs), r.stderr)
		if r.err != nil {
			t.Fatalf("%s consumer: %v", r.name, r.err)
		}
	}
	g.check(t, "first", r1.recs, false)
	g.check(t, "second", r2.recs, false)
	seen := g.check(t, "both", append(append([]groupRec(nil), r1.recs...), r2.recs...), true)
	n := 0
	for _, offs := range seen {
		n += len(offs)
	}
	if n != g.parts*g.per {
		t.Fatalf("the two consumers read %d distinct records, want %d", n, g.parts*g.per)
	}
	if len(r2.recs) == 0 || !strings.Contains(r2.stderr, "assigned [") {
		t.Fatalf("the second consumer was handed no partition by the cooperative rebalance")
	}
	if !strings.Contains(r1.stderr, "revoked [") {
		t.Fatalf("the first consumer gave up no partition to the second")
	}
}
