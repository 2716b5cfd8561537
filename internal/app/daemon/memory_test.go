package daemon

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/procfs"
)

// The binary sets its soft memory limit from the budgets it is configured
// with (the garbage collector would otherwise let a heap full to its
// budgets grow to about twice them), and GOMEMLIMIT overrides it.
func TestDaemonsSetMemoryLimitFromBudgets(t *testing.T) {
	bin := tieredBin(t)
	dir := filepath.Join(t.TempDir(), "bucket")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + dir
	const mib = 1 << 20
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"fetch", nil, []string{"fetch", "--bucket", bucket, "--cache-bytes", "64MiB"},
			// cache 64 + in flight 64 + headroom 64 less 16 the runtime does
			// not count (Kafka responses are views of cached chunks; no
			// produce API)
			fmt.Sprintf("bytes=%d from=\"budgets", (64+64+64-16)*mib)},
		{"serve", nil, []string{"serve", "--data-dir", filepath.Join(t.TempDir(), "data")},
			// cache 512 + in flight 64 + Kafka 256 + produce 128 + dedupe buffer 128 + headroom 128
			fmt.Sprintf("bytes=%d from=\"budgets", (512+64+256+128+128+128)*mib)},
		{"GOMEMLIMIT wins", []string{"GOMEMLIMIT=300MiB"}, []string{"fetch", "--bucket", bucket},
			fmt.Sprintf("bytes=%d from=\"GOMEMLIMIT=300MiB\"", 300*mib)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, bin, tc.env, tc.args...)
			p.stop()
			var line string
			for _, l := range strings.Split(p.stderr.String(), "\n") {
				if strings.Contains(l, "soft memory limit") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) {
				t.Fatalf("memory limit line %q, want %q\n%s", line, tc.want, p.stderr)
			}
		})
	}
}

// fetch takes its cache and in-flight budgets' memory at start-up and
// keeps it (fetch.pretouch), so a replay's chunks land in mapped pages;
// off, or with GOGC pacing the collector (which would hand the pages back),
// it does not.
func TestFetchPretouchesItsBudgets(t *testing.T) {
	bin := tieredBin(t)
	dir := filepath.Join(t.TempDir(), "bucket")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	budgets := int64(64+64) * mib // --cache-bytes 64MiB + the default 64MiB in flight
	tests := []struct {
		name   string
		env    []string
		line   string
		minRSS int64 // VmRSS at least, once ready and a second later
		maxRSS int64 // VmRSS at most (0: no bound)
		gcOff  bool  // the collector runs from the memory limit alone
	}{
		{"default", nil, fmt.Sprintf("memory pretouched\" bytes=%d", budgets), budgets, 0, true},
		{"off", []string{"TIERED_FETCH_PRETOUCH=false"}, "", 0, budgets / 2, false},
		{"GOGC set", []string{"GOGC=100"}, "memory not pretouched\" reason=\"GOGC=100", 0, budgets / 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, bin, tc.env, "fetch", "--bucket", "file://"+dir, "--cache-bytes", "64MiB")
			for range 2 {
				rss := procfs.Status(t, p.cmd.Process.Pid, "VmRSS")
				if rss < tc.minRSS || (tc.maxRSS > 0 && rss > tc.maxRSS) {
					t.Errorf("VmRSS %d MiB, want between %d and %d MiB", rss/mib, tc.minRSS/mib, tc.maxRSS/mib)
				}
				time.Sleep(time.Second) // the runtime would return free pages by now
			}
			m := scrape(t, p.url()+"/metrics", "go_gc_gogc_percent", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes")
			// GOGC off reads as -1 in a uint64.
			if off := m["go_gc_gogc_percent"] > 1e18; off != tc.gcOff {
				t.Errorf("go_gc_gogc_percent %g: GOGC off %v, want %v", m["go_gc_gogc_percent"], off, tc.gcOff)
			}
			// The touched pages are free in the heap and still mapped
			// (idle, not released), for the chunks to take.
			if kept := int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"]); tc.minRSS > 0 && kept < tc.minRSS*9/10 {
				t.Errorf("heap free and mapped %d MiB, want at least %d MiB", kept/mib, tc.minRSS*9/10/mib)
			}
			p.stop()
			out := p.stderr.String()
			if tc.line != "" && !strings.Contains(out, tc.line) {
				t.Errorf("no %q in the log:\n%s", tc.line, out)
			}
			if tc.line == "" && strings.Contains(out, "pretouched") {
				t.Errorf("pretouch logged with fetch.pretouch off:\n%s", out)
			}
		})
	}
}

// scrape reads the named unlabelled metrics from a Prometheus text page.
func scrape(t *testing.T, url string, names ...string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	got := map[string]float64{}
	for _, l := range strings.Split(string(body), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && slices.Contains(names, f[0]) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %q", url, l)
			}
			got[f[0]] = v
		}
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			t.Fatalf("%s has no %s", url, n)
		}
	}
	return got
}
