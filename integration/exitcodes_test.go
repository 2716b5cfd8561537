package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestREADMEExitCodes runs every example of the README's exit-code table
// against the binary and checks that each exits with its row's code, and
// that a failure is one line on stderr. The examples name fixtures:
// $DATA a data dir with topic t, $HELD one another process holds (this
// test's flock), $NEW a data dir not made yet, $BADYAML a malformed config
// file, $MISSING a path that does not exist.
func TestREADMEExitCodes(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := exitCodeRows(t, readme)
	bin := tiered(t)
	root := t.TempDir()
	fix := map[string]string{
		"$DATA":    filepath.Join(root, "data"),
		"$HELD":    filepath.Join(root, "held"),
		"$NEW":     filepath.Join(root, "new"),
		"$BADYAML": filepath.Join(root, "bad.yaml"),
		"$MISSING": filepath.Join(root, "missing"),
	}
	for _, dir := range []string{fix["$DATA"], fix["$HELD"]} {
		if code, _, errs := runTiered(t, bin, "topic", "create", "--data-dir", dir, "--topic", "t"); code != 0 {
			t.Fatalf("topic create in %s: exit %d %s", dir, code, errs)
		}
	}
	if err := os.WriteFile(fix["$BADYAML"], []byte("fetch: [\n  cache_bytes: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(fix["$HELD"], ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIERED_") {
			env = append(env, kv)
		}
	}
	cwd := t.TempDir() // the default ./data of a command lands here
	for _, row := range rows {
		for _, example := range row.examples {
			t.Run(strconv.Itoa(row.code)+" "+example, func(t *testing.T) {
				args := strings.Fields(example)[1:]
				for i, a := range args {
					for k, v := range fix {
						a = strings.ReplaceAll(a, k, v)
					}
					if strings.Contains(a, "$") {
						t.Fatalf("README example %q names an unknown fixture %s", example, a)
					}
					args[i] = a
				}
				code, _, errs := runTieredIn(t, bin, cwd, env, args...)
				if code != row.code {
					t.Fatalf("%s: exit %d, the README says %d\nstderr: %s", example, code, row.code, errs)
				}
				if msg := strings.TrimSpace(errs); code != 0 && (msg == "" || strings.Contains(msg, "\n")) {
					t.Fatalf("%s: a failure must be one line on stderr, got %q", example, errs)
				}
			})
		}
	}
	if _, err := os.Stat(fix["$NEW"]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start made its data dir: %v", err)
	}
}

type exitCodeRow struct {
	code     int
	examples []string
}

// exitCodeRows parses the table after the README's "exit codes" marker.
func exitCodeRows(t *testing.T, readme []byte) []exitCodeRow {
	t.Helper()
	_, rest, ok := bytes.Cut(readme, []byte("<!-- exit codes: the test reads this table -->"))
	if !ok {
		t.Fatal("README.md has no exit-code table marker")
	}
	example := regexp.MustCompile("`(tiered [^`]*)`")
	var rows []exitCodeRow
	seen := map[int]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(rest)), "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 { // header and separator
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("exit-code row %q: want 3 cells", line)
		}
		code, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			t.Fatalf("exit-code row %q: %v", line, err)
		}
		var r exitCodeRow
		r.code = code
		for _, m := range example.FindAllStringSubmatch(cells[2], -1) {
			r.examples = append(r.examples, m[1])
		}
		if len(r.examples) == 0 {
			t.Fatalf("exit-code row %d has no example command", code)
		}
		seen[code] = true
		rows = append(rows, r)
	}
	for _, c := range []int{0, 1, 2} {
		if !seen[c] {
			t.Fatalf("the README's exit-code table has no row for %d", c)
		}
	}
	return rows
}
