package localtier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/vfs"
)

// segment.index.bytes accepts 4 (Kafka's atLeast(4)), but a log with a
// value below 12 cannot even be opened.
func TestReviewSmallSegmentIndexBytes(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1)}
	cfg := testConfig(t, map[string]string{"segment.index.bytes": "8"})
	l, _, err := OpenLog(vfs.Default, t.TempDir(), LogOptions{Config: cfg, Now: clock.Now})
	if err != nil {
		t.Fatalf("open log with segment.index.bytes=8 (accepted by config validation): %v", err)
	}
	l.Close()
}
