package compactor

import (
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// legacyMessage frames one uncompressed magic 1 message (null: a
// tombstone; key "": a null key).
func legacyMessage(offset int64, key, value string, ts int64, null bool) []byte {
	return legacyMessageAttrs(offset, 0, key, value, ts, null)
}

func legacyMessageAttrs(offset int64, attrs int8, key, value string, ts int64, null bool) []byte {
	var k, v []byte
	if key != "" {
		k = []byte(key)
	}
	if !null {
		v = []byte(value)
	}
	return testrecs.LegacyMessage(offset, attrs, ts, k, v)
}

// writeSegment replaces the partition's first segment with data (a log
// written elsewhere, an old broker's say) as the segment at base, and
// reopens.
func (e *env) writeSegment(base int64, data []byte) {
	e.t.Helper()
	if err := e.dir.Close(); err != nil {
		e.t.Fatal(err)
	}
	for _, suf := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		_ = e.fs.Remove(localtier.SegmentPath("/data/t-0", 0, suf))
	}
	w, err := e.fs.Create(localtier.SegmentPath("/data/t-0", base, ".log"))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		e.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.openDir()
	e.log = e.partition("t", 0)
}

// A key written in the old message format and deleted after the upgrade
// to v2: Kafka's cleaner maps legacy keys like any other and removes the
// old value in the pass that first keeps the tombstone, so once the
// tombstone goes past delete.retention.ms the key is gone. Keeping legacy
// messages untouched brought the deleted value back for every consumer
// reading from the start.
func TestReviewLegacyValueDeletedByV2Tombstone(t *testing.T) {
	e := newEnv(t, nil)
	data := legacyMessage(0, "k", "old", t0, false)
	data = append(data, legacyMessage(1, "other", "x", t0, false)...)
	data = append(data, legacyMessage(2, "gone", "", t0, true)...)
	var enc record.Encoder
	v2, err := enc.AppendBatch(nil, record.NewBatchSpec(3, codec.None), []record.Record{{Offset: 3, Timestamp: t0, Key: []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	e.writeSegment(0, append(data, v2...))
	e.roll()
	e.produce(kv("tail", "y"))
	e.pass(true)
	if got, want := show(e.read()), "1:other=x 2:gone=<tombstone> 3:k=<tombstone> 4:tail=y"; got != want {
		t.Fatalf("first pass: %s, want %s", got, want)
	}
	e.clock.ms += 2 * 86_400_000
	e.pass(true)
	e.pass(true)
	// The v2 tombstone goes by its batch's delete horizon. The legacy
	// delete goes by segment times: its segment is the last clean one, so
	// it is not delete.retention.ms older than that and stays.
	if got, want := show(e.read()), "1:other=x 2:gone=<tombstone> 4:tail=y"; got != want {
		t.Fatalf("past the horizon: %s, want %s", got, want)
	}
}

// A compressed magic 1 wrapper whose records are partly superseded keeps
// the others, at their offsets, in a v2 batch of its codec (Kafka 4's
// cleaner up-converts what it rewrites, KIP-724); a wrapper that keeps all
// its records stays as it is.
func TestReviewLegacyWrapperUpConverted(t *testing.T) {
	e := newEnv(t, nil)
	wrapper := func(last int64, recs ...[3]string) []byte {
		var inner []byte
		for i, r := range recs {
			inner = append(inner, legacyMessage(int64(i), r[0], r[1], t0+int64(i), false)...)
		}
		z, err := codec.Compress(codec.Gzip, nil, inner)
		if err != nil {
			t.Fatal(err)
		}
		return legacyMessageAttrs(last, int8(codec.Gzip), "", string(z), t0+9, false)
	}
	kept := wrapper(4, [3]string{"c", "1"}, [3]string{"d", "1"})
	data := append(wrapper(2, [3]string{"a", "1"}, [3]string{"b", "1"}, [3]string{"", "keyless"}), kept...)
	var enc record.Encoder
	v2, err := enc.AppendBatch(nil, record.NewBatchSpec(5, codec.None), []record.Record{{Offset: 5, Timestamp: t0, Key: []byte("a"), Value: []byte("2")}})
	if err != nil {
		t.Fatal(err)
	}
	e.writeSegment(0, append(data, v2...))
	e.roll()
	e.pass(true)
	recs, batches := readLog(t, e.fs, e.log)
	if got, want := show(recs), "1:b=1 3:c=1 4:d=1 5:a=2"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if b := batches[0]; b.IsLegacy() || b.Codec() != codec.Gzip || b.BaseOffset() != 1 || b.LastOffset() != 1 || b.MaxTimestamp() != t0+1 {
		t.Fatalf("up-converted batch: legacy %v codec %s offsets [%d, %d] max timestamp %d", b.IsLegacy(), b.Codec(), b.BaseOffset(), b.LastOffset(), b.MaxTimestamp())
	}
	if string(batches[1]) != string(kept) {
		t.Fatal("a wrapper that keeps every record was not copied as it is")
	}
}

// A legacy (magic 0/1) delete has no delete horizon of its own: Kafka's
// cleaner drops it once its segment was last modified delete.retention.ms
// before the last segment already cleaned (legacyDeleteHorizonMs), and
// keeps it in the pass that first cleans the log. Legacy deletes were kept
// for ever, so a key deleted before an upgrade to the v2 format stayed in
// the log as a tombstone.
func TestReviewLegacyTombstoneDroppedByModTime(t *testing.T) {
	e := newEnv(t, map[string]string{"internal.segment.bytes": "100"})
	now := time.Now()
	e.clock.ms = now.UnixMilli()
	data := legacyMessage(0, "k", "old-value", 0, false)
	data = append(data, legacyMessage(1, "gone", "", 0, true)...)
	e.writeSegment(0, data)
	e.roll()
	e.produce(kv("x", "a-v2-value"))
	e.roll()
	e.produce(kv("tail", "y"))
	setModTime := func(base int64, at time.Time) {
		t.Helper()
		for _, s := range e.log.Segments() {
			if s.BaseOffset == base {
				if err := e.fs.Chtimes(s.Path, at, at); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no segment at %d", base)
	}
	setModTime(0, now.Add(-72*time.Hour))
	e.pass(true)
	want := "0:k=old-value 1:gone=<tombstone> 2:x=a-v2-value 3:tail=y"
	if got := show(e.read()); got != want {
		t.Fatalf("first cleaning: %s, want %s", got, want)
	}
	if n := len(e.log.Segments()); n != 3 {
		t.Fatalf("%d segments, want the legacy one cleaned alone", n)
	}
	// Written 12 hours before the last clean segment: within a day.
	setModTime(0, now.Add(-12*time.Hour))
	setModTime(2, now)
	e.pass(true)
	if got := show(e.read()); got != want {
		t.Fatalf("within delete.retention.ms: %s, want %s", got, want)
	}
	setModTime(0, now.Add(-25*time.Hour))
	rep := e.pass(true)
	if got, want := show(e.read()), "0:k=old-value 2:x=a-v2-value 3:tail=y"; got != want {
		t.Fatalf("past delete.retention.ms: %s, want %s", got, want)
	}
	if n := rep.Logs[0].TombstonesDrop; n != 1 {
		t.Fatalf("%d tombstones dropped, want 1", n)
	}
}
