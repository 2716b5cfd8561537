package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain checks for leaked goroutines and keeps the tests on loopback
// (testminio.Main: no instance-metadata lookups, S3 dials off loopback
// refused and failing the run).
func TestMain(m *testing.M) { testminio.Main(m) }

// buildBinary compiles cmd/tiered into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tiered")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestBinary runs the real binary: a produce → consume round trip, a usage
// error's exit code and message, and consume --follow ending with exit 0
// on SIGINT.
func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")

	produce := exec.Command(bin, "produce", "--data-dir", data, "--topic", "t")
	produce.Stdin = strings.NewReader("{\"key\":\"a\",\"value\":\"1\",\"timestamp\":5}\n{\"key\":\"b\",\"value\":null,\"timestamp\":6}\n")
	var perr bytes.Buffer
	produce.Stderr = &perr
	if err := produce.Run(); err != nil {
		t.Fatalf("produce: %v %s", err, perr.String())
	}
	if !strings.Contains(perr.String(), "2 records") {
		t.Fatalf("produce summary %q", perr.String())
	}
	out, err := exec.Command(bin, "consume", "--data-dir", data, "--topic", "t", "--partition", "0").Output()
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	want := `{"partition":0,"offset":0,"timestamp":5,"key":"a","value":"1","headers":[]}` + "\n" +
		`{"partition":0,"offset":1,"timestamp":6,"key":"b","value":null,"headers":[]}` + "\n"
	if string(out) != want {
		t.Fatalf("consume printed\n%s\nwant\n%s", out, want)
	}

	cmd := exec.Command(bin, "consume", "--nope")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if code := exitCode(cmd.Run()); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
	if got := strings.TrimSpace(stderr.String()); strings.Count(got, "\n") != 0 || !strings.Contains(got, "unknown flag --nope") {
		t.Fatalf("bad flag stderr %q", got)
	}
	if code := exitCode(exec.Command(bin, "inspect", "segment", filepath.Join(dir, "missing.log")).Run()); code != 1 {
		t.Fatalf("missing file: exit %d, want 1", code)
	}

	follow := exec.Command(bin, "consume", "--data-dir", data, "--topic", "t", "--partition", "0", "--follow")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	follow.Stdout = pw
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	// Once both records are printed, the process is in its poll loop.
	buf := make([]byte, len(want))
	n := 0
	for n < len(want) {
		m, err := pr.Read(buf[n:])
		if err != nil {
			t.Fatalf("read follow output: %v", err)
		}
		n += m
	}
	pr.Close()
	if err := follow.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 0 {
			t.Fatalf("consume --follow after SIGINT: exit %d (%v)", code, err)
		}
	case <-time.After(10 * time.Second):
		_ = follow.Process.Kill()
		<-done
		t.Fatal("consume --follow did not exit after SIGINT")
	}
}
