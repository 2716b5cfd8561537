package retention

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metric returns the value of the series name{labels} in reg, and whether it exists.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// fakeAfter hands each wait to the test: the test sees the duration asked
// for and decides when it elapses.
type fakeAfter struct{ waits chan wait }

type wait struct {
	d    time.Duration
	fire chan time.Time
}

func (f *fakeAfter) After(d time.Duration) <-chan time.Time {
	w := wait{d: d, fire: make(chan time.Time, 1)}
	f.waits <- w
	return w.fire
}

func TestLoop(t *testing.T) {
	d := openDir(t, t.TempDir())
	defer d.Close()
	if _, err := d.CreateTopic("events", 2, map[string]string{"internal.segment.bytes": "2000", "retention.ms": fmt.Sprint(day),
		"retention.bytes": "6000"}); err != nil {
		t.Fatal(err)
	}
	// Partition 0: young data over the byte cap; partition 1: expired data
	// under it.
	l, _ := d.Partition("events", 0)
	l1, _ := d.Partition("events", 1)
	for i := 0; i < 16; i++ {
		appendAt(t, l, ago(int64(16-i)*10*60*1000))
		if i < 8 {
			appendAt(t, l1, ago(2*day))
		}
	}
	reg := prometheus.NewRegistry()
	fa := &fakeAfter{waits: make(chan wait)}
	loop, err := NewLoop(d, LoopOptions{Interval: 7 * time.Minute, Now: fixedNow, After: fa.After, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	// Every series exists from start-up.
	for _, r := range Reasons() {
		for _, name := range []string{"tiered_retention_deleted_segments_total", "tiered_retention_deleted_bytes_total"} {
			if v, ok := metric(t, reg, name, map[string]string{"reason": string(r)}); !ok || v != 0 {
				t.Errorf("%s{reason=%q} = %v, present %v", name, r, v, ok)
			}
		}
	}
	for _, p := range []string{"0", "1"} {
		if v, ok := metric(t, reg, "tiered_retention_earliest_offset", map[string]string{"topic": "events", "partition": p}); !ok || v != 0 {
			t.Errorf("earliest offset of events-%s = %v, present %v", p, v, ok)
		}
	}
	for _, name := range []string{"tiered_retention_size_beat_time_segments_total", "tiered_retention_passes_total", "tiered_retention_pass_errors_total"} {
		if _, ok := metric(t, reg, name, nil); !ok {
			t.Errorf("%s missing at start-up", name)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	w := <-fa.waits
	if w.d != DefaultInitialDelay {
		t.Fatalf("first wait %v, want the initial delay %v", w.d, DefaultInitialDelay)
	}
	w.fire <- now
	w = <-fa.waits // the pass is done when the loop waits again
	if w.d != 7*time.Minute {
		t.Fatalf("wait between passes %v, want the interval", w.d)
	}
	start := l.LogStartOffset()
	if start == 0 {
		t.Fatal("the loop's pass deleted nothing")
	}
	if v, _ := metric(t, reg, "tiered_retention_earliest_offset", map[string]string{"topic": "events", "partition": "0"}); v != float64(start) {
		t.Errorf("earliest offset gauge %v, want %d", v, start)
	}
	if v, _ := metric(t, reg, "tiered_retention_earliest_offset", map[string]string{"topic": "events", "partition": "1"}); v == 0 || v != float64(l1.LogStartOffset()) {
		t.Errorf("earliest offset gauge of partition 1 %v, log start %d", v, l1.LogStartOffset())
	}
	var segs, bytes float64
	for _, r := range Reasons() {
		s, _ := metric(t, reg, "tiered_retention_deleted_segments_total", map[string]string{"reason": string(r)})
		b, _ := metric(t, reg, "tiered_retention_deleted_bytes_total", map[string]string{"reason": string(r)})
		segs += s
		bytes += b
	}
	bySize, _ := metric(t, reg, "tiered_retention_deleted_segments_total", map[string]string{"reason": "retention.bytes"})
	byTime, _ := metric(t, reg, "tiered_retention_deleted_segments_total", map[string]string{"reason": "retention.ms"})
	beat, _ := metric(t, reg, "tiered_retention_size_beat_time_segments_total", nil)
	if segs == 0 || bytes == 0 || bySize == 0 || byTime == 0 || beat != bySize || segs != bySize+byTime {
		t.Errorf("counters: %v segments (%v by size, %v by time, %v beat time), %v bytes", segs, bySize, byTime, beat, bytes)
	}
	if v, _ := metric(t, reg, "tiered_retention_passes_total", nil); v != 1 {
		t.Errorf("passes = %v", v)
	}
	// A second tick: nothing more to delete, the counters stay.
	w.fire <- now
	w = <-fa.waits
	if v, _ := metric(t, reg, "tiered_retention_passes_total", nil); v != 2 {
		t.Errorf("passes = %v", v)
	}
	if s, _ := metric(t, reg, "tiered_retention_deleted_segments_total", map[string]string{"reason": "retention.bytes"}); s != bySize {
		t.Errorf("second pass deleted more: %v", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}

	// Registering twice on one registry fails cleanly.
	if _, err := NewLoop(d, LoopOptions{Registerer: reg}); err == nil || !strings.Contains(err.Error(), "register retention metrics") {
		t.Fatalf("second registration: %v", err)
	}
}

func TestCheckInterval(t *testing.T) {
	if d, err := CheckInterval(300000); err != nil || d != 5*time.Minute {
		t.Fatalf("CheckInterval(300000) = %v, %v", d, err)
	}
	if _, err := CheckInterval(0); err == nil || err.Error() != "Invalid value 0 for configuration log.retention.check.interval.ms: Value must be at least 1" {
		t.Fatalf("CheckInterval(0) = %v", err)
	}
	if d, err := CheckInterval(1<<62 + 1); err != nil || d <= 0 {
		t.Fatalf("CheckInterval(huge) = %v, %v", d, err)
	}
	if _, err := NewLoop(nil, LoopOptions{Interval: -1}); err == nil {
		t.Fatal("negative interval accepted")
	}
}
