package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// tieredProc is a `tiered serve` or `tiered fetch` process a test started,
// listening on loopback addresses picked for it.
type tieredProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	err    error // Wait's result, set before done closes
	http   string
	kafka  string
}

// startTiered starts bin with args on fresh HTTP and Kafka addresses and
// waits until /readyz answers 200. The process is killed when the test
// ends if it still runs. A port picked here can be taken by another process
// before tiered binds it; a start that fails only for that is retried on new
// addresses.
func startTiered(t testing.TB, bin string, env []string, args ...string) *tieredProc {
	t.Helper()
	const attempts = 5
	for attempt := 1; ; attempt++ {
		p, bindErr := startTieredOnce(t, bin, env, args...)
		if p != nil {
			return p
		}
		if attempt == attempts {
			t.Fatalf("tiered %s could not bind its listeners in %d attempts: %s", args[0], attempts, bindErr)
		}
		t.Logf("tiered %s lost a picked port, retrying: %s", args[0], bindErr)
	}
}

// startTieredOnce is one attempt of startTiered. It returns nil and the
// process's output when the process exited because a listener could not
// bind; every other failure ends the test.
func startTieredOnce(t testing.TB, bin string, env []string, args ...string) (*tieredProc, string) {
	t.Helper()
	addrs := testnet.LoopbackAddrs(t, 2)
	args = append(args, "--http", addrs[0], "--kafka", addrs[1])
	return startTieredAt(t, bin, env, addrs[0], addrs[1], args...)
}

// startTieredAt starts bin with args (which make it listen on httpAddr
// and kafkaAddr) and waits until /readyz answers 200. It returns nil and
// the process's output when the process exited because a listener could
// not bind; every other failure ends the test. The process is killed when
// the test ends if it still runs.
func startTieredAt(t testing.TB, bin string, env []string, httpAddr, kafkaAddr string, args ...string) (*tieredProc, string) {
	t.Helper()
	p := &tieredProc{t: t, stderr: &lockedBuffer{}, done: make(chan struct{}), http: httpAddr, kafka: kafkaAddr}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(p.url() + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, ""
			}
		}
		if p.exited() {
			out := p.stderr.String()
			if strings.Contains(out, "address already in use") {
				return nil, out
			}
			t.Fatalf("tiered %s exited before it was ready: %v\n%s", args[0], p.err, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("tiered %s not ready after 60s\n%s", args[0], p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *tieredProc) url() string { return "http://" + p.http }

func (p *tieredProc) pid() int { return p.cmd.Process.Pid }

func (p *tieredProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *tieredProc) kill9() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		p.t.Fatal(err)
	}
	<-p.done
}

// stop sends SIGTERM and requires exit status 0 within 60 s.
func (p *tieredProc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.stderr)
		}
	case <-time.After(60 * time.Second):
		p.t.Fatalf("no exit 60s after SIGTERM\n%s", p.stderr)
	}
}

// runTiered runs bin to completion and returns its exit code, stdout and
// stderr.
func runTiered(t testing.TB, bin string, args ...string) (int, []byte, string) {
	t.Helper()
	return runTieredIn(t, bin, "", nil, args...)
}

// runTieredIn is runTiered in the working directory dir ("" for this one)
// with the environment env (nil for this process's).
func runTieredIn(t testing.TB, bin, dir string, env []string, args ...string) (int, []byte, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.Bytes(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.Bytes(), errb.String()
}

// jsonRecord is a record as consume and the HTTP records API print it.
type jsonRecord struct {
	Offset int64   `json:"offset"`
	Key    *string `json:"key"`
	Value  *string `json:"value"`
}

// parseJSONRecords parses JSON lines of records.
func parseJSONRecords(data []byte) ([]jsonRecord, error) {
	var out []jsonRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("record line %q: %w", sc.Text(), err)
		}
		if r.Key == nil || r.Value == nil {
			return nil, fmt.Errorf("record line %q: null or non-text key or value", sc.Text())
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Configuration of the crash test.
const (
	// EnvServeKillRuns overrides the number of kill -9 runs (default 50).
	EnvServeKillRuns = "TIERED_SERVE_KILL_RUNS"
	// EnvServeKillSeed overrides the seed of the kill moments and the
	// produced records (default 1).
	EnvServeKillSeed = "TIERED_SERVE_KILL_SEED"
)

func envInt(t testing.TB, name string, def int64) int64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// sentRecord is a produced record.
type sentRecord struct{ key, value string }

// crashPartition is what the test knows about one partition: the records
// the server acknowledged, at their offsets, and the values of the records
// sent without an answer (the kill came first), which may or may not be in
// the log.
type crashPartition struct {
	topic string
	p     int32

	mu         sync.Mutex
	acked      map[int64]sentRecord
	unanswered map[string]bool
	remoteEnd  int64 // highest end of the bucket's copy seen so far
}

// produceUntilKilled posts batches of 1–8 records to the partition, with
// pauses of 3–22 ms, until killed is set, recording acknowledged offsets.
// An error while the server is alive fails the test; once the kill was
// sent an error leaves the request's records unanswered.
func (cp *crashPartition) produceUntilKilled(t testing.TB, base string, rng *rand.Rand, run int, killed *atomic.Bool) (acks int) {
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?auto_create=false", base, cp.topic, cp.p)
	for seq := 0; !killed.Load(); seq++ {
		n := 1 + rng.IntN(8)
		recs := make([]sentRecord, n)
		var body bytes.Buffer
		for i := range recs {
			pad := make([]byte, 20+rng.IntN(280))
			for j := range pad {
				pad[j] = byte('a' + rng.IntN(26))
			}
			recs[i] = sentRecord{key: fmt.Sprintf("k%d", rng.IntN(64)), value: fmt.Sprintf("%s-%d r%d s%d i%d %s", cp.topic, cp.p, run, seq, i, pad)}
			fmt.Fprintf(&body, "{\"key\":%q,\"value\":%q}\n", recs[i].key, recs[i].value)
		}
		unanswered := func() {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			for _, r := range recs {
				cp.unanswered[r.value] = true
			}
		}
		resp, err := hc.Post(url, "application/x-ndjson", &body)
		if err != nil {
			unanswered()
			if !killed.Load() {
				t.Errorf("produce to %s-%d while the server runs: %v", cp.topic, cp.p, err)
			}
			return acks
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			unanswered()
			if !killed.Load() {
				t.Errorf("produce to %s-%d while the server runs: %s %v %s", cp.topic, cp.p, resp.Status, err, data)
			}
			return acks
		}
		var res struct {
			Partitions []struct {
				Partition   int32 `json:"partition"`
				FirstOffset int64 `json:"first_offset"`
				LastOffset  int64 `json:"last_offset"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(data, &res); err != nil || len(res.Partitions) != 1 || res.Partitions[0].Partition != cp.p ||
			res.Partitions[0].LastOffset-res.Partitions[0].FirstOffset+1 != int64(n) {
			t.Errorf("produce to %s-%d: answer %s (%v) for %d records", cp.topic, cp.p, data, err, n)
			return acks
		}
		cp.mu.Lock()
		for i, r := range recs {
			off := res.Partitions[0].FirstOffset + int64(i)
			if prev, dup := cp.acked[off]; dup {
				t.Errorf("%s-%d: offset %d acknowledged twice (%q, then %q)", cp.topic, cp.p, off, prev.value, r.value)
			}
			cp.acked[off] = r
		}
		cp.mu.Unlock()
		acks += n
		// A pause keeps the log (read back whole after every restart)
		// small enough for 50 runs.
		time.Sleep(time.Duration(3+rng.IntN(20)) * time.Millisecond)
	}
	return acks
}

// checkRecords compares records read from a source (the server, or the
// bucket) with what was acknowledged and sent: the offsets are contiguous
// from from, every record is either the acknowledged one at its offset or
// one sent without an answer, and no value appears twice. It returns the
// acknowledged offsets present with the right key and value.
func (cp *crashPartition) checkRecords(t testing.TB, what string, recs []jsonRecord, from int64) map[int64]bool {
	t.Helper()
	ok := map[int64]bool{}
	seen := map[string]int64{}
	next := from
	bad := 0
	for _, r := range recs {
		if bad >= 10 {
			t.Errorf("%s %s-%d: more problems left out", what, cp.topic, cp.p)
			return ok
		}
		if r.Offset != next {
			t.Errorf("%s %s-%d: offset %d where %d was next", what, cp.topic, cp.p, r.Offset, next)
			return ok
		}
		next++
		if prev, dup := seen[*r.Value]; dup {
			t.Errorf("%s %s-%d: value %.40q at offsets %d and %d", what, cp.topic, cp.p, *r.Value, prev, r.Offset)
			bad++
		}
		seen[*r.Value] = r.Offset
		if a, acked := cp.acked[r.Offset]; acked {
			if a.key != *r.Key || a.value != *r.Value {
				t.Errorf("%s %s-%d: offset %d holds %q=%.40q, acknowledged as %q=%.40q", what, cp.topic, cp.p, r.Offset, *r.Key, *r.Value, a.key, a.value)
				bad++
				continue
			}
			ok[r.Offset] = true
		} else if !cp.unanswered[*r.Value] {
			t.Errorf("%s %s-%d: offset %d holds %q=%.40q, which was never sent", what, cp.topic, cp.p, r.Offset, *r.Key, *r.Value)
			bad++
		}
	}
	return ok
}

// readServer reads the partition through the server's HTTP records API from
// the log start to the log end (JSON lines) and returns the log start.
func readServer(t testing.TB, hc *http.Client, base, topic string, p int32) ([]jsonRecord, int64) {
	t.Helper()
	var info struct {
		LogStart int64 `json:"log_start_offset"`
		LogEnd   int64 `json:"log_end_offset"`
	}
	resp, err := hc.Get(fmt.Sprintf("%s/v1/topics/%s/partitions/%d", base, topic, p))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("partition %s-%d: %s %v %s", topic, p, resp.Status, err, data)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatalf("partition %s-%d: %v: %s", topic, p, err, data)
	}
	var out []jsonRecord
	throttled := 0
	for off := info.LogStart; off < info.LogEnd; {
		resp, err := hc.Get(fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_bytes=%d", base, topic, p, off, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusTooManyRequests && throttled < 100 {
			throttled++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("records of %s-%d at %d (the partition reported offsets [%d, %d)): %s %s", topic, p, off, info.LogStart, info.LogEnd, resp.Status, data)
		}
		recs, err := parseJSONRecords(data)
		if err != nil {
			t.Fatalf("records of %s-%d at %d: %v", topic, p, off, err)
		}
		// The answer starts at the batch holding off.
		for len(recs) > 0 && recs[0].Offset < off {
			recs = recs[1:]
		}
		if len(recs) == 0 {
			t.Fatalf("records of %s-%d at %d: no progress before the log end %d", topic, p, off, info.LogEnd)
		}
		out = append(out, recs...)
		off = recs[len(recs)-1].Offset + 1
	}
	return out, info.LogStart
}

// checkLocalIndexes runs the sanity checks of every .index and .timeindex
// file of the partition directory dir and checks each entry against the
// segment's .log: an offset index entry points at the start of the batch
// holding its offset, and a time index entry's offset is in the segment.
// Files that vanish meanwhile (retention) are skipped. It returns the
// number of index files checked.
func checkLocalIndexes(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range ents {
		base, suffix, ok := localtier.ParseSegmentName(e.Name())
		if !ok || (suffix != ".index" && suffix != ".timeindex") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		logData, err := os.ReadFile(localtier.SegmentPath(dir, base, ".log"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Batch start positions and offset ranges of the log.
		type span struct{ base, last int64 }
		batches := map[int32]span{}
		next := base
		it := record.NewIter(logData)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			batches[int32(it.Pos()-b.Size())] = span{b.BaseOffset(), b.LastOffset()}
			next = b.NextOffset()
		}
		if it.Err() != nil {
			t.Errorf("%s: %v", localtier.SegmentPath(dir, base, ".log"), it.Err())
			continue
		}
		switch suffix {
		case ".index":
			x, err := index.ReadOffsetIndex(vfs.Default, path, base)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Errorf("read %s: %v", path, err)
				continue
			}
			if err := x.SanityCheck(); err != nil {
				t.Errorf("sanity check: %v", err)
			}
			for i, en := range x.All() {
				s, ok := batches[en.Position]
				if !ok || en.Offset < s.base || en.Offset > s.last {
					t.Errorf("%s: entry %d (offset %d, position %d) is not at the batch holding its offset", path, i, en.Offset, en.Position)
				}
			}
			_ = x.Close()
		case ".timeindex":
			x, err := index.ReadTimeIndex(vfs.Default, path, base)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Errorf("read %s: %v", path, err)
				continue
			}
			if err := x.SanityCheck(); err != nil {
				t.Errorf("sanity check: %v", err)
			}
			for i, en := range x.All() {
				if en.Offset < base || en.Offset >= next {
					t.Errorf("%s: entry %d (timestamp %d, offset %d) is outside the segment [%d, %d)", path, i, en.Timestamp, en.Offset, base, next)
				}
			}
			_ = x.Close()
		}
		checked++
	}
	return checked
}

// TestServeKill9UnderLoad kills `tiered serve` with SIGKILL at random
// moments while producers post records over HTTP (TIERED_SERVE_KILL_RUNS
// runs, default 50; TIERED_SERVE_KILL_SEED picks the moments and records,
// default 1), on one data dir and one file:// bucket for all runs.
//
// Two topics: "durable" (2 partitions) is remote-enabled with 16 KiB
// segments, segment.ms=500 and local.retention.ms=1000, so segments roll,
// upload and are deleted locally during the runs, and flush.messages=1, so
// an acknowledged record is fsynced; "cached" (1 partition) has Kafka's
// defaults, so an acknowledged record is in the page cache, which a
// process crash does not lose.
//
// After each restart: every acknowledged record is read back at its
// acknowledged offset with its key and value through serve's HTTP API
// (from the log start, cold offsets from the bucket included); the
// bucket's copy read by `tiered consume --bucket` agrees and never
// shrinks; records not acknowledged are ones sent without an answer, none
// duplicated; every local .index/.timeindex passes the sanity checks and
// points into its log; and `tiered bucket verify --grace 1h` exits 0
// (orphans of killed uploads are younger than the grace).
func TestServeKill9UnderLoad(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kill -9 test needs Linux")
	}
	runs := int(envInt(t, EnvServeKillRuns, 50))
	seed := uint64(envInt(t, EnvServeKillSeed, 1))
	t.Logf("%d runs, seed %d (%s=%d %s=%d reproduce the kill moments and records)", runs, seed, EnvServeKillRuns, runs, EnvServeKillSeed, seed)
	bin := tiered(t)
	root := t.TempDir()
	data := filepath.Join(root, "data")
	bucketDir := filepath.Join(root, "bucket")
	if err := os.MkdirAll(bucketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + filepath.ToSlash(bucketDir)
	cfgFile := filepath.Join(root, "tiered.yaml")
	if err := os.WriteFile(cfgFile, []byte("uploader:\n  interval: 200ms\nbroker:\n  log.retention.check.interval.ms: 300\nshutdown_timeout: 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveArgs := []string{"serve", "--data-dir", data, "--bucket", bucket, "--config", cfgFile}
	hc := &http.Client{Timeout: 60 * time.Second}
	defer hc.CloseIdleConnections()

	s := startTiered(t, bin, nil, serveArgs...)
	createTopic := func(name string, parts int, cfg map[string]string) {
		body, _ := json.Marshal(map[string]any{"topic": name, "partitions": parts, "configs": cfg})
		resp, err := hc.Post(s.url()+"/v1/topics", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create topic %s: %s %s", name, resp.Status, answer)
		}
	}
	createTopic("durable", 2, map[string]string{"remote.storage.enable": "true", "internal.segment.bytes": "16384",
		"segment.ms": "500", "local.retention.ms": "1000", "flush.messages": "1"})
	createTopic("cached", 1, nil)
	parts := []*crashPartition{{topic: "durable", p: 0}, {topic: "durable", p: 1}, {topic: "cached", p: 0}}
	for _, cp := range parts {
		cp.acked, cp.unanswered = map[int64]sentRecord{}, map[string]bool{}
	}

	lost, done := 0, 0
	indexFiles, maxLocalStart := 0, int64(0)
	began := time.Now()
	for run := 0; run < runs && !t.Failed(); run++ {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		loadFor := time.Duration(200+rng.IntN(1300)) * time.Millisecond
		var killed atomic.Bool
		var wg sync.WaitGroup
		acks := make([]int, len(parts))
		for i, cp := range parts {
			prng := rand.New(rand.NewPCG(seed, uint64(run)<<8|uint64(i+1)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				acks[i] = cp.produceUntilKilled(t, s.url(), prng, run, &killed)
			}()
		}
		time.Sleep(loadFor)
		killed.Store(true)
		s.kill9()
		wg.Wait()
		if t.Failed() {
			t.Fatalf("run %d: producing failed\n%s", run, s.stderr)
		}

		phase := time.Now()
		s = startTiered(t, bin, nil, serveArgs...)
		restartTook := time.Since(phase)
		phase = time.Now()
		runChecked := 0
		var bucketTook time.Duration
		for _, cp := range parts {
			recs, start := readServer(t, hc, s.url(), cp.topic, cp.p)
			if start != 0 {
				t.Errorf("run %d: %s-%d starts at %d after the restart, want 0 (nothing expires)", run, cp.topic, cp.p, start)
			}
			ok := cp.checkRecords(t, "serve", recs, start)
			for off := range cp.acked {
				if !ok[off] {
					lost++
					if lost <= 10 {
						t.Errorf("run %d: acknowledged record %s-%d@%d not read back", run, cp.topic, cp.p, off)
					}
				}
			}
			runChecked += len(ok)
			if cp.topic != "durable" {
				continue
			}
			bphase := time.Now()
			code, out, errs := runTiered(t, bin, "consume", "--bucket", bucket, "--topic", cp.topic, "--partition", strconv.Itoa(int(cp.p)))
			bucketTook += time.Since(bphase)
			if code != 0 {
				t.Fatalf("run %d: consume --bucket %s-%d: exit %d: %s", run, cp.topic, cp.p, code, errs)
			}
			remote, err := parseJSONRecords(out)
			if err != nil {
				t.Fatalf("run %d: consume --bucket: %v", run, err)
			}
			cp.checkRecords(t, "bucket", remote, 0)
			if end := int64(len(remote)); end < cp.remoteEnd {
				t.Errorf("run %d: the bucket's copy of %s-%d shrank from %d to %d records", run, cp.topic, cp.p, cp.remoteEnd, end)
			} else {
				cp.remoteEnd = end
			}
		}
		var desc struct {
			Partitions []struct {
				LogStart int64 `json:"log_start_offset"`
			} `json:"partitions"`
		}
		if resp, err := hc.Get(s.url() + "/v1/topics/durable/config"); err != nil {
			t.Fatal(err)
		} else {
			err := json.NewDecoder(resp.Body).Decode(&desc)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range desc.Partitions {
			maxLocalStart = max(maxLocalStart, p.LogStart)
		}
		readTook := time.Since(phase)
		phase = time.Now()
		for _, cp := range parts {
			indexFiles += checkLocalIndexes(t, filepath.Join(data, fmt.Sprintf("%s-%d", cp.topic, cp.p)))
		}
		indexTook := time.Since(phase)
		phase = time.Now()
		if code, out, errs := runTiered(t, bin, "bucket", "verify", "--bucket", bucket, "--grace", "1h"); code != 0 {
			t.Errorf("run %d: bucket verify: exit %d\n%s%s", run, code, out, errs)
		}
		verifyTook := time.Since(phase)
		done++
		t.Logf("run %d: load %v, acknowledged %v; %d acknowledged records read back; bucket holds %d+%d durable records (restart %v, reads %v of which consume --bucket %v, indexes %v, bucket verify %v)",
			run, loadFor, acks, runChecked, parts[0].remoteEnd, parts[1].remoteEnd, restartTook.Round(time.Millisecond),
			readTook.Round(time.Millisecond), bucketTook.Round(time.Millisecond), indexTook.Round(time.Millisecond), verifyTook.Round(time.Millisecond))
	}
	if t.Failed() {
		t.Logf("serve stderr:\n%s", s.stderr)
	}

	// The scenario must have exercised the remote tier: uploads committed,
	// and local segments deleted after upload.
	if parts[0].remoteEnd == 0 || parts[1].remoteEnd == 0 {
		t.Errorf("nothing of durable reached the bucket (%d, %d records)", parts[0].remoteEnd, parts[1].remoteEnd)
	}
	if maxLocalStart == 0 {
		t.Errorf("no local segment of durable was deleted after upload during the runs")
	}
	s.stop()
	// After a clean stop, `tiered inspect index` accepts every index file.
	inspected := 0
	for _, cp := range parts {
		dir := filepath.Join(data, fmt.Sprintf("%s-%d", cp.topic, cp.p))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if _, suffix, ok := localtier.ParseSegmentName(e.Name()); ok && (suffix == ".index" || suffix == ".timeindex") {
				if code, _, errs := runTiered(t, bin, "inspect", "index", filepath.Join(dir, e.Name())); code != 0 {
					t.Errorf("inspect index %s: exit %d: %s", e.Name(), code, errs)
				}
				inspected++
			}
		}
	}
	checked := 0
	var sizes []string
	for _, cp := range parts {
		checked += len(cp.acked)
		sizes = append(sizes, fmt.Sprintf("%s-%d: %d acknowledged, %d unanswered, %d in the bucket", cp.topic, cp.p, len(cp.acked), len(cp.unanswered), cp.remoteEnd))
	}
	sort.Strings(sizes)
	t.Logf("%d kill -9 runs in %v: %d acknowledged records, each read back after every later restart; %d lost; %d index checks; %d index files inspected at the end; %s",
		done, time.Since(began).Round(time.Second), checked, lost, indexFiles, inspected, strings.Join(sizes, "; "))
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
	if done != runs {
		t.Errorf("%d of %d runs completed", done, runs)
	}
	reliability.Record(t, "kill -9 tiered serve under load", done, checked, lost)
}
