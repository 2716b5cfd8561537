package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// produceN appends records with values v0..v{n-1} and timestamps
// 1000, 2000, ... to partition 0 of topic.
func produceN(t *testing.T, dir, topic string, from, n int) {
	t.Helper()
	var in strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&in, "{\"key\":\"k%d\",\"value\":\"v%d\",\"timestamp\":%d}\n", i, i, (i+1)*1000)
	}
	mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", topic, "--partition", "0")
}

func values(t *testing.T, out string) string {
	t.Helper()
	var vs []string
	for _, l := range lines(out) {
		i := strings.Index(l, `"value":"`)
		if i < 0 {
			t.Fatalf("no value in %s", l)
		}
		rest := l[i+len(`"value":"`):]
		vs = append(vs, rest[:strings.IndexByte(rest, '"')])
	}
	return strings.Join(vs, ",")
}

func TestConsumeStartAndLimit(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "c")
	produceN(t, dir, "c", 0, 3)
	produceN(t, dir, "c", 3, 3) // a second batch
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"all", nil, "v0,v1,v2,v3,v4,v5"},
		{"from_offset_mid_batch", []string{"--from-offset", "4"}, "v4,v5"},
		{"from_offset_end", []string{"--from-offset", "6"}, ""},
		{"max_records", []string{"--max-records", "2"}, "v0,v1"},
		{"max_records_across_batches", []string{"--from-offset", "2", "--max-records", "3"}, "v2,v3,v4"},
		{"from_time_exact", []string{"--from-time", "1970-01-01T00:00:03Z"}, "v2,v3,v4,v5"},
		{"from_time_between", []string{"--from-time", "1970-01-01T00:00:04.500Z"}, "v4,v5"},
		{"from_time_millis", []string{"--from-time", "5000"}, "v4,v5"},
		{"from_time_before_all", []string{"--from-time", "1970-01-01T00:00:00Z"}, "v0,v1,v2,v3,v4,v5"},
		{"from_time_after_all", []string{"--from-time", "2030-01-01T00:00:00Z"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"consume", "--data-dir", dir, "--topic", "c", "--partition", "0"}, tt.args...)
			res := mustRun(t, "", args...)
			if got := values(t, res.stdout); got != tt.want {
				t.Fatalf("values %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConsumeErrors(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "c", "--partitions", "2")
	produceN(t, dir, "c", 0, 2)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown_topic", []string{"--data-dir", dir, "--topic", "nope", "--partition", "0"}, "unknown topic or partition nope-0"},
		{"unknown_partition", []string{"--data-dir", dir, "--topic", "c", "--partition", "2"}, "unknown topic or partition c-2"},
		{"offset_past_end", []string{"--data-dir", dir, "--topic", "c", "--partition", "0", "--from-offset", "3"}, "offset 3 is out of range for c-0 (log start offset 0, log end offset 2)"},
		{"missing_data_dir", []string{"--data-dir", dir + "/nope", "--topic", "c", "--partition", "0"}, "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, "", append([]string{"consume"}, tt.args...)...)
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q, want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe to read while consume writes.
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

// TestConsumeFollow: --follow prints what another writer appends while it
// waits (it releases the data dir between polls) and exits 0 when its
// context is cancelled, as on SIGINT.
func TestConsumeFollow(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "f")
	produceN(t, dir, "f", 0, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	// The poll interval leaves the producer (which waits up to 50 ms for the
	// lock) room to take the data dir between polls.
	r := &Runner{Stdout: &out, Stderr: &errb, PollInterval: 40 * time.Millisecond, LockWait: time.Second}
	done := make(chan int)
	go func() {
		done <- r.Run(ctx, []string{"consume", "--data-dir", dir, "--topic", "f", "--partition", "0", "--follow"})
	}()
	waitFor(t, func() bool { return strings.Count(out.String(), "\n") == 2 })
	produceN(t, dir, "f", 2, 3)
	waitFor(t, func() bool { return strings.Count(out.String(), "\n") == 5 })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if got := values(t, out.String()); got != "v0,v1,v2,v3,v4" {
		t.Fatalf("followed %q", got)
	}
}

func TestConsumeFollowStopsAtMaxRecords(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "f")
	produceN(t, dir, "f", 0, 3)
	res := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "f", "--partition", "0", "--follow", "--max-records", "2")
	if got := values(t, res.stdout); got != "v0,v1" {
		t.Fatalf("got %q", got)
	}
}

// waitFor polls cond (no fixed sleeps decide the outcome; the deadline only
// bounds a hang).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
