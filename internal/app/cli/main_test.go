package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier/record"
)

// TestMain checks for leaked goroutines and keeps the tests on loopback
// (testminio.Main: no instance-metadata lookups, S3 dials off loopback
// refused and failing the run).
func TestMain(m *testing.M) { testminio.Main(m) }

const fixtures = "../../../testdata/fixtures"

type result struct {
	code           int
	stdout, stderr string
}

// run runs the command line args in-process with stdin.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	r := &Runner{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, PollInterval: 10 * time.Millisecond, LockWait: 50 * time.Millisecond,
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
	code := r.Run(context.Background(), args)
	return result{code, out.String(), errb.String()}
}

// mustRun runs args and fails the test unless they exit 0.
func mustRun(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	res := run(t, stdin, args...)
	if res.code != 0 {
		t.Fatalf("tiered %s: exit %d, stderr %q", strings.Join(args, " "), res.code, res.stderr)
	}
	return res
}

// segmentBatches reads every batch of a segment file, checking CRCs.
func segmentBatches(t *testing.T, path string) []record.Batch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIter(data)
	it.Verify = true
	var out []record.Batch
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		out = append(out, b)
	}
	if it.Err() != nil || it.Truncated() {
		t.Fatalf("%s: err %v truncated %v", path, it.Err(), it.Truncated())
	}
	return out
}

func segPath(dir, topic string, p int) string {
	return filepath.Join(dir, topic+"-"+string(rune('0'+p)), "00000000000000000000.log")
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
