package objstore_test

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain checks for leaked goroutines (testminio.Main wraps goleak) and
// stops the shared MinIO.
func TestMain(m *testing.M) { testminio.Main(m) }
