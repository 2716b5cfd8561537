package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
)

// The real consumer-group clients (kafkajs on Node, confluent-kafka-python on Debian's
// python3) are installed by scripts/setup, which records them in .tools/clients.version.
// Without that file the tests that run them skip, naming the script; with it, a missing
// client fails them.
const (
	clientsVersionFile = "../.tools/clients.version"
	kafkajsModules     = "../.tools/node/node_modules"
	debianPython       = "/usr/bin/python3"
)

// requireClients returns the paths of node and of the client programs, or skips when
// scripts/setup did not install the clients.
func requireClients(t testing.TB) (node string) {
	t.Helper()
	if _, err := os.Stat(clientsVersionFile); os.IsNotExist(err) {
		t.Skip("the real group clients (kafkajs, confluent-kafka-python) are not installed: run scripts/setup")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("scripts/setup installed the group clients (%s) but node is not on PATH: %v", clientsVersionFile, err)
	}
	if _, err := os.Stat(filepath.Join(kafkajsModules, "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs missing from %s (rerun scripts/setup): %v", kafkajsModules, err)
	}
	if out, err := exec.Command(debianPython, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Fatalf("confluent-kafka-python missing for %s (rerun scripts/setup): %v %s", debianPython, err, out)
	}
	return node
}

// groupRec is one record a group client printed.
type groupRec struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`   // base64
	Value     *string `json:"value"` // base64
}

func (r groupRec) value(t testing.TB) string {
	t.Helper()
	if r.Value == nil {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(*r.Value)
	if err != nil {
		t.Fatalf("value %q: %v", *r.Value, err)
	}
	return string(b)
}

// runGroupClient runs a client program (node group_kafkajs.js or python
// group_confluent.py) against broker and parses its output.
func runGroupClient(t testing.TB, timeout time.Duration, name string, argv ...string) []groupRec {
	t.Helper()
	out, stderr, took, err := groupClient(timeout, name, argv...)
	if err != nil {
		t.Fatalf("%v after %s\nstderr:\n%s", err, took.Round(time.Millisecond), stderr)
	}
	t.Logf("%s: %d records in %s; %s", name, len(out), took.Round(time.Millisecond), strings.TrimSpace(lastLine(stderr)))
	return out
}

// groupClient is runGroupClient for any goroutine: it returns what the
// client printed (parsed), its stderr and how long it ran.
func groupClient(timeout time.Duration, name string, argv ...string) (out []groupRec, stderr string, took time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	abs, err := filepath.Abs(kafkajsModules)
	if err != nil {
		return nil, "", 0, err
	}
	cmd.Env = append(os.Environ(), "NODE_PATH="+abs)
	var stdout, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errb
	start := time.Now()
	err = cmd.Run()
	took = time.Since(start)
	if err != nil {
		return nil, errb.String(), took, fmt.Errorf("%s: %w", name, err)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r groupRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, errb.String(), took, fmt.Errorf("%s printed %q: %w", name, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out, errb.String(), took, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func kafkajsArgs(node, broker, group, topic string, max int, idle time.Duration) []string {
	return []string{node, "clients/group_kafkajs.js", broker, group, topic, strconv.Itoa(max), strconv.FormatInt(idle.Milliseconds(), 10)}
}

func confluentArgs(broker, group, topic string, max int, idle time.Duration, strategy ...string) []string {
	return append([]string{debianPython, "clients/group_confluent.py", broker, group, topic, strconv.Itoa(max), strconv.FormatInt(idle.Milliseconds(), 10)}, strategy...)
}

// groupTopic is a cold topic of parts partitions with per records each: value
// "<topic>-<p>-<i>", timestamp ts0 + 10*i (the same in every partition), in batches of 7
// compressed with c, several segments per partition.
type groupTopic struct {
	cd    *coldData
	name  string
	parts int
	per   int
}

func buildGroupTopic(t testing.TB, name string, parts, per int, c codec.Codec) *groupTopic {
	t.Helper()
	g := &groupTopic{name: name, parts: parts, per: per}
	g.cd = buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, name, parts, map[string]string{"internal.segment.bytes": "4096"})
		for p := int32(0); p < int32(parts); p++ {
			recs := make([]rec, per)
			for i := range recs {
				recs[i] = rec{Timestamp: ts0 + int64(i)*10, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(g.value(p, int64(i)))}
			}
			pr := &producer{t: t}
			pr.produce(partitionLog(t, d, name, p), c, 7, recs)
		}
	})
	return g
}

func (g *groupTopic) value(p int32, off int64) string { return fmt.Sprintf("%s-%d-%d", g.name, p, off) }

// offsetAt is the first offset with timestamp >= ts in every partition (ListOffsets' rule;
// per when every record is older).
func (g *groupTopic) offsetAt(ts int64) int64 {
	for i := 0; i < g.per; i++ {
		if ts0+int64(i)*10 >= ts {
			return int64(i)
		}
	}
	return int64(g.per)
}

// check verifies that recs are records of the topic with the right values, and returns
// them by partition and offset; a repeat fails the test unless allowRepeats.
func (g *groupTopic) check(t testing.TB, who string, recs []groupRec, allowRepeats bool) map[int32]map[int64]bool {
	t.Helper()
	seen := map[int32]map[int64]bool{}
	for _, r := range recs {
		if r.Partition < 0 || int(r.Partition) >= g.parts || r.Offset < 0 || r.Offset >= int64(g.per) {
			t.Fatalf("%s: record at %d/%d is outside the topic", who, r.Partition, r.Offset)
		}
		if v := r.value(t); v != g.value(r.Partition, r.Offset) {
			t.Fatalf("%s: partition %d offset %d has value %q, want %q", who, r.Partition, r.Offset, v, g.value(r.Partition, r.Offset))
		}
		if seen[r.Partition] == nil {
			seen[r.Partition] = map[int64]bool{}
		}
		if seen[r.Partition][r.Offset] && !allowRepeats {
			t.Fatalf("%s: partition %d offset %d delivered twice", who, r.Partition, r.Offset)
		}
		seen[r.Partition][r.Offset] = true
	}
	return seen
}

// firstOffsets is the lowest offset each partition's records start at.
func firstOffsets(recs []groupRec) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		if o, ok := out[r.Partition]; !ok || r.Offset < o {
			out[r.Partition] = r.Offset
		}
	}
	return out
}

// nextOffsets is one past the highest offset of each partition's records.
func nextOffsets(recs []groupRec) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		if r.Offset+1 > out[r.Partition] {
			out[r.Partition] = r.Offset + 1
		}
	}
	return out
}

// fetchProc is a `tiered fetch` process on addresses chosen up front, so that a fleet's
// configuration can name its peers and a killed replica can come back on the same ones.
type fetchProc struct {
	*tieredProc
	cfgFile string
}

// fleetConfig writes the configuration of one fetch replica.
func fleetConfig(t testing.TB, httpAddr, kafkaAddr string, peers []string, lease time.Duration, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "http: {addr: %q}\nkafka: {addr: %q, advertised_addr: %q}\nshutdown_timeout: 10s\nfetch:\n  max_wait: 2s\n", httpAddr, kafkaAddr, kafkaAddr)
	if len(peers) > 0 {
		fmt.Fprintf(&b, "  peers: [%s]\n", strings.Join(peers, ", "))
	}
	if lease > 0 {
		fmt.Fprintf(&b, "  peer_lease: %s\n", lease)
	}
	b.WriteString(extra)
	f := filepath.Join(t.TempDir(), "fetch.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// startFetchAt starts `tiered fetch --bucket URL --config cfg` on the addresses the config
// names and waits for /readyz.
func startFetchAt(t testing.TB, bin, bucketURL, cfg, httpAddr, kafkaAddr string) *fetchProc {
	t.Helper()
	p, out := startTieredAt(t, bin, nil, httpAddr, kafkaAddr, "fetch", "--bucket", bucketURL, "--config", cfg, "--log-level", "info")
	if p == nil {
		t.Fatalf("tiered fetch could not bind %s, %s:\n%s", httpAddr, kafkaAddr, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fetch %s stderr (tail):\n%s", kafkaAddr, tail(p.stderr.String(), 3000))
		}
	})
	return &fetchProc{tieredProc: p, cfgFile: cfg}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// findCoordinator asks the Kafka listener at addr for group's coordinator (FindCoordinator
// v3): its error code and host:port.
func findCoordinator(addr, group string) (code int16, coord string, err error) {
	c, err := dialKafka(addr)
	if err != nil {
		return 0, "", err
	}
	defer c.close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey, req.CoordinatorType = 3, group, 0
	resp, err := c.do(req)
	if err != nil {
		return 0, "", err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	return r.ErrorCode, net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))), nil
}

// offsetFetch asks the coordinator at addr for group's committed offsets of topic
// (OffsetFetch v5): partition → offset (-1 none), or the group- or partition-level error
// code when one is set.
func offsetFetch(addr, group, topic string, parts int) (map[int32]int64, int16, error) {
	c, err := dialKafka(addr)
	if err != nil {
		return nil, 0, err
	}
	defer c.close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 5, group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < int32(parts); p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	kresp, err := c.do(req)
	if err != nil {
		return nil, 0, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return nil, resp.ErrorCode, nil
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, p.ErrorCode, nil
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, 0, nil
}

// pickAddrs picks n loopback addresses.
func pickAddrs(t testing.TB, n int) []string { return testnet.LoopbackAddrs(t, n) }
