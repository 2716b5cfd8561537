package groups

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain checks for leaked goroutines (testminio.Main wraps goleak) and
// stops the shared MinIO if a test started one.
func TestMain(m *testing.M) { testminio.Main(m) }
