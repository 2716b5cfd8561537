package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeManyPartitionsUnderLowFileLimit runs `tiered serve` under
// RLIMIT_NOFILE 256 (ulimit -n in the shell that execs it) and gives it a
// topic of 1,000 partitions, three files each: with its open-file table
// (localtier.max_open_files, by default half the limit) serve creates the
// topic, takes a record in every partition and serves each back, and does
// so again after a restart that loads all 1,000 from disk. With the table
// off (-1, what serve did before), the create runs out of descriptors; it
// must then leave nothing behind (topic create is all or nothing) and serve
// must go on working. TIERED_OPENFILES_LIMIT=4096
// TIERED_OPENFILES_PARTITIONS=10000 runs the case.
func TestServeManyPartitionsUnderLowFileLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux")
	}
	limit := int(envInt(t, "TIERED_OPENFILES_LIMIT", 256))
	parts := int(envInt(t, "TIERED_OPENFILES_PARTITIONS", 1000))
	bin := tiered(t)
	for _, tc := range []struct {
		name         string
		maxOpenFiles int
		wantCreate   bool
	}{
		{"open-file table (default)", 0, true},
		{"no bound", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			cfg := filepath.Join(root, "tiered.yaml")
			if err := os.Mkdir(filepath.Join(root, "bucket"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf("localtier:\n  max_open_files: %d\nshutdown_timeout: 30s\n", tc.maxOpenFiles)), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), bin,
				"serve", "--data-dir", data, "--bucket", "file://" + filepath.ToSlash(filepath.Join(root, "bucket")), "--config", cfg}
			s := startTiered(t, "/bin/sh", nil, args...)
			if got := procLimit(t, s.pid()); got != limit {
				t.Fatalf("serve runs with a descriptor limit of %d, not %d", got, limit)
			}
			hc := &http.Client{Timeout: 60 * time.Second}
			defer hc.CloseIdleConnections()
			status, answer := postJSON(t, hc, s.url()+"/v1/topics", map[string]any{"topic": "many", "partitions": parts})
			if !tc.wantCreate {
				if status < 500 {
					t.Fatalf("create of %d partitions under ulimit -n %d without a table: %d %s; the test wants it to run out of descriptors", parts, limit, status, answer)
				}
				t.Logf("create without a table: %d %.200s", status, answer)
				ents, err := os.ReadDir(data)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), "many-") {
						t.Fatalf("the failed create left %s behind", e.Name())
					}
				}
				if status, answer := postJSON(t, hc, s.url()+"/v1/topics", map[string]any{"topic": "few", "partitions": 2}); status != http.StatusCreated {
					t.Fatalf("create after the failed one: %d %s", status, answer)
				}
				s.stop()
				s = startTiered(t, "/bin/sh", nil, args...)
				s.stop()
				return
			}
			if status != http.StatusCreated {
				t.Fatalf("create of %d partitions under ulimit -n %d: %d %s", parts, limit, status, answer)
			}
			for p := 0; p < parts; p++ {
				body := fmt.Sprintf("{\"key\":\"k\",\"value\":\"v-%d\"}\n", p)
				resp, err := hc.Post(fmt.Sprintf("%s/v1/topics/many/partitions/%d/records?auto_create=false", s.url(), p), "application/x-ndjson", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("produce to partition %d: %s %s\n%s", p, resp.Status, answer, s.stderr)
				}
			}
			readEvery := func(s *tieredProc, what string) {
				t.Helper()
				for p := 0; p < parts; p++ {
					resp, err := hc.Get(fmt.Sprintf("%s/v1/topics/many/partitions/%d/records?offset=0", s.url(), p))
					if err != nil {
						t.Fatal(err)
					}
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: read partition %d: %s %s", what, p, resp.Status, data)
					}
					recs, err := parseJSONRecords(data)
					if err != nil || len(recs) != 1 || recs[0].Value == nil || *recs[0].Value != fmt.Sprintf("v-%d", p) {
						t.Fatalf("%s: partition %d holds %s (%v)", what, p, data, err)
					}
				}
				m := scrape(t, hc, s.url())
				open, reopens := m["tiered_localtier_open_files"], m["tiered_localtier_file_reopens_total"]
				if open > float64(limit/2) || reopens == 0 || m["tiered_localtier_file_reopen_errors_total"] != 0 {
					t.Fatalf("%s: %v descriptors open (limit %d), %v reopens, %v failed", what, open, limit/2, reopens, m["tiered_localtier_file_reopen_errors_total"])
				}
				t.Logf("%s: %d partitions read, %v descriptors held by the table, %v reopens", what, parts, open, reopens)
			}
			readEvery(s, "after produce")
			s.stop()
			s = startTiered(t, "/bin/sh", nil, args...)
			readEvery(s, "after restart")
			s.stop()
		})
	}
}

// procLimit reads the soft "Max open files" of a running process.
func procLimit(t testing.TB, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			n, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Max open files line in /proc/pid/limits")
	return 0
}

func postJSON(t testing.TB, hc *http.Client, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

// scrape returns the unlabelled samples of /metrics.
func scrape(t testing.TB, hc *http.Client, base string) map[string]float64 {
	t.Helper()
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}
