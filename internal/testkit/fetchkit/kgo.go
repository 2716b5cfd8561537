package fetchkit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MustClient is a franz-go client closed when the test ends.
func MustClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
