package compactor

import (
	"context"
	"fmt"
	"path"
	"testing"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// writeRawSegment writes a .log file holding one plain batch of recs at
// base (no indexes: the log rebuilds them on open), or an empty one.
func (e *env) writeRawSegment(base int64, recs ...record.Record) {
	e.t.Helper()
	var data []byte
	if len(recs) > 0 {
		for i := range recs {
			recs[i].Offset = base + int64(i)
			recs[i].Timestamp = e.clock.ms
		}
		var err error
		if data, err = e.enc.AppendBatch(nil, record.NewBatchSpec(base, codec.None), recs); err != nil {
			e.t.Fatal(err)
		}
	}
	f, err := e.fs.Create(path.Join("/data/t-0", fmt.Sprintf("%020d.log", base)))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		e.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		e.t.Fatal(err)
	}
}

// An empty non-active segment (a segment the cleaner emptied alone, or one
// Kafka leaves behind every 2^31 offsets) joins a group without the
// offset-range check, as in Kafka. When it is the group's last segment the
// swap needs a marker batch at its base offset, which must then lie within
// 2^31-1 of the group's base: otherwise the cleaned segment refuses the
// batch and the partition is marked uncleanable for good.
func TestReviewEmptySegmentPastOffsetRangeEndsGroup(t *testing.T) {
	// Every segment is a group of its own while it holds records.
	e := newEnv(t, map[string]string{"internal.segment.bytes": "100"})
	e.produce(kv("a", "1"))
	e.roll()
	if err := e.dir.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{".log", ".index", ".timeindex", ".snapshot"} {
		_ = e.fs.Remove(path.Join("/data/t-0", fmt.Sprintf("%020d%s", 1, suf)))
	}
	const far = int64(1)<<31 + 100
	e.writeRawSegment(far, kv("b", "1"))
	e.writeRawSegment(far+100, kv("a", "2"), kv("b", "2"))
	e.writeRawSegment(far+200, kv("c", "1")) // active
	e.openDir()
	e.log = e.partition("t", 0)
	// The first pass empties the segments at 0 and far, each alone.
	e.pass(true)
	e.produce(kv("d", "1"))
	e.roll()
	// The second groups the two empty segments: the last one is 2^31+100
	// offsets past the group's base.
	rep, err := RunOnce(context.Background(), e.dir, PassOptions{Force: true, Config: e.cfg})
	if err != nil {
		t.Fatalf("second pass: %v\n%s", err, rep)
	}
	if got, want := show(e.read()), fmt.Sprintf("%d:a=2 %d:b=2 %d:c=1 %d:d=1", far+100, far+101, far+200, far+201); got != want {
		t.Fatalf("after cleaning: %s, want %s", got, want)
	}
}
