package remotelog

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain stops the shared MinIO after the tests and checks for leaked
// goroutines (goleak).
func TestMain(m *testing.M) { testminio.Main(m) }
