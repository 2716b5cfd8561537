package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoScriptSaysItIsBuilding: scripts/demo prints what it is doing
// before the build that keeps it silent for about a minute the first time.
// A stand-in go on PATH records that it ran and fails the build, so the
// repository's bin/ is left alone; the line must come before it.
func TestDemoScriptSaysItIsBuilding(t *testing.T) {
	fake := t.TempDir()
	script := "#!/bin/sh\necho 'stand-in go ran'\nexit 3\n"
	if err := os.WriteFile(filepath.Join(fake, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../scripts/demo")
	cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("scripts/demo with a failing build: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "scripts/demo: building bin/tiered") || lines[1] != "stand-in go ran" {
		t.Fatalf("scripts/demo printed %q; want the building line, then the build", out)
	}
}
