// Package brokerdir gives tests a writable copy of a real Kafka broker's log
// dir (testdata/fixtures: a KRaft broker, node.id 1, with topic foo, whose
// partition foo-0 holds offsets 0..2 below the high watermark 3), for the
// sidecar's tests in the command line, daemon and deploy packages.
package brokerdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// KRaft is the fixture's path below the repository's testdata/fixtures.
const KRaft = "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"

// Fixtures is the absolute path of the repository's testdata/fixtures.
func Fixtures() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "fixtures")
}

// Copy copies the KRaft fixture to dst (created) and returns dst.
func Copy(t testing.TB, dst string) string {
	t.Helper()
	CopyTree(t, filepath.Join(Fixtures(), KRaft), dst)
	return dst
}

// CopyTree copies the files and directories below src to dst.
func CopyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Rolled copies the fixture to dst as Copy does, then rolls foo-0 as the broker would
// (an empty active segment at offset 3), so that its segment 0 is rolled and wholly below
// the high watermark: the one segment a sidecar uploads.
func Rolled(t testing.TB, dst string) string {
	t.Helper()
	Copy(t, dst)
	if err := os.WriteFile(filepath.Join(dst, "foo-0", "00000000000000000003.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
