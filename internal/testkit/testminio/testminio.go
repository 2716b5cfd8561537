// Package testminio runs a real MinIO server for tests: it finds the pinned
// binary that scripts/setup installs (.tools/bin/minio, or
// $TIERED_MINIO_BIN), starts it on 127.0.0.1 with a free port, a temporary
// directory and fixed test credentials, waits for /minio/health/live, and
// stops it when the test (or, for Shared, the test binary) ends.
//
// A missing binary fails the test with a message saying to run
// ./scripts/setup. Tests are skipped only when TIERED_SKIP_MINIO=1 is set;
// CI never sets it.
//
// minio-go is the independent second client: it creates buckets and lets
// tests check what tiered's own S3 code wrote.
//
// Test packages that use Shared call Main from TestMain:
//
//	func TestMain(m *testing.M) { testminio.Main(m) }
package testminio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/remotetier/objstore"
	"go.uber.org/goleak"
)

// Fixed test credentials and region.
const (
	AccessKey = "tiered-test-access"
	SecretKey = "tiered-test-secret-key"
	Region    = "us-east-1"
)

// Environment variables.
const (
	EnvSkip = "TIERED_SKIP_MINIO" // "1": skip MinIO tests
	EnvBin  = "TIERED_MINIO_BIN"  // path to the minio binary
)

const startTimeout = 60 * time.Second

// Server is one running MinIO process.
type Server struct {
	// Endpoint is the S3 endpoint, http://127.0.0.1:PORT.
	Endpoint string
	// Addr is 127.0.0.1:PORT.
	Addr string

	bin, dir, logPath string
	ownsDir           bool
	consoleAddr       string

	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	client    *minio.Client
	transport *http.Transport
}

var bucketSeq atomic.Int64

// Start starts a dedicated MinIO for this test and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	s, err := start(bin, t.TempDir(), false)
	if err != nil {
		t.Fatalf("testminio: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("testminio: stop: %v", err)
		}
	})
	return s
}

var shared struct {
	sync.Mutex
	s   *Server
	err error
}

// Shared returns the test binary's MinIO, starting it on first use. It is
// stopped by Main after the tests ran. Give each test its own bucket with
// NewBucket.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "tiered-minio-")
		if err == nil {
			shared.s, err = start(bin, dir, true)
		}
		shared.err = err
	}
	if shared.err != nil {
		t.Fatalf("testminio: %v", shared.err)
	}
	return shared.s
}

// Main runs the tests, stops the shared MinIO (if one was started), then
// checks for leaked goroutines like goleak.VerifyTestMain, and exits.
//
// The tests are kept on loopback: AWS_EC2_METADATA_DISABLED=true is set for
// the process and the commands it starts (the AWS credential chain would
// otherwise end at the instance metadata service, 169.254.169.254), and
// every S3 client the tests open refuses a connection to an address off
// loopback (objstore.SetDialCheck); any such attempt fails the run.
func Main(m *testing.M, opts ...goleak.Option) {
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	objstore.SetDialCheck(LoopbackOnly)
	code := m.Run()
	if n := offLoopback.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "testminio: the tests tried %d connections off loopback (refused)\n", n)
		code = 1
	}
	if err := StopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "testminio: stop shared MinIO: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	atExit.Lock()
	for _, f := range atExit.fs {
		f()
	}
	atExit.Unlock()
	os.Exit(code)
}

var atExit struct {
	sync.Mutex
	fs []func()
}

// AtExit has Main run f after the tests, before the process exits (with
// no t.Cleanup to run them, files shared by a whole test binary, such as
// a binary it built once, are removed this way).
func AtExit(f func()) {
	atExit.Lock()
	atExit.fs = append(atExit.fs, f)
	atExit.Unlock()
}

var offLoopback atomic.Int64

// LoopbackOnly is the dial check Main installs: it refuses (and counts) a
// connection to any address that is not a loopback IP.
func LoopbackOnly(network, address string) error {
	host, _, err := net.SplitHostPort(address)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return nil
	}
	offLoopback.Add(1)
	fmt.Fprintf(os.Stderr, "testminio: refused a %s connection to %s: tests talk to loopback only\n", network, address)
	return fmt.Errorf("connection to %s refused by the test's loopback-only check", address)
}

// StopShared stops the shared MinIO, if running.
func StopShared() error {
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil {
		return nil
	}
	err := shared.s.Stop()
	shared.s, shared.err = nil, nil
	return err
}

// binary finds the minio binary or ends the test.
func binary(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("MinIO tests skipped: %s=1", EnvSkip)
	}
	bin, err := FindBinary()
	if err != nil {
		t.Fatalf("testminio: %v", err)
	}
	return bin
}

// FindBinary returns $TIERED_MINIO_BIN or the .tools/bin/minio found by
// walking up from the working directory to the module root.
func FindBinary() (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (unset it to use .tools/bin/minio from ./scripts/setup)", EnvBin, p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".tools", "bin", "minio")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return "", fmt.Errorf("MinIO binary not found at %s: run ./scripts/setup (or set %s, or %s=1 to skip)", p, EnvBin, EnvSkip)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("MinIO binary not found (no .tools/bin/minio above the working directory): run ./scripts/setup")
		}
		dir = parent
	}
}

func start(bin, dir string, ownsDir bool) (*Server, error) {
	s := &Server{bin: bin, dir: dir, ownsDir: ownsDir, logPath: filepath.Join(dir, "minio.log")}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before MinIO binds it
		addrs, err := testnet.Pick(2)
		if err != nil {
			return nil, err
		}
		s.Addr, s.consoleAddr, s.Endpoint = addrs[0], addrs[1], "http://"+addrs[0]
		if lastErr = s.launch(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		if ownsDir {
			os.RemoveAll(dir)
		}
		return nil, lastErr
	}
	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	client, err := minio.New(s.Addr, &minio.Options{
		Creds:     credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Region:    Region,
		Transport: s.transport,
	})
	if err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	s.client = client
	return s, nil
}

// launch starts the process and waits until it is live.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	data := filepath.Join(s.dir, "data")
	cmd := exec.Command(s.bin, "server", "--quiet",
		"--address", s.Addr, "--console-address", s.consoleAddr,
		"--certs-dir", filepath.Join(s.dir, "certs"), data)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.dir,
		"MINIO_ROOT_USER=" + AccessKey,
		"MINIO_ROOT_PASSWORD=" + SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_REGION=" + Region,
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := hc.Get(s.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("minio exited during start-up; log %s:\n%s", s.logPath, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stopErr := s.Stop()
			return errors.Join(fmt.Errorf("minio not live after %s; log %s:\n%s", startTimeout, s.logPath, s.logTail()), stopErr)
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop stops the process (SIGTERM, then SIGKILL after 10 s) and waits for
// it. A Server started by Shared also removes its directory.
func (s *Server) Stop() error {
	if err := s.stopProcess(); err != nil {
		return err
	}
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if s.ownsDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}

func (s *Server) stopProcess() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// Restart stops the process and starts it again on the same address and
// data directory (for tests of an outage in the middle of uploads).
func (s *Server) Restart() error {
	if err := s.stopProcess(); err != nil {
		return err
	}
	return s.launch()
}

// Kill stops the process abruptly (SIGKILL) without restarting it.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// Client returns a minio-go client for the server.
func (s *Server) Client() *minio.Client { return s.client }

// NewBucket creates a fresh, uniquely named bucket and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := "tiered-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(bucketSeq.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("testminio: make bucket %s: %v", name, err)
	}
	return name
}

// URL returns the bucket URL tiered understands for bucket and prefix.
func (s *Server) URL(bucket, prefix string) string {
	u := url.URL{Scheme: "s3", Host: bucket, Path: "/" + strings.Trim(prefix, "/")}
	q := url.Values{"endpoint": {s.Endpoint}, "region": {Region}, "path_style": {"true"}}
	u.RawQuery = q.Encode()
	return u.String()
}

// ReadOnlyCredentials asks the server's STS (AssumeRole as the root user,
// through minio-go's credentials package) for temporary credentials whose
// inline session policy allows only reading bucket: GetObject, ListBucket
// and GetBucketLocation. Any write with them is refused (AccessDenied).
func (s *Server) ReadOnlyCredentials(t testing.TB, bucket string) (accessKey, secretKey, sessionToken string) {
	t.Helper()
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow",`+
		`"Action":["s3:GetObject","s3:ListBucket","s3:GetBucketLocation"],`+
		`"Resource":["arn:aws:s3:::%s","arn:aws:s3:::%s/*"]}]}`, bucket, bucket)
	creds, err := credentials.NewSTSAssumeRole(s.Endpoint, credentials.STSAssumeRoleOptions{
		AccessKey: AccessKey, SecretKey: SecretKey, Policy: policy, Location: Region, DurationSeconds: 3600})
	if err != nil {
		t.Fatalf("testminio: assume role: %v", err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	v, err := creds.GetWithContext(&credentials.CredContext{Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatalf("testminio: assume role with a read-only session policy: %v", err)
	}
	if v.SessionToken == "" {
		t.Fatal("testminio: assume role returned no session token")
	}
	return v.AccessKeyID, v.SecretAccessKey, v.SessionToken
}

// SetCredentialsEnv points the standard AWS credential chain of this test
// at the server's credentials, and cuts it off from the machine's own AWS
// configuration and from instance metadata. It uses t.Setenv, so the test
// cannot be parallel.
func SetCredentialsEnv(t testing.TB) {
	t.Helper()
	IsolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
}

// IsolateAWSEnv clears every AWS credential source the chain could reach
// (environment, shared files, instance metadata), so a test sees only what
// it sets itself and never sends a request off this machine.
func IsolateAWSEnv(t testing.TB) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
