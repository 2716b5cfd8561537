package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

// TestWriteReplay: the replay curve's row of a shape takes the limit as
// the lesser of its two baselines, judges cold against it, warm against
// kfake from 32 partitions on, all GETs per segment (the end checks'
// included; the sequential read's own shown beside them) against one per
// segment plus each partition's first index, and peak RSS against its
// bound; the first-byte row judges p50 against 2.5 × the range GET's.
func TestWriteReplay(t *testing.T) {
	const in = `
BenchmarkReplay/parts=32/seg=1MiB/raw_get-2 	1	1 ns/op	 400.00 MB/s	 64.00 log-objects	 1.2 store-cpu-s/GB	 0.9 client-cpu-s/GB	 91 busy-%	 12345.6 store-faults/GB
BenchmarkReplay/parts=32/seg=1MiB/cold-2    	1	700000000 ns/op	 300.00 MB/s	 1.1 GETs/MiB	 1.45 GETs/segment	 1.40 read-GETs/segment	 1.00 end-check-GETs/partition	 384.0 RSS-bound-MiB	 2.5 cpu-s/GB	 300.0 peak-RSS-MiB	 1.5 store-cpu-s/GB	 3.1 kcat-cpu-s/GB	 64 busy-%	 40 requests/read	 6.5 ms/request	 123.4 cache-wait-ms/read	 700.2 store-faults/GB
BenchmarkReplay/parts=32/seg=1MiB/warm-2    	1	600000000 ns/op	 350.00 MB/s	 0.4 cpu-s/GB	 1.6 kcat-cpu-s/GB	 52 busy-%	 39 requests/read	 2.25 ms/request	 2 step-cores	 100 end-wait-ms
BenchmarkReplay/parts=32/seg=1MiB/kfake-2   	1	1 ns/op	 300.00 MB/s
BenchmarkReplay/parts=8/seg=1MiB/raw_get-2 	1	1 ns/op	 400.00 MB/s	 16.00 log-objects	 3.0 store-cpu-s/GB
BenchmarkReplay/parts=8/seg=1MiB/cold-2    	1	1 ns/op	 200.00 MB/s	 2 GETs/MiB	 2.00 GETs/segment	 384.0 RSS-bound-MiB	 2.5 cpu-s/GB	 400.0 peak-RSS-MiB
BenchmarkReplay/parts=8/seg=1MiB/warm-2    	1	400000000 ns/op	 500.00 MB/s	 1.0 cpu-s/GB	 1.5 kcat-cpu-s/GB	 2 step-cores	 100 end-wait-ms
BenchmarkReplay/parts=8/seg=1MiB/kfake-2   	1	1 ns/op	 500.00 MB/s
BenchmarkReplayFirstByte-2 	60	1 ns/op	 4.0 get4MiB-p50-ms	 9.0 get4MiB-p99-ms	 11.0 p50-ms	 20.0 p99-ms	 3.000 round-trips-max	 2.000 round-trips-p50
`
	res, _, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	failed := writeReplay(&b, res)
	out := b.String()
	// The curve's rows, then the CPU table's (the same shapes, after it).
	rows, cpuRows := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, " | "); len(f) > 1 {
			k := strings.TrimPrefix(f[0], "| ")
			if _, ok := rows[k]; ok {
				cpuRows[k] = line
			} else {
				rows[k] = line
			}
		}
	}
	// Each process's CPU per GB and how busy the step kept the cores; the
	// bounds on cold: 0.21 GB (350 MB/s × 0.6 s) on 2 cores after 100 ms,
	// at the floor (1.2 store + 0.4 + 1.6) 0.436 s, 482 MB/s, above the
	// 350 limit; at the measured 1.5 + 2.5 + 3.1, 0.8455 s, 248 MB/s, 0.71.
	// The store's page faults per GB, raw GET and cold.
	if got, want := cpuRows["parts=32/seg=1MiB"], "| parts=32/seg=1MiB | 1.20, 0.90; 91 % | 1.50, 2.50, 3.10; 64 % | 0.40, 1.60; 52 % | 40, 39 | 6.50, 2.25 | 123; 700 | 3.20; 1.00 | 7.10; 0.71 | 12346, 700 |"; got != want {
		t.Errorf("CPU row:\n%s\nwant\n%s", got, want)
	}
	// The text gives the range of the store's faults the run measured.
	if want := "(from 700 to 12346 per GB in this run's reads)"; !strings.Contains(out, want) {
		t.Errorf("the CPU table's text does not give the run's store fault range %q", want)
	}
	if got := cpuRows["parts=8/seg=1MiB"]; !strings.Contains(got, "not run") {
		t.Errorf("CPU row of a run without the CPU figures: %q", got)
	}
	tests := []struct {
		row  string
		want []string
	}{
		// limit = min(400 raw, 350 warm); warm/kfake 1.17 at 32 partitions;
		// 1.45 GETs/segment within (64+32)/64 = 1.50 (1.40 the read's
		// own, the end checks shown apart); RSS within.
		{"parts=32/seg=1MiB", []string{"| 0.86; per run 0.86 (0.86–0.86) |", "≥ 0.80 met", "| 1.17 | ≥ 1.25 **missed**", "| 1.45 (1.50); 1.40 | 1.00 |", "| 300 (384) |"}},
		// limit = 400 raw; no warm target below 32 partitions; 2 GETs per
		// segment (no end checks counted apart) over (16+8)/16 = 1.5; RSS
		// over its bound. The floor (3.0 + 1.0 + 1.5 s/GB) over 0.2 GB on 2
		// cores after 100 ms: 0.65 s, 308 MB/s, 0.77 of the limit.
		{"parts=8/seg=1MiB", []string{"| 0.50; per run 0.50 (0.50–0.50) |", "≥ 0.80 **missed** (at most 0.77 on these cores)", "| 1.00 | — |", "| 2.00 (1.50) **over**; — | — |", "400 (384) **over**"}},
		{"parts=128/seg=1MiB", []string{"not run"}},
		{"11.0 ms", []string{"| 2.75 | ≤ 2.5 **missed** | 2, 3 |"}},
	}
	for _, tt := range tests {
		line, ok := rows[tt.row]
		if !ok {
			t.Fatalf("no row %q in\n%s", tt.row, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(line, w) {
				t.Errorf("row %q lacks %q:\n%s", tt.row, w, line)
			}
		}
	}
	if failed != 5 {
		t.Errorf("%d targets missed, want 5 (cold 8, warm 32, GETs 8, RSS 8, first byte, and none else)", failed)
	}
}

// TestWriteGroups: the consumer-group section shows the commit's
// percentiles and requests per commit, and the time to Stable per delay.
func TestWriteGroups(t *testing.T) {
	const in = `
BenchmarkCommitMinIO-2   	     200	   5908849 ns/op	         0.005000 GETs/commit	         1.000 PUTs/commit	         3.749 p50-ms	        33.29 p99-ms	   51941 B/op	     565 allocs/op
BenchmarkGroupStabilise10/initial_delay=3s-2 	1	6000000000 ns/op	 6.012 s-to-stable
`
	res, _, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	writeGroups(&b, res)
	out := b.String()
	for _, w := range []string{
		"| OffsetCommit on MinIO | 3.7 ms | 33.3 ms | 1.000 | 0.005 | 1 |",
		"| 0 | not run | |",
		"| 3 s | 6.012 s | 1 |",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("groups section lacks %q:\n%s", w, out)
		}
	}
}

// TestReplayBoundEvenRuns: the read's bytes come from each run's MB/s ×
// ns/op, not from the product of the two medians, which two runs far
// apart put 19 % too high (500 MB/s × 0.5 s for 0.21 GB).
func TestReplayBoundEvenRuns(t *testing.T) {
	raw := &result{mbps: []float64{1000, 1000}}
	warm := &result{mbps: []float64{300, 700}, nsop: []float64{700e6, 300e6},
		extras: map[string][]float64{"step-cores": {2, 2}, "end-wait-ms": {100, 100}}}
	// 0.21 GB at 4 s/GB on 2 cores after 100 ms: 0.52 s, 404 MB/s, against
	// the limit min(1000, 500).
	if got, want := replayBound(raw, warm, 4), 0.21e3/0.52/500; math.Abs(got-want) > 1e-9 {
		t.Fatalf("bound %.4f, want %.4f", got, want)
	}
}

// The CPU name go test prints may be padded with spaces; the report names
// it without them.
func TestParseTrimsCPUName(t *testing.T) {
	_, cpu, err := parse(strings.NewReader("cpu: Oxide Virtual Turin-like Processor             \nPASS\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cpu != "Oxide Virtual Turin-like Processor" {
		t.Fatalf("cpu %q", cpu)
	}
}

// TestWriteReplayCapped: a shape with a warm_capped step gets a row of the
// capped warm read against the default one and kfake, with kcat's CPU and
// page faults per GB in both; a shape without one gets none.
func TestWriteReplayCapped(t *testing.T) {
	const in = `
BenchmarkReplay/parts=128/seg=1MiB/warm-2    	1	1 ns/op	 170.00 MB/s	 5.5 kcat-cpu-s/GB	 250000 kcat-faults/GB
BenchmarkReplay/parts=128/seg=1MiB/warm_capped-2    	1	1 ns/op	 340.00 MB/s	 2.2 kcat-cpu-s/GB	 70000 kcat-faults/GB
BenchmarkReplay/parts=128/seg=1MiB/kfake-2   	1	1 ns/op	 100.00 MB/s
BenchmarkReplay/parts=8/seg=1MiB/warm-2    	1	1 ns/op	 500.00 MB/s	 1.5 kcat-cpu-s/GB
BenchmarkReplay/parts=8/seg=1MiB/kfake-2   	1	1 ns/op	 500.00 MB/s
`
	res, _, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	writeReplayCapped(&b, res)
	out := b.String()
	if want := "| parts=128/seg=1MiB | 170 | 340 | 2.00 | 3.40 | 5.50, 2.20 | 250000, 70000 |"; !strings.Contains(out, want) {
		t.Errorf("no row %q in\n%s", want, out)
	}
	if strings.Contains(out, "parts=8/") {
		t.Errorf("a row for a shape without warm_capped:\n%s", out)
	}
}

// TestKCatMalloc: the report says which malloc settings kcat ran with,
// from the environment scripts/bench ran in.
func TestKCatMalloc(t *testing.T) {
	for _, tc := range []struct {
		set       bool
		val, want string
	}{
		{false, "", "kcatTunables in"},
		{true, "", "glibc's own malloc settings"},
		{true, "glibc.malloc.hugetlb=1", "`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`"},
	} {
		if tc.set {
			t.Setenv("TIERED_BENCH_KCAT_TUNABLES", tc.val)
		} else {
			t.Setenv("TIERED_BENCH_KCAT_TUNABLES", "x") // restored after the test
			os.Unsetenv("TIERED_BENCH_KCAT_TUNABLES")
		}
		if got := kcatMalloc(); !strings.Contains(got, tc.want) {
			t.Errorf("set %v %q: %q, want it to hold %q", tc.set, tc.val, got, tc.want)
		}
	}
}

// TestAppendNote: the report names the batches BenchmarkAppend wrote per
// run and their size from the log's results, not a fixed figure.
func TestAppendNote(t *testing.T) {
	res, _, err := parse(strings.NewReader(`
BenchmarkAppend/log-2         	   30000	      9785 ns/op	1674.40 MB/s	      42 B/op	       0 allocs/op
BenchmarkAppend/log-2         	   30000	      9900 ns/op	1654.96 MB/s	      42 B/op	       0 allocs/op
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := appendNote(res); !strings.Contains(got, "a fixed 30000 batches (492 MB;") {
		t.Fatalf("append note %q, want 30000 batches of 492 MB", got)
	}
	if got := appendNote(map[string]*result{}); got != "" {
		t.Fatalf("append note without results: %q", got)
	}
}
