package objstore_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

func TestAcceptance(t *testing.T) {
	objtesting.ForeachBucket(t, objtesting.AcceptanceTest)
}

// The wrappers must keep the contract: a prefixed bucket, and metrics over
// a fault injector that injects nothing.
func TestAcceptanceWrapped(t *testing.T) {
	t.Run("prefixed_memory", func(t *testing.T) {
		b, err := objstore.WithPrefix(objstore.NewMemory(), "some/prefix")
		if err != nil {
			t.Fatal(err)
		}
		objtesting.AcceptanceTest(t, b)
	})
	t.Run("metrics_faults_filesystem", func(t *testing.T) {
		fs, err := objstore.NewFilesystem(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		never := objstore.InjectorFunc(func(objstore.Call) *objstore.Fault { return nil })
		objtesting.AcceptanceTest(t, objstore.WithMetrics(objstore.WithFaults(fs, never), prometheus.NewRegistry()))
	})
	t.Run("prefixed_s3", func(t *testing.T) {
		b, err := objstore.WithPrefix(objtesting.NewMinIOBucket(t), "p/q")
		if err != nil {
			t.Fatal(err)
		}
		objtesting.AcceptanceTest(t, b)
	})
}
