package fetchcache_test

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain is the package's only TestMain: it checks for leaked goroutines
// (testminio.Main wraps goleak) and stops the shared MinIO if a test
// started one.
func TestMain(m *testing.M) { testminio.Main(m) }
