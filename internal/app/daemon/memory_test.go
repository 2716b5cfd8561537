package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
