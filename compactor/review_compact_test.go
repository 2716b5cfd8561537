package compactor

import (
	"context"
	"fmt"
	"path"
	"strings"
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

// A dirty segment holding more offsets than the offset map has room for
// keys is cleaned as Kafka cleans it: its keys go in the map until the map
// is full (here they all fit: two keys over 30 offsets), and what the map
// covers is cleaned. Refusing the segment for its offset count alone left
// a topic with small records and the default segment.bytes and
// log.cleaner.dedupe.buffer.size uncleanable for good.
func TestReviewSegmentWithMoreOffsetsThanMapIsCleaned(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.DedupeBufferSize = 24 * 12 // 10 entries
	for i := range 30 {
		e.produce(kv(fmt.Sprintf("k%d", i%2), fmt.Sprint(i)))
	}
	e.roll()
	e.produce(kv("tail", "x"))
	rep, err := RunOnce(context.Background(), e.dir, PassOptions{Config: e.cfg})
	if err != nil {
		t.Fatalf("pass: %v\n%s", err, rep)
	}
	if got, want := show(e.read()), "28:k0=28 29:k1=29 30:tail=x"; got != want {
		t.Fatalf("after cleaning: %s, want %s", got, want)
	}
}

// When the map fills in the middle of the first dirty segment, the pass
// cleans up to the last batch the map covers and the next passes go on
// from there; no key loses its latest value on the way.
func TestReviewMapFullMidSegment(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.DedupeBufferSize = 24 * 12 // 10 entries
	for i := range 30 {
		e.produce(kv(fmt.Sprintf("k%d", i%15), fmt.Sprint(i)))
	}
	e.roll()
	e.produce(kv("tail", "x"))
	var cleanedTo []int64
	for range 6 {
		rep, err := RunOnce(context.Background(), e.dir, PassOptions{Config: e.cfg})
		if err != nil {
			t.Fatalf("pass: %v\n%s", err, rep)
		}
		if rep.LogsCleaned == 0 {
			break
		}
		cleanedTo = append(cleanedTo, rep.Logs[0].CleanedToOffset)
		recs := e.read()
		latest := map[string]string{}
		for _, r := range recs {
			latest[r.Key] = r.Value
		}
		for k := range 15 {
			if v := latest[fmt.Sprintf("k%d", k)]; v != fmt.Sprint(15+k) {
				t.Fatalf("key k%d reads %q, want %d: %s", k, v, 15+k, show(recs))
			}
		}
	}
	if len(cleanedTo) < 2 || cleanedTo[len(cleanedTo)-1] != 30 {
		t.Fatalf("cleaned-to offsets of successive passes: %v", cleanedTo)
	}
	var want []string
	for i := 15; i < 30; i++ {
		want = append(want, fmt.Sprintf("%d:k%d=%d", i, i%15, i))
	}
	if got := show(e.read()); got != strings.Join(append(want, "30:tail=x"), " ") {
		t.Fatalf("converged to %s", got)
	}
}
