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

// Kafka gives a cleaned segment the last-modified time of the last segment
// it replaces. For records without timestamps that time is their age:
// retention.ms deletes by it and min.compaction.lag.ms waits on it. A
// cleaned segment stamped with the time of cleaning made such data look
// new again at every pass, so compact,delete never deleted it.
func TestReviewCleanedSegmentKeepsModTime(t *testing.T) {
	e := newEnv(t, nil)
	noTS := func(k, v string) record.Record {
		return record.Record{Key: []byte(k), Value: []byte(v), Timestamp: record.NoTimestamp}
	}
	e.produceTo(e.log, codec.None, -1, false, noTS("k", "v1"), noTS("k", "v2"), noTS("j", "x"))
	e.roll()
	e.produce(kv("tail", "x"))
	old := time.UnixMilli(t0 - 30*86_400_000)
	if err := e.fs.Chtimes(e.log.Segments()[0].Path, old, old); err != nil {
		t.Fatal(err)
	}
	e.pass(true)
	if got, want := show(e.read()), "1:k=v2 2:j=x 3:tail=x"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	segs, err := e.log.RetentionSegments()
	if err != nil {
		t.Fatal(err)
	}
	if got := segs[0].MaxTimestamp; got != old.UnixMilli() {
		t.Fatalf("cleaned segment dated %s, want the replaced segment's %s", time.UnixMilli(got).UTC(), old.UTC())
	}
}

// The cleaner keeps an idempotent producer's last batch (emptied) until the
// producer expires, producer.id.expiration.ms after that batch. A batch
// without timestamps (-1) gives no age, and its producer was kept for
// ever. Kafka's expiry compares now - lastTimestamp, which for -1 is
// expired at once; here such a batch is as old as its segment's file (last
// written at or after it), as for min.compaction.lag.ms, so it is kept no
// shorter than a batch with timestamps.
func TestReviewUntimedProducerStateExpires(t *testing.T) {
	e := newEnv(t, nil)
	now := time.Now()
	e.clock.ms = now.UnixMilli()
	noTS := record.Record{Key: []byte("a"), Value: []byte("1"), Timestamp: record.NoTimestamp}
	e.produceTo(e.log, codec.None, 7, false, noTS)
	e.produce(kv("a", "2"))
	e.roll()
	e.produce(kv("tail", "x"))
	setModTime := func(at time.Time) {
		t.Helper()
		if err := e.fs.Chtimes(e.log.Segments()[0].Path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	producer7 := func() bool {
		_, batches := readLog(t, e.fs, e.log)
		for _, b := range batches {
			if b.ProducerID() == 7 {
				return true
			}
		}
		return false
	}
	setModTime(now.Add(-12 * time.Hour))
	e.pass(true)
	if !producer7() {
		t.Fatal("the last batch of a producer written 12 hours ago was dropped")
	}
	if got, want := show(e.read()), "1:a=2 2:tail=x"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	setModTime(now.Add(-25 * time.Hour))
	e.pass(true)
	if producer7() {
		t.Fatal("the last batch of a producer written 25 hours ago is still kept")
	}
	if got, want := show(e.read()), "1:a=2 2:tail=x"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
