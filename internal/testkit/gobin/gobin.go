// Package gobin builds a command of this module once per test binary, for
// tests that run it as a process, and removes it when the test binary
// exits (testminio.Main runs the removal).
package gobin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// Binary is one command built once; the zero value is ready to use.
type Binary struct {
	once sync.Once
	path string
	err  error
}

// Path builds the command in pkg (a path relative to the test's package
// directory, e.g. "../cmd/tiered") on first use, into a temporary
// directory removed when testminio.Main exits, and returns the binary's
// path. A failed build fails every test that asks.
func (b *Binary) Path(t testing.TB, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "tiered-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		testminio.AtExit(func() { os.RemoveAll(dir) })
		b.path = filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
