package daemon

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain checks for leaked goroutines and keeps the tests on loopback
// (testminio.Main: no instance-metadata lookups, S3 dials off loopback
// refused and failing the run).
func TestMain(m *testing.M) { testminio.Main(m) }
