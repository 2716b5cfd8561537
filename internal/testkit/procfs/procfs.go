// Package procfs reads what tests measure of a process from Linux's /proc:
// its resident set (VmRSS) and peak (VmHWM).
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Status reads a kB field of /proc/PID/status ("VmRSS", "VmHWM") in
// bytes; pid 0 is the calling process.
func Status(t testing.TB, pid int, field string) int64 {
	t.Helper()
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s %s: %q", path, field, line)
			}
			return kib << 10
		}
	}
	t.Fatalf("%s has no %s", path, field)
	return 0
}
