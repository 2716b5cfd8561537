// Package integration holds tests against real MinIO, real Kafka clients
// and real tiered processes.
package integration

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

// TestMain stops the shared MinIO after the tests and checks for leaked
// goroutines.
func TestMain(m *testing.M) { testminio.Main(m) }
