package compactor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// TestCodecs: compressed batches whose records partly survive are
// re-compressed with their own codec; batches whose records all survive
// are copied byte for byte.
func TestCodecs(t *testing.T) {
	for _, c := range []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			e := newEnv(t, nil)
			e.produceTo(e.log, c, -1, false, kv("a", "1"), kv("b", "1"), kv("c", "1"))
			e.produceTo(e.log, c, -1, false, kv("a", "2"), kv("d", "2"))
			e.roll()
			_, before := readLog(t, e.fs, e.log)
			e.pass(false)
			recs, batches := readLog(t, e.fs, e.log)
			if want := "1:b=1 2:c=1 3:a=2 4:d=2"; show(recs) != want {
				t.Fatalf("got %s, want %s", show(recs), want)
			}
			if len(batches) != 2 {
				t.Fatalf("%d batches", len(batches))
			}
			for _, b := range batches {
				if b.Codec() != c {
					t.Fatalf("batch at %d has codec %s, want %s", b.BaseOffset(), b.Codec(), c)
				}
			}
			if batches[0].BaseOffset() != 0 || batches[0].LastOffsetDelta() != 2 {
				t.Fatalf("rewritten batch offsets: base %d last delta %d", batches[0].BaseOffset(), batches[0].LastOffsetDelta())
			}
			if string(batches[1]) != string(before[1]) {
				t.Fatal("a batch whose records all survive was not copied as is")
			}
		})
	}
}

// TestTransactions: aborted records go (found through the .txnindex),
// committed ones compact like others, markers stay while their data does
// and until their horizon, and nothing at or past the last stable offset
// is touched.
func TestTransactions(t *testing.T) {
	e := newEnv(t, map[string]string{"delete.retention.ms": "3600000"})
	e.produceTo(e.log, codec.None, 1, true, kv("k1", "aborted"), kv("k2", "aborted"))
	if _, err := e.log.AppendEndTxnMarker(1, 0, false, 0); err != nil {
		t.Fatal(err)
	}
	e.produceTo(e.log, codec.None, 2, true, kv("k1", "committed"))
	if _, err := e.log.AppendEndTxnMarker(2, 0, true, 0); err != nil {
		t.Fatal(err)
	}
	e.produce(kv("k3", "plain"))
	e.roll()
	lso := e.log.LogEndOffset()
	e.produceTo(e.log, codec.None, 3, true, kv("k3", "open")) // left open
	e.roll()
	e.produce(kv("k3", "after-open"))
	e.roll()
	if e.log.LastStableOffset() != lso {
		t.Fatalf("LSO %d, want %d", e.log.LastStableOffset(), lso)
	}
	rep := e.pass(false)
	if rep.Logs[0].CleanedToOffset > lso {
		t.Fatalf("cleaned past the LSO: %+v", rep.Logs[0])
	}
	want := "3:k1=committed 5:k3=plain 6:k3=open 7:k3=after-open"
	if got := show(e.read()); got != want {
		t.Fatalf("after the first pass: %s, want %s", got, want)
	}
	_, batches := readLog(t, e.fs, e.log)
	var kinds []string
	for _, b := range batches {
		switch {
		case b.IsControl():
			kinds = append(kinds, fmt.Sprintf("marker@%d(h=%v)", b.BaseOffset(), b.HasDeleteHorizon()))
		case b.RecordCount() == 0:
			kinds = append(kinds, fmt.Sprintf("empty@%d-%d(pid %d)", b.BaseOffset(), b.LastOffset(), b.ProducerID()))
		}
	}
	// Producer 1's last batch survives empty; both markers stay (their
	// data was seen in this pass).
	if got := strings.Join(kinds, " "); got != "empty@0-1(pid 1) marker@2(h=false) marker@4(h=false)" {
		t.Fatalf("batches: %s", got)
	}
	if txns := e.log.AbortedTxns(0, 100); len(txns) != 1 || txns[0].ProducerID != 1 {
		t.Fatalf("aborted txns after cleaning: %+v", txns)
	}
	// Two days on, producer 1 has expired: its empty batch goes; the next
	// passes set the abort marker's horizon and then drop it. The commit
	// marker stays while k1=committed does.
	e.clock.ms += 2 * 86_400_000
	e.pass(true)
	e.pass(true)
	e.clock.ms += 3_600_000
	e.pass(true)
	_, batches = readLog(t, e.fs, e.log)
	kinds = nil
	for _, b := range batches {
		if b.IsControl() || b.RecordCount() == 0 {
			kinds = append(kinds, fmt.Sprintf("%d:control=%v", b.BaseOffset(), b.IsControl()))
		}
	}
	if got := strings.Join(kinds, " "); got != "4:control=true" {
		t.Fatalf("after expiry and horizon: %s", got)
	}
	if got := show(e.read()); got != want {
		t.Fatalf("data changed: %s, want %s", got, want)
	}
}

// TestEmptyBatchKeepsProducerState: an idempotent producer's last batch
// survives as an empty batch with its offsets and producer fields.
func TestEmptyBatchKeepsProducerState(t *testing.T) {
	e := newEnv(t, nil)
	e.produceTo(e.log, codec.Zstd, 7, false, kv("a", "1"), kv("b", "1"))
	e.produce(kv("a", "2"), kv("b", "2"))
	e.roll()
	e.pass(false)
	_, batches := readLog(t, e.fs, e.log)
	if len(batches) != 2 {
		t.Fatalf("%d batches", len(batches))
	}
	b := batches[0]
	if b.RecordCount() != 0 || b.BaseOffset() != 0 || b.LastOffset() != 1 || b.ProducerID() != 7 || b.BaseSequence() != 0 || b.Codec() != codec.None {
		t.Fatalf("empty batch: count %d offsets [%d, %d] pid %d seq %d codec %s", b.RecordCount(), b.BaseOffset(), b.LastOffset(), b.ProducerID(), b.BaseSequence(), b.Codec())
	}
	if got := show(e.read()); got != "2:a=2 3:b=2" {
		t.Fatal(got)
	}
	// A second pass keeps it (still the producer's last batch).
	e.produce(kv("c", "3"))
	e.roll()
	e.pass(false)
	if _, batches := readLog(t, e.fs, e.log); batches[0].ProducerID() != 7 {
		t.Fatal("empty batch dropped while the producer is active")
	}
}

// TestSparseOffsets: cleaning an already-cleaned log keeps offsets a subset
// of the originals, and reads from a gap start at the next batch.
func TestSparseOffsets(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 20 {
		e.produce(kv(fmt.Sprintf("k%d", i%4), fmt.Sprint(i)))
		if i%5 == 4 {
			e.roll()
		}
	}
	e.pass(false)
	first := e.read()
	if want := []int64{16, 17, 18, 19}; !slices.Equal(offsetsOf(first), want) {
		t.Fatalf("offsets %v", offsetsOf(first))
	}
	for i := 20; i < 30; i++ {
		e.produce(kv(fmt.Sprintf("k%d", i%6+2), fmt.Sprint(i)))
	}
	e.roll()
	e.pass(false)
	recs := e.read()
	if want := []int64{16, 17, 24, 25, 26, 27, 28, 29}; !slices.Equal(offsetsOf(recs), want) {
		t.Fatalf("offsets %v, want %v", offsetsOf(recs), want)
	}
	res, err := e.log.Read(20, 1000, true)
	if err != nil || record.Batch(res.Data).BaseOffset() != 24 {
		t.Fatalf("read in a gap: %v", err)
	}
}

// TestMapTooSmall: with room for fewer keys than the dirty region holds,
// each pass cleans what fits and the passes converge to the full result.
func TestMapTooSmall(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.DedupeBufferSize = 24 * 28 // 25 entries at load factor 0.9
	for s := range 6 {
		for i := range 10 {
			e.produce(kv(fmt.Sprintf("k%d", (s*10+i)%40), fmt.Sprint(s*10+i)))
		}
		e.roll()
	}
	var passes []int64
	for range 10 {
		rep := e.pass(false)
		if rep.LogsCleaned == 0 {
			break
		}
		passes = append(passes, rep.Logs[0].CleanedToOffset)
	}
	if len(passes) < 3 || passes[len(passes)-1] != 60 {
		t.Fatalf("cleaned-to offsets of successive passes: %v", passes)
	}
	recs := e.read()
	if len(recs) != 40 || recs[0].Offset != 20 {
		t.Fatalf("converged to %s", show(recs))
	}
}

// TestFailingLogMarkedUncleanable: a log whose cleaning fails (here a
// batch whose CRC does not match) is an error for that log only and is
// marked uncleanable; other logs are cleaned.
func TestFailingLogMarkedUncleanable(t *testing.T) {
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	e.cfg.Registerer = reg
	if _, err := e.dir.CreateTopic("u", 1, baseTopic); err != nil {
		t.Fatal(err)
	}
	u := e.partition("u", 0)
	for i := range 11 {
		e.produce(kv(fmt.Sprintf("k%d", i), "v"))
	}
	e.roll()
	e.produceTo(u, codec.None, -1, false, kv("x", "1"))
	e.produceTo(u, codec.None, -1, false, kv("x", "2"))
	if err := u.Roll(); err != nil {
		t.Fatal(err)
	}
	// Change the first record's key from k0 to k9 without fixing the CRC.
	f, err := e.fs.OpenFile(e.log.Segments()[0].Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("9"), record.HeaderSize+6); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := New(e.dir, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.RunPass(context.Background(), PassOptions{})
	if !record.IsCorrupt(err) {
		t.Fatalf("pass error: %v", err)
	}
	if rep.LogsCleaned != 1 || rep.Errors != 1 || !rep.Logs[0].Uncleanable || rep.Logs[1].Error != "" {
		t.Fatalf("report: %s", rep)
	}
	if got := metricValue(t, c.met.uncleanable); got != 1 {
		t.Fatalf("uncleanable_partitions = %v", got)
	}
	if _, ok := c.Uncleanable()["t-0"]; !ok {
		t.Fatalf("uncleanable: %v", c.Uncleanable())
	}
	// Uncleanable logs are skipped by later passes of the same cleaner.
	rep, err = c.RunPass(context.Background(), PassOptions{Force: true})
	if err != nil || len(rep.Logs) != 1 || rep.Logs[0].Topic != "u" {
		t.Fatalf("second pass: %v %s", err, rep)
	}
}

// TestKeylessDropped: records without a key (written before the topic became
// compacted) are dropped and counted.
func TestKeylessDropped(t *testing.T) {
	e := newEnv(t, map[string]string{"cleanup.policy": "delete"})
	e.produce(record.Record{Value: []byte("no key")}, kv("a", "1"))
	e.roll()
	if err := e.dir.AlterTopic("t", map[string]string{"cleanup.policy": "compact"}, nil); err != nil {
		t.Fatal(err)
	}
	rep := e.pass(true)
	if rep.Logs[0].KeylessDropped != 1 {
		t.Fatalf("report: %+v", rep.Logs[0])
	}
	if got := show(e.read()); got != "1:a=1" {
		t.Fatal(got)
	}
}

// TestCompactionLags: records younger than min.compaction.lag.ms are not
// touched; a log whose dirty part is older than max.compaction.lag.ms is
// cleaned even below min.cleanable.dirty.ratio.
func TestCompactionLags(t *testing.T) {
	e := newEnv(t, map[string]string{"min.compaction.lag.ms": "60000"})
	e.produce(kv("a", "1"))
	e.produce(kv("a", "2"))
	e.roll()
	if rep := e.pass(false); rep.LogsCleaned != 0 {
		t.Fatalf("cleaned within min.compaction.lag.ms: %s", rep)
	}
	e.clock.ms += 60_001
	if rep := e.pass(false); rep.LogsCleaned != 1 || len(e.read()) != 1 {
		t.Fatalf("not cleaned after the lag: %s", rep)
	}

	e2 := newEnv(t, map[string]string{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "60000"})
	e2.produce(kv("a", "1"))
	e2.roll()
	e2.pass(true) // everything clean
	e2.produce(kv("a", "2"))
	e2.roll()
	if rep := e2.pass(false); rep.LogsCleaned != 0 {
		t.Fatalf("cleaned below the ratio before max.compaction.lag.ms: %s", rep)
	}
	e2.clock.ms += 60_001
	if rep := e2.pass(false); rep.LogsCleaned != 1 || show(e2.read()) != "1:a=2" {
		t.Fatalf("not cleaned after max.compaction.lag.ms: %s", rep)
	}
}

// TestSelectionAndCheckpoint: the dirty ratio decides; the first dirty
// offset survives a restart in cleaner-offset-checkpoint and is reset when
// out of range.
func TestSelectionAndCheckpoint(t *testing.T) {
	e := newEnv(t, map[string]string{"min.cleanable.dirty.ratio": "0.5"})
	for i := range 10 {
		e.produce(kv(fmt.Sprintf("k%d", i), "v"))
	}
	e.roll()
	if rep := e.pass(false); rep.LogsCleaned != 1 || rep.Logs[0].DirtyRatio != 1 {
		t.Fatalf("first pass: %s", rep)
	}
	e.produce(kv("k0", "new"))
	e.roll()
	// One small dirty segment against a big clean one: below 0.5.
	if rep := e.pass(false); rep.LogsCleaned != 0 || rep.MaxDirtyRatio <= 0 || rep.MaxDirtyRatio >= 0.5 {
		t.Fatalf("second pass: %s (max ratio %v)", rep, rep.MaxDirtyRatio)
	}
	e.reopen()
	ck, err := e.dir.ReadCleanerCheckpoint()
	if err != nil || len(ck) != 1 {
		t.Fatalf("checkpoint %v %v", ck, err)
	}
	for _, off := range ck {
		if off != 10 {
			t.Fatalf("checkpointed first dirty offset %d, want 10", off)
		}
	}
	// An out-of-range checkpoint is reset to the log start.
	for tp := range ck {
		ck[tp] = 1000
	}
	if err := e.dir.WriteCleanerCheckpoint(ck); err != nil {
		t.Fatal(err)
	}
	rep := e.pass(false)
	if rep.LogsCleaned != 1 || !rep.Logs[0].CheckpointReset || rep.Logs[0].FirstDirtyOffset != 0 {
		t.Fatalf("after reset: %s %+v", rep, rep.Logs)
	}
	if got := show(e.read()); !strings.HasPrefix(got, "1:k1=v") || !strings.HasSuffix(got, "10:k0=new") {
		t.Fatal(got)
	}
}
