package httpapi

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testminio"
)

// fetchcache.TestMain is the package's only TestMain: it checks for leaked goroutines
// (testminio.Main wraps goleak) and stops the shared MinIO if a test
// started one.
func TestMain(m *testing.M) { testminio.Main(m) }

// ts0 is the first timestamp of the generated records.
const ts0 = fetchkit.Ts0
