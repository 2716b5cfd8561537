// Package reliability collects the figures of RELIABILITY.md: tests that
// run a fault, crash or corruption scenario report how many runs they made,
// how many records they checked and how many acknowledged records were
// lost, and scripts/reliability turns the collected lines into the table
// (internal/tools/reliabilityreport).
//
// Reporting is off unless the environment variable TIERED_RELIABILITY_OUT
// names a file. Each Record call appends one JSON line to it with a single
// O_APPEND write, so tests in several packages (several test binaries
// running at once) can share the file.
package reliability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// EnvOut names the results file; unset or empty disables reporting.
const EnvOut = "TIERED_RELIABILITY_OUT"

// Row is one scenario outcome, one JSON line of the results file.
type Row struct {
	Scenario string `json:"scenario"`
	Package  string `json:"package,omitempty"`
	Test     string `json:"test"`
	Runs     int    `json:"runs"`
	Checked  int    `json:"records_checked"`
	Lost     int    `json:"records_lost"`
	// Hostile is set on the row of a hostile-clients attack
	// (RecordHostile); such rows have their own section of the report.
	Hostile *Hostile `json:"hostile,omitempty"`
}

// Hostile is what one hostile-clients attack measured: the process's peak
// resident memory against the goal its budgets set, and how a probe client
// beside the attack was served.
type Hostile struct {
	// BaselineRSSBytes is the resident memory before the attack;
	// PeakRSSBytes the peak during it (VmHWM, reset before the attack).
	BaselineRSSBytes int64 `json:"baseline_rss_bytes"`
	PeakRSSBytes     int64 `json:"peak_rss_bytes"`
	// GoalBytes is the goal for the peak: baseline + cache + the budgets
	// the attack meets + 128 MiB.
	GoalBytes int64 `json:"goal_bytes"`
	// Budgets names the budgets behind GoalBytes.
	Budgets string `json:"budgets"`
	// ProbeRequests and ProbeFailures count the probe's requests during
	// the attack; ProbeP99Millis is their 99th percentile latency.
	ProbeRequests  int     `json:"probe_requests"`
	ProbeFailures  int     `json:"probe_failures"`
	ProbeP99Millis float64 `json:"probe_p99_ms"`
	// BucketGets counts bucket reads the attack caused (-1: no bucket).
	BucketGets int64 `json:"bucket_gets"`
	// Note says what the attack's answer was (refused, throttled, ...).
	Note string `json:"note,omitempty"`
}

// RecordHostile appends an attack's row (see Record); the test must also
// fail when the probe was not served or the peak broke the goal.
func RecordHostile(t testing.TB, attack string, h Hostile) {
	t.Helper()
	path := os.Getenv(EnvOut)
	if path == "" {
		return
	}
	row := Row{Scenario: attack, Test: t.Name(), Runs: 1, Hostile: &h}
	if _, file, _, ok := runtime.Caller(1); ok {
		row.Package = filepath.Base(filepath.Dir(file))
	}
	if err := Append(path, row); err != nil {
		t.Fatalf("reliability: %v", err)
	}
}

// Record appends a row for scenario when TIERED_RELIABILITY_OUT is set:
// runs is how many independent runs (fault points, kills, seeds) the test
// made, checked how many records it compared with what was acknowledged,
// and lost how many acknowledged records were missing or wrong. A test
// that finds lost > 0 must also fail; the row is written anyway so the
// report shows it. Failing to write the file fails the test.
func Record(t testing.TB, scenario string, runs, checked, lost int) {
	t.Helper()
	path := os.Getenv(EnvOut)
	if path == "" {
		return
	}
	row := Row{Scenario: scenario, Test: t.Name(), Runs: runs, Checked: checked, Lost: lost}
	if _, file, _, ok := runtime.Caller(1); ok {
		row.Package = filepath.Base(filepath.Dir(file))
	}
	if err := Append(path, row); err != nil {
		t.Fatalf("reliability: %v", err)
	}
}

// Append writes row as one JSON line at the end of path, creating it.
func Append(path string, row Row) error {
	if row.Scenario == "" {
		return fmt.Errorf("record reliability row: empty scenario")
	}
	if row.Runs < 0 || row.Checked < 0 || row.Lost < 0 {
		return fmt.Errorf("record reliability row %q: negative figure (%d runs, %d checked, %d lost)", row.Scenario, row.Runs, row.Checked, row.Lost)
	}
	line, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("record reliability row %q: %w", row.Scenario, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("record reliability row %q: %w", row.Scenario, err)
	}
	// One write of the whole line: O_APPEND makes it land after every
	// other writer's complete line.
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("record reliability row %q: %w", row.Scenario, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record reliability row %q: %w", row.Scenario, err)
	}
	return nil
}

// MaxLineBytes bounds one line of a results file.
const MaxLineBytes = 64 << 10

// ReadRows parses a results file: one JSON Row per line, blank lines
// skipped. A malformed line is an error naming its line number.
func ReadRows(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	var rows []Row
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var row Row
		if err := json.Unmarshal(line, &row); err != nil {
			return nil, fmt.Errorf("read reliability rows: line %d: %w", n, err)
		}
		if row.Scenario == "" || row.Runs < 0 || row.Checked < 0 || row.Lost < 0 {
			return nil, fmt.Errorf("read reliability rows: line %d: missing scenario or negative figure", n)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read reliability rows: %w", err)
	}
	return rows, nil
}
