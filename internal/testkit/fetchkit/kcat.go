package fetchkit

import (
	"os"
	"os/exec"
	"testing"
)

// KcatPath finds kcat (scripts/setup installs it). Missing kcat fails the
// test unless TIERED_SKIP_KCAT=1.
func KcatPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("TIERED_SKIP_KCAT") == "1" {
			t.Skip("kcat not installed and TIERED_SKIP_KCAT=1")
		}
		t.Fatalf("kcat not found (run scripts/setup, or set TIERED_SKIP_KCAT=1): %v", err)
	}
	return p
}
