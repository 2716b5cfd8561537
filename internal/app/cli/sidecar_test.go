package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/testnet"
)

// sidecarSetup is a copy of a real broker's log dir whose foo-0 rolled (segment 0, offsets
// 0..2, lies below the high watermark 3) and an empty file bucket beside it.
func sidecarSetup(t *testing.T) (logDir, bucket string) {
	t.Helper()
	root := t.TempDir()
	logDir = brokerdir.Rolled(t, filepath.Join(root, "kafka"))
	bucket = filepath.Join(root, "bucket")
	if err := os.Mkdir(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	return logDir, bucket
}

// runningSidecar is `tiered sidecar` run in-process.
type runningSidecar struct {
	addr   string // its --http / http.addr
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

// startSidecar runs the sidecar command line args, whose HTTP listener is on addr, until
// /readyz answers 200 (a first upload pass succeeded), and stops it at the end of the test.
func startSidecar(t *testing.T, addr string, args ...string) *runningSidecar {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &runningSidecar{addr: addr, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		r := &Runner{Stdout: io.Discard, Stderr: s.stderr}
		s.done <- r.Run(ctx, append([]string{"sidecar"}, args...))
	}()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := s.get(t, "/readyz")
		if code == http.StatusOK && strings.Contains(body, `"status":"ready"`) {
			return s
		}
		select {
		case c := <-s.done:
			s.done <- c
			t.Fatalf("sidecar %v exited %d before it was ready: %s", args, c, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar %v not ready in 20s: /readyz %d %s; stderr %s", args, code, body, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get answers GET path on the sidecar's listener (status 0 and the error when it fails).
func (s *runningSidecar) get(t *testing.T, path string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + s.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop cancels the sidecar's context (what SIGINT/SIGTERM do in main) and wants exit 0.
func (s *runningSidecar) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		if code != 0 {
			t.Errorf("sidecar exit %d: %s", code, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar did not stop in 30s: %s", s.stderr.String())
	}
}

// checkUploaded wants foo-0's three records readable from the bucket.
func checkUploaded(t *testing.T, bucket string) {
	t.Helper()
	remote := lines(mustRun(t, "", "consume", "--bucket", fileURL(bucket), "--topic", "foo", "--partition", "0").stdout)
	if len(remote) != 3 {
		t.Fatalf("consume --bucket after the sidecar: %d records %v, want 3", len(remote), remote)
	}
}

// TestSidecarCommand runs the sidecar configured by flags over a copy of a real broker's log
// dir until its first pass is done, checks /healthz, /readyz and /metrics, and stops it.
func TestSidecarCommand(t *testing.T) {
	logDir, bucket := sidecarSetup(t)
	addr := testnet.LoopbackAddr(t)
	s := startSidecar(t, addr, "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--http", addr, "--interval", "50ms")
	if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	_, metrics := s.get(t, "/metrics")
	for _, want := range []string{"tiered_uploader_uploaded_segments_total 1", "tiered_uploader_lag_segments 0",
		`tiered_uploader_errors_total{kind="upload"} 0`, `tiered_objstore_operations_total{operation="put"}`, "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "tiered_fetch_requests_total") {
		t.Error("/metrics of the sidecar, which serves no fetch requests, has tiered_fetch_requests_total")
	}
	if code, body := s.get(t, "/v1/topics/foo/partitions/0"); code != http.StatusNotFound || !strings.Contains(body, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("the sidecar serves no records: /v1/topics/foo/partitions/0 answered %d %s", code, body)
	}
	s.stop(t)
	checkUploaded(t, bucket)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sidecar", "--bucket", fileURL(bucket)}, 2, "--kafka-log-dir"},
		{[]string{"sidecar", "--kafka-log-dir", logDir}, 2, "--bucket"},
		{[]string{"sidecar", "--kafka-log-dir", t.TempDir(), "--bucket", fileURL(bucket)}, 1, "does not look like a Kafka log dir"},
		{[]string{"sidecar", "--kafka-log-dir", filepath.Dir(logDir), "--bucket", fileURL(bucket)}, 2, "must not be inside sidecar.kafka_log_dir"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--bootstrap-server", "nope"}, 2, "host:port"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--bootstrap-server", "127.0.0.1:1"}, 1, "sidecar.bootstrap_server"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--interval", "0s"}, 2, "flag --interval: uploader.interval: must be a positive duration"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--concurrency", "300"}, 2, "flag --concurrency: uploader.concurrency: must be from 1 to 256"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--rate", "fast"}, 2, "flag --rate"},
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(bucket), "--manifest-version", "3"}, 2, "uploader.manifest_version: must be from 1 to 2"},
		// A bucket that cannot be opened and a config file that cannot be
		// read are refused configurations, not usage errors.
		{[]string{"sidecar", "--kafka-log-dir", logDir, "--bucket", fileURL(filepath.Join(bucket, "missing"))}, 1, "refusing to start"},
		{[]string{"sidecar", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, 1, "read config file"},
	} {
		res := run(t, "", tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want %d with %q", tc.args, res.code, res.stderr, tc.code, tc.want)
		}
	}
}

// TestSidecarConfigFile: `tiered sidecar --config FILE` with sidecar.kafka_log_dir, bucket,
// http.addr and the uploader settings in the YAML runs, uploads, and serves /readyz; a flag
// overrides the file.
func TestSidecarConfigFile(t *testing.T) {
	logDir, bucket := sidecarSetup(t)
	addr := testnet.LoopbackAddr(t)
	file := filepath.Join(t.TempDir(), "tiered.yaml")
	body := "bucket: " + fileURL(bucket) + "\n" +
		"sidecar:\n  kafka_log_dir: " + logDir + "\n" +
		"http:\n  addr: 127.0.0.1:1\n" + // overridden by --http below
		"kafka:\n  addr: \":9093\"\n" + // fetch's, in a shared file: the sidecar ignores it
		"uploader:\n  interval: 50ms\n  concurrency: 2\n  bytes_per_second: 10M\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSidecar(t, addr, "--config", file, "--http", addr)
	s.stop(t)
	checkUploaded(t, bucket)
	if !strings.Contains(s.stderr.String(), "sidecar started") || !strings.Contains(s.stderr.String(), "kafka_log_dir="+logDir) {
		t.Errorf("start-up log lacks the log dir: %s", s.stderr.String())
	}
}

// TestSidecarEnvironment: the sidecar takes its log dir and bucket from
// TIERED_SIDECAR_KAFKA_LOG_DIR and TIERED_BUCKET, and uploader settings from TIERED_UPLOADER_*.
func TestSidecarEnvironment(t *testing.T) {
	logDir, bucket := sidecarSetup(t)
	addr := testnet.LoopbackAddr(t)
	t.Setenv("TIERED_SIDECAR_KAFKA_LOG_DIR", logDir)
	t.Setenv("TIERED_BUCKET", fileURL(bucket))
	t.Setenv("TIERED_HTTP_ADDR", addr)
	t.Setenv("TIERED_UPLOADER_INTERVAL", "50ms")
	s := startSidecar(t, addr)
	s.stop(t)
	checkUploaded(t, bucket)

	t.Setenv("TIERED_SIDECAR_KAFKA_LOG_DIR", filepath.Join(logDir, "missing"))
	res := run(t, "", "sidecar")
	if res.code != ExitError || !strings.Contains(res.stderr, "env TIERED_SIDECAR_KAFKA_LOG_DIR: sidecar.kafka_log_dir:") {
		t.Errorf("a missing log dir from the environment: exit %d %q", res.code, res.stderr)
	}
}

// TestConfigPrintSidecar: config print --process sidecar shows the sidecar's configuration,
// with its own defaults and each value's source, and its requirements.
func TestConfigPrintSidecar(t *testing.T) {
	logDir, bucket := sidecarSetup(t)
	file := filepath.Join(t.TempDir(), "tiered.yaml")
	if err := os.WriteFile(file, []byte("bucket: "+fileURL(bucket)+"\nsidecar:\n  kafka_log_dir: "+logDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TIERED_SIDECAR_BOOTSTRAP_SERVER", "localhost:9092")
	res := mustRun(t, "", "config", "print", "--process", "sidecar", "--config", file, "--sources", "--rate", "10M", "--interval", "30s")
	for _, want := range []string{
		"kafka_log_dir: " + logDir + " # file",
		"bootstrap_server: localhost:9092 # env",
		"bucket: " + fileURL(bucket) + " # file",
		"bytes_per_second: 10485760 # flag",
		"interval: 30s # flag",
		"concurrency: 4 # default",
		`addr: "" # default`, // no HTTP (nor Kafka) listener unless configured
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("config print --process sidecar --sources lacks %q:\n%s", want, res.stdout)
		}
	}
	sources := printedSources(t, "config", "print", "--process", "sidecar", "--config", file, "--json")
	if sources["sidecar.kafka_log_dir"] != "file" || sources["sidecar.bootstrap_server"] != "env" || sources["http.addr"] != "default" {
		t.Errorf("sources: %v", sources)
	}
	// Serve's defaults without --process; the sidecar's requirements with it.
	if res := mustRun(t, "", "config", "print", "--config", file, "--sources"); !strings.Contains(res.stdout, "addr: 127.0.0.1:8080 # default") {
		t.Errorf("config print without --process is not serve's:\n%s", res.stdout)
	}
	// As `tiered sidecar` with nothing set: the missing settings are flags
	// not given, a usage error.
	res = run(t, "", "config", "print", "--process", "sidecar")
	if res.code != ExitUsage || !strings.Contains(res.stderr, "sidecar.kafka_log_dir: required for tiered sidecar") || !strings.Contains(res.stderr, "bucket: required for tiered sidecar") {
		t.Errorf("config print --process sidecar with nothing set: exit %d %q", res.code, res.stderr)
	}
	if res := run(t, "", "config", "print", "--process", "broker"); res.code != ExitUsage || !strings.Contains(res.stderr, "want serve, sidecar or fetch") {
		t.Errorf("--process broker: exit %d %q", res.code, res.stderr)
	}
}
