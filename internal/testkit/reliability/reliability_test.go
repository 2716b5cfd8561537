package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRecordOffWithoutEnv(t *testing.T) {
	t.Setenv(EnvOut, "")
	Record(t, "nothing", 1, 2, 0) // must not fail or write anywhere
}

func TestRecordConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	t.Setenv(EnvOut, path)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Append(path, Row{Scenario: fmt.Sprintf("s%d %s", i%5, strings.Repeat("x", 3000)), Test: "T", Runs: i, Checked: 2 * i}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	Record(t, "via Record", 3, 30, 0)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := ReadRows(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 51 {
		t.Fatalf("%d rows, want 51", len(rows))
	}
	sum := 0
	for _, r := range rows[:50] {
		sum += r.Runs
		if r.Checked != 2*r.Runs {
			t.Fatalf("row mixed up: %+v", r)
		}
	}
	if sum != 49*50/2 {
		t.Fatalf("runs sum %d", sum)
	}
	last := rows[50]
	if last.Scenario != "via Record" || last.Package != "reliability" || last.Test != t.Name() || last.Runs != 3 || last.Checked != 30 {
		t.Fatalf("Record wrote %+v", last)
	}
}

func TestAppendRefusesBadRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	for _, r := range []Row{{}, {Scenario: "x", Runs: -1}, {Scenario: "x", Lost: -2}} {
		if err := Append(path, r); err == nil {
			t.Errorf("Append(%+v) succeeded", r)
		}
	}
}

func TestReadRowsMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"not json":    "{\"scenario\":\"a\",\"runs\":1}\nnope\n",
		"no scenario": "{\"runs\":1}\n",
		"negative":    "{\"scenario\":\"a\",\"records_lost\":-1}\n",
	} {
		if _, err := ReadRows(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	rows, err := ReadRows(strings.NewReader("\n{\"scenario\":\"a\",\"runs\":1}\n\n"))
	if err != nil || len(rows) != 1 {
		t.Fatalf("blank lines: %v %v", rows, err)
	}
}
