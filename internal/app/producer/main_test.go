package producer

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testNow is the clock of the tests' log dirs and records.
var testNow = time.UnixMilli(1_700_000_000_000)

func testClock() time.Time { return testNow }

// openTopic opens a log dir in t.TempDir (closed at the test's end) with
// topic of parts partitions and configs.
func openTopic(t *testing.T, topic string, parts int, configs map[string]string) *localtier.LogDir {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{Now: testClock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.CreateTopic(topic, parts, configs); err != nil {
		t.Fatal(err)
	}
	return d
}
