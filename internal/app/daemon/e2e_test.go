package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/internal/testkit/gobin"
	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/internal/testkit/testrecs"
)

// The end-to-end tests run the real binary as processes: built once.
var tieredBuild gobin.Binary

func tieredBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the tiered binary")
	}
	return tieredBuild.Path(t, "../../../cmd/tiered")
}

// proc is a tiered process the test started.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
	http   string
	kafka  string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc starts bin with args and extra environment, on fresh HTTP and
// Kafka addresses, and waits until /readyz answers 200.
func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startProcAs(t, nil, bin, env, args...)
}

// startProcAs is startProc with the process attributes attr (nil: none),
// e.g. another user's credentials.
func startProcAs(t *testing.T, attr *syscall.SysProcAttr, bin string, env []string, args ...string) *proc {
	t.Helper()
	addrs := testnet.LoopbackAddrs(t, 2)
	p := &proc{t: t, stderr: &syncBuffer{}, done: make(chan error, 1), http: addrs[0], kafka: addrs[1]}
	args = append(args, "--http", p.http, "--kafka", p.kafka)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = attr
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(p.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("%s exited before it was ready: %v\n%s", args[0], err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 20s\n%s", args[0], p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) url() string { return "http://" + p.http }

// stop sends SIGTERM and requires exit status 0.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no exit 30s after SIGTERM\n%s", p.stderr)
	}
}

// runCmd runs bin to completion and returns its exit code, stdout and
// stderr.
func runCmd(t *testing.T, bin, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runCmdAs(t, nil, bin, stdin, args...)
}

// runCmdAs is runCmd with the process attributes attr (nil: none).
func runCmdAs(t *testing.T, attr *syscall.SysProcAttr, bin, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = attr
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func mustCmd(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	code, out, errs := runCmd(t, bin, stdin, args...)
	if code != 0 {
		t.Fatalf("tiered %s: exit %d\n%s", strings.Join(args, " "), code, errs)
	}
	return out
}

// e2eRec is a consumed record as the JSON lines show it.
type e2eRec struct {
	Offset int64  `json:"offset"`
	Key    string `json:"key"`
	Value  string `json:"value"`
}

func parseLines(t *testing.T, s string) []e2eRec {
	t.Helper()
	var out []e2eRec
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r e2eRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func sameE2E(t *testing.T, what string, got, want []e2eRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d (first %v)", what, len(got), len(want), got[:min(2, len(got))])
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// kafkaRecords reads want records of topic-0 from offset 0 over the Kafka
// protocol with franz-go.
func kafkaRecords(t *testing.T, addr, topic string, want int) []e2eRec {
	t.Helper()
	var out []e2eRec
	for _, r := range testrecs.ConsumeKgo(t, addr, topic, 0, kgo.NewOffset().AtStart(), want)[:want] {
		out = append(out, e2eRec{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
	}
	return out
}

// partitionJSON is the fetch API's partition answer.
type partitionJSON struct {
	LogStart int64 `json:"log_start_offset"`
	LogEnd   int64 `json:"log_end_offset"`
	Segments []struct {
		Base int64  `json:"base_offset"`
		Next int64  `json:"next_offset"`
		Tier string `json:"tier"`
	} `json:"segments"`
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", u, err, body)
		}
	}
	return resp.StatusCode
}

// TestServeEndToEnd runs tiered serve as a process: produce over HTTP, wait
// until the oldest segments are uploaded and deleted locally, read those
// cold offsets over HTTP, the Kafka protocol and from the bucket, SIGTERM,
// restart and read again, then serve the same offsets from tiered fetch.
func TestServeEndToEnd(t *testing.T) {
	bin := tieredBin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgFile := filepath.Join(dir, "tiered.yaml")
	if err := os.WriteFile(cfgFile, []byte("uploader:\n  interval: 300ms\nbroker:\n  log.retention.check.interval.ms: 300\nshutdown_timeout: 20s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serveArgs := []string{"serve", "--data-dir", data, "--config", cfgFile}
	s := startProc(t, bin, nil, serveArgs...)

	// A second serve on the same data dir names the holder.
	second := testnet.LoopbackAddrs(t, 2)
	code, _, errs := runCmd(t, bin, "", "serve", "--data-dir", data, "--http", second[0], "--kafka", second[1])
	if code != 1 || !strings.Contains(errs, "is in use by tiered serve (pid ") || !strings.Contains(errs, s.http) {
		t.Fatalf("second serve: exit %d, stderr %q", code, errs)
	}
	// So does produce --data-dir, pointing at --server.
	code, _, errs = runCmd(t, bin, `{"value":"x"}`+"\n", "produce", "--data-dir", data, "--topic", "e2e")
	if code != 1 || !strings.Contains(errs, "--server "+s.url()) {
		t.Fatalf("produce --data-dir while serve runs: exit %d, stderr %q", code, errs)
	}

	mustCmd(t, bin, "", "topic", "create", "--server", s.url(), "--topic", "e2e",
		"--config", "remote.storage.enable=true", "--config", "internal.segment.bytes=2048",
		"--config", "segment.ms=1000", "--config", "local.retention.ms=500")
	if code, _, errs := runCmd(t, bin, "", "topic", "create", "--server", s.url(), "--topic", "e2e"); code != 1 || !strings.Contains(errs, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create twice: exit %d %q", code, errs)
	}
	var want []e2eRec
	for batch := range 6 {
		var in strings.Builder
		for i := range 40 {
			n := batch*40 + i
			r := e2eRec{Offset: int64(n), Key: fmt.Sprintf("k%d", n%17), Value: fmt.Sprintf("value %d %s", n, strings.Repeat("v", n%50))}
			fmt.Fprintf(&in, "{\"key\":%q,\"value\":%q}\n", r.Key, r.Value)
			want = append(want, r)
		}
		_, _, errs := runCmd(t, bin, in.String(), "produce", "--server", s.url(), "--topic", "e2e", "--partition", "0")
		if !strings.Contains(errs, fmt.Sprintf("offsets %d-%d", batch*40, batch*40+39)) {
			t.Fatalf("produce batch %d: %q", batch, errs)
		}
	}

	// Wait until offset 0 is cold: uploaded, and deleted from local disk.
	base := s.url() + "/v1/topics/e2e/partitions/0"
	deadline := time.Now().Add(20 * time.Second)
	for {
		var desc struct {
			Partitions []struct {
				LogStart int64 `json:"log_start_offset"`
			} `json:"partitions"`
		}
		getJSON(t, s.url()+"/v1/topics/e2e/config", &desc)
		if len(desc.Partitions) == 1 && desc.Partitions[0].LogStart > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no local segment deleted after upload within 20s\n%s", s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var p partitionJSON
	if getJSON(t, base, &p); p.LogStart != 0 || p.LogEnd != int64(len(want)) || p.Segments[0].Tier != "remote" {
		t.Fatalf("partition %+v", p)
	}

	readAll := func(t *testing.T, srv *proc, what string) {
		t.Helper()
		out := mustCmd(t, bin, "", "consume", "--fetch", srv.url(), "--topic", "e2e", "--partition", "0")
		sameE2E(t, what+" consume --fetch", parseLines(t, out), want)
		sameE2E(t, what+" kafka", kafkaRecords(t, srv.kafka, "e2e", len(want)), want)
		resp, err := http.Get(srv.url() + "/v1/topics/e2e/partitions/0/records?offset=3&max_bytes=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := parseLines(t, string(body)); resp.StatusCode != 200 || len(got) == 0 || got[0] != want[3] {
			t.Fatalf("%s HTTP records at a cold offset: %d %s", what, resp.StatusCode, body)
		}
	}
	readAll(t, s, "serve")
	bucket := "file://" + filepath.ToSlash(filepath.Join(data, "bucket"))
	// The bucket alone holds a prefix of the log, cold offsets included.
	cold := func(t *testing.T) int {
		t.Helper()
		got := parseLines(t, mustCmd(t, bin, "", "consume", "--bucket", bucket, "--topic", "e2e", "--partition", "0"))
		if len(got) == 0 || len(got) > len(want) {
			t.Fatalf("consume --bucket: %d records", len(got))
		}
		sameE2E(t, "consume --bucket", got, want[:len(got)])
		return len(got)
	}
	cold(t)

	var metrics string
	{
		resp, err := http.Get(s.url() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(b)
	}
	for _, prefix := range []string{"tiered_localtier_", "tiered_compactor_", "tiered_retention_", "tiered_uploader_", "tiered_objstore_", "tiered_fetch_"} {
		if !strings.Contains(metrics, "\n"+prefix) {
			t.Errorf("/metrics has no %s series", prefix)
		}
	}

	s.stop()
	s = startProc(t, bin, nil, serveArgs...)
	readAll(t, s, "restarted serve")
	s.stop()

	remoteEnd := cold(t)
	f := startProc(t, bin, nil, "fetch", "--bucket", bucket)
	out := mustCmd(t, bin, "", "consume", "--fetch", f.url(), "--topic", "e2e", "--partition", "0", "--max-records", fmt.Sprint(remoteEnd))
	sameE2E(t, "fetch consume --fetch", parseLines(t, out), want[:remoteEnd])
	sameE2E(t, "fetch kafka", kafkaRecords(t, f.kafka, "e2e", remoteEnd), want[:remoteEnd])
	f.stop()
}

// TestServeRefusesBadConfig: every problem is listed, the exit status is 1
// (a refused configuration, as README's exit codes say; 2 is for the
// command line) and the data dir is not created.
func TestServeRefusesBadConfig(t *testing.T) {
	bin := tieredBin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgFile := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(cfgFile, []byte("data_dir: "+data+"\nno_such_key: 1\nuploader:\n  concurrency: lots\nfetch:\n  cache_bytes: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCmd(t, bin, "", "serve", "--config", cfgFile, "--bucket", "file://"+filepath.ToSlash(filepath.Join(dir, "missing")))
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"no_such_key: unknown key", "uploader.concurrency", "fetch.cache_bytes: must not be negative", "bucket file://", "4 configuration problem(s)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("want one line, got %q", errs)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir written despite the refusal: %v", err)
	}
	// An unreachable S3 endpoint alone is refused too, before the data dir.
	t.Setenv("AWS_ACCESS_KEY_ID", "e2e")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "e2e-secret")
	s3 := "s3://b/p?" + url.Values{"endpoint": {"http://" + testnet.LoopbackAddr(t)}, "region": {"us-east-1"}, "path_style": {"true"}}.Encode()
	code, _, errs = runCmd(t, bin, "", "serve", "--data-dir", data, "--bucket", s3)
	if code != 1 || !strings.Contains(errs, "bucket s3://b/p") {
		t.Fatalf("unreachable bucket: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir written despite the unreachable bucket: %v", err)
	}
}
