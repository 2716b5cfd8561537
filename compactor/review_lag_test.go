package compactor

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// Records without timestamps (-1: a v2 producer may send them, and magic
// 0 has none) give their segment no largest timestamp. Kafka's
// LogSegment.largestTimestamp then falls back to the .log file's
// last-modified time, so min.compaction.lag.ms still protects a segment
// written a moment ago; without the fallback the segment counted as
// infinitely old and was compacted at once.
func TestReviewMinCompactionLagWithoutTimestamps(t *testing.T) {
	e := newEnv(t, map[string]string{"min.compaction.lag.ms": "3600000"})
	noTS := func(k, v string) record.Record {
		return record.Record{Key: []byte(k), Value: []byte(v), Timestamp: record.NoTimestamp}
	}
	e.produceTo(e.log, codec.None, -1, false, noTS("k", "v1"))
	e.produceTo(e.log, codec.None, -1, false, noTS("k", "v2"))
	e.roll()
	e.produce(kv("tail", "x"))
	// The fake clock is the segment files' modification time (now).
	e.clock.ms = time.Now().UnixMilli()
	e.pass(false)
	if got, want := show(e.read()), "0:k=v1 1:k=v2 2:tail=x"; got != want {
		t.Fatalf("a segment written now was compacted within min.compaction.lag.ms: %s, want %s", got, want)
	}
	e.clock.ms += 2 * 3_600_000
	e.pass(false)
	if got, want := show(e.read()), "1:k=v2 2:tail=x"; got != want {
		t.Fatalf("past min.compaction.lag.ms: %s, want %s", got, want)
	}
}
