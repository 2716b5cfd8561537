package remotetier

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// appendNoTimestamp appends one batch of n records without timestamps
// (record.NoTimestamp, as legacy v0 messages and clients that send none).
func appendNoTimestamp(t testing.TB, l *localtier.Log, n int) {
	t.Helper()
	var e record.Encoder
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: record.NoTimestamp, Key: []byte(upKey(i)), Value: bytes.Repeat([]byte{'v'}, 10)}
	}
	data, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(data); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteRetentionSegmentWithoutTimestamps: Kafka judges a segment whose
// records carry no timestamp by its largestTimestamp, the file's
// last-modified time, locally and in the remote metadata it copies
// (RemoteLogSegmentMetadata.maxTimestampMs = segment.largestTimestamp()),
// so retention.ms deletes it remotely too. The oldest remote segment here
// has no timestamps: it must expire by retention.ms like the local copy
// does, and must not keep the later, timestamped segments from expiring.
func TestRemoteRetentionSegmentWithoutTimestamps(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "nots", 1, "retention.ms", "3600000")
	l := upPartition(t, d, "nots", 0)
	appendNoTimestamp(t, l, 3)
	appendNoTimestamp(t, l, 3)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	upSegments(t, l, 2, 2, 3, 10) // two timestamped segments (upNow) and an active one
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewLocalSource(d, nil), Options{Now: time.Now})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if m := upLoad(t, mem, "nots", 0); m.NextOffset() != segs[3].BaseOffset {
		t.Fatalf("uploaded up to %d, want %d", m.NextOffset(), segs[3].BaseOffset)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	// Locally, Kafka's rule finds every rolled segment expired.
	local, err := l.RetentionSegments()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range local[:3] {
		if later().UnixMilli()-s.MaxTimestamp <= 3600000 {
			t.Fatalf("test setup: local segment %d not expired (max timestamp %d)", s.BaseOffset, s.MaxTimestamp)
		}
	}
	rep, err := RemoteRetention(ctx, mem, d, RetentionOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	m := upLoad(t, mem, "nots", 0)
	if rep.DeletedSegments != 3 || m.LogStartOffset != segs[3].BaseOffset {
		t.Fatalf("remote retention.ms deleted %d segments, log start %d; want 3 (Kafka judges the segment without timestamps by its file time), log start %d",
			rep.DeletedSegments, m.LogStartOffset, segs[3].BaseOffset)
	}
	for _, s := range rep.Segments {
		if s.Reason != retention.ReasonRetentionMs {
			t.Errorf("segment %d deleted for %s, want %s", s.BaseOffset, s.Reason, retention.ReasonRetentionMs)
		}
	}
}

// TestRemoteRetentionCrashBeforeLocalDeletes: remote retention commits the
// manifest that drops every remote segment, deletes their objects, and the
// process dies before deleting the local copies below the new log start.
// After the restart neither retention pass may leave them: the local log
// would keep serving offsets below the log start (CombinedPartition takes
// the local start) for as long as no new segment is uploaded, and the local
// pass holds them back because the remote tier now "holds nothing".
func TestRemoteRetentionCrashBeforeLocalDeletes(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "crash", 1, "retention.ms", "3600000")
	l := upPartition(t, d, "crash", 0)
	upSegments(t, l, 3, 2, 3, 10)
	mem := objstore.NewMemory()
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	later := func() time.Time { return upNow.Add(2 * time.Hour) }

	// The first pass, up to its manifest commit and object deletes.
	store, err := newManifestStore(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	m, etag, err := store.load(ctx, "crash", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	local, err := l.RetentionSegments()
	if err != nil {
		t.Fatal(err)
	}
	step, err := retentionStep(ctx, store, m, etag, retention.FromLog(local), l.Config(), 0, RetentionOptions{Now: later}, slog.New(slog.DiscardHandler))
	if err != nil || step.commit == nil {
		t.Fatalf("first pass: %+v, %v", step.pr, err)
	}
	start := segs[3].BaseOffset
	if m := upLoad(t, mem, "crash", 0); m.LogStartOffset != start || m.SegmentCount() != 0 {
		t.Fatalf("test setup: remote log start %d with %d segments, want %d and none", m.LogStartOffset, m.SegmentCount(), start)
	}

	// After the restart: both passes, as serve runs them.
	if _, err := RemoteRetention(ctx, mem, d, RetentionOptions{Now: later}); err != nil {
		t.Fatal(err)
	}
	lookup, err := RemoteLookup(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := retention.RunOnce(ctx, d, retention.PassOptions{Now: later, Remote: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != start || len(l.Segments()) != 1 {
		held := ""
		if len(rep.Partitions) > 0 {
			held = rep.Partitions[0].Held
		}
		t.Fatalf("local log start %d with %d segments after the restart, want %d (the remote log start) and the active segment only; local pass: %q",
			l.LogStartOffset(), len(l.Segments()), start, held)
	}
}
