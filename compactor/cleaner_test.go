package compactor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsStartAtZero: every tiered_compactor_* series exists, at 0,
// as soon as the cleaner is made.
func TestMetricsStartAtZero(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	e.cfg.Registerer = reg
	if _, err := New(e.dir, e.cfg); err != nil {
		t.Fatal(err)
	}
	// A second cleaner on the same registry (RunOnce again) shares the series.
	if _, err := New(e.dir, e.cfg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"runs_total", "failures_total", "bytes_read_total", "bytes_written_total", "records_kept_total",
		"records_dropped_total", "keyless_records_total", "uncleanable_partitions", "max_dirty_ratio",
		"max_compaction_delay_seconds", "buffer_utilization_ratio", "last_run_duration_seconds", "seconds_since_last_run"}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		got[strings.TrimPrefix(mf.GetName(), "tiered_compactor_")] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	for _, n := range want {
		v, ok := got[n]
		if !ok || v != 0 {
			t.Errorf("tiered_compactor_%s: present %v, value %v", n, ok, v)
		}
	}
}

// TestRunThreadsAndSummary: the background cleaner with two threads cleans
// several logs, updates the metrics, logs one summary line per run, and
// sleeps the backoff when there is nothing to do.
func TestRunThreadsAndSummary(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.dir.CreateTopic("u", 3, baseTopic); err != nil {
		t.Fatal(err)
	}
	var logs []*env
	logs = append(logs, e)
	for p := range 3 {
		logs = append(logs, &env{t: t, fs: e.fs, clock: e.clock, dir: e.dir, log: e.partition("u", int32(p))})
	}
	for _, le := range logs {
		for i := range 10 {
			le.produce(kv(fmt.Sprintf("k%d", i%3), fmt.Sprint(i)))
		}
		le.roll()
	}
	var buf bytes.Buffer
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	e.cfg.Threads = 2
	e.cfg.Registerer = reg
	e.cfg.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var c *Cleaner
	e.cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		if d != DefaultBackoff {
			t.Errorf("slept %v, want the backoff %v", d, DefaultBackoff)
		}
		// Idle: stop once every log has had its run.
		if metricValue(t, c.met.runs)+metricValue(t, c.met.failures) >= 4 {
			cancel()
		}
		runtime.Gosched()
		return ctx.Err()
	}
	c, err := New(e.dir, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, c.met.runs); got != 4 {
		t.Fatalf("runs_total = %v, want 4", got)
	}
	if got := metricValue(t, c.met.recordsDropped); got != 4*7 {
		t.Fatalf("records_dropped_total = %v", got)
	}
	if metricValue(t, c.met.bytesRead) == 0 || metricValue(t, c.met.bytesWritten) == 0 || metricValue(t, c.met.bufferUtil) == 0 {
		t.Fatal("byte counters or buffer utilisation not updated")
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "msg=\"cleaned log\""); n != 4 {
		t.Fatalf("%d summary lines:\n%s", n, out)
	}
	for _, field := range []string{"partition=", "dirty_start=", "dirty_end=", "mb_read=", "mb_written=", "mb_per_sec=", "records_before=10", "records_after=3", "size_reduction_pct="} {
		if !strings.Contains(out, field) {
			t.Fatalf("summary lacks %s:\n%s", field, out)
		}
	}
	for _, le := range logs {
		if recs := le.read(); len(recs) != 3 {
			t.Fatalf("%s: %s", le.log.Dir(), show(recs))
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestThrottle: with log.cleaner.io.max.bytes.per.second set, the cleaner
// sleeps so that bytes/elapsed stays at the rate.
func TestThrottle(t *testing.T) {
	clock := &fakeClock{ms: t0}
	var slept time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		slept += d
		clock.ms += d.Milliseconds()
		return nil
	}
	th := newThrottler(1000, clock.Now, sleep)
	for range 100 {
		if err := th.maybeThrottle(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
		clock.ms++ // the work itself takes 1 ms per 100 bytes
	}
	// 10,000 bytes at 1,000 B/s take 10 s; the work took 0.1 s.
	total := time.Duration(clock.ms-t0) * time.Millisecond
	if total < 9*time.Second || total > 11*time.Second || slept == 0 {
		t.Fatalf("10000 bytes at 1000 B/s took %v (slept %v)", total, slept)
	}
	// Unlimited never sleeps.
	un := newThrottler(DefaultIOMaxBytesPerSecond, clock.Now, func(context.Context, time.Duration) error {
		t.Fatal("slept without a limit")
		return nil
	})
	_ = un.maybeThrottle(context.Background(), 1<<40)
}

// TestThrottledPass: a pass with a rate limit sleeps for about its bytes
// over the rate.
func TestThrottledPass(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 200 {
		e.produce(kv(fmt.Sprintf("k%d", i%10), strings.Repeat("v", 500)))
	}
	e.roll()
	var slept time.Duration
	e.cfg.IOMaxBytesPerSecond = 100_000
	e.cfg.Sleep = func(_ context.Context, d time.Duration) error {
		slept += d
		e.clock.ms += d.Milliseconds()
		return nil
	}
	rep := e.pass(false)
	read := rep.Logs[0].BytesRead + rep.Logs[0].MapBytesRead
	if want := time.Duration(float64(read) / 100_000 * float64(time.Second)); slept < want/2 {
		t.Fatalf("read %d bytes at 100 kB/s but slept only %v", read, slept)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := Config{Threads: 0, DedupeBufferSize: 10, IOMaxBytesPerSecond: -1, Backoff: -time.Second}
	err := bad.Validate()
	for _, s := range []string{"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Validate does not report %s: %v", s, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestReportString(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(kv("a", "1"), kv("a", "2"))
	e.roll()
	rep := e.pass(false)
	s := rep.String()
	for _, want := range []string{"cleaned 1 of 1 compacted log(s)", "t-0", "[0, 2)", "2 -> 1"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	if _, err := RunOnce(context.Background(), e.dir, PassOptions{Topic: "nope", Config: e.cfg}); err == nil || !strings.Contains(err.Error(), "unknown topic") {
		t.Fatalf("unknown topic: %v", err)
	}
}
