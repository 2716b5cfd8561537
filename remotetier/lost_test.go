package remotetier

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// upBrokerHWs writes a replication-offset-checkpoint for d (every offset
// committed), so tiered's own log dir reads as a broker's.
func upBrokerHWs(t testing.TB, d *localtier.LogDir) {
	t.Helper()
	hws := map[checkpoint.TopicPartition]int64{}
	for _, topic := range d.Topics() {
		tp, _ := d.Topic(topic)
		for i, l := range tp.Partitions {
			hws[checkpoint.TopicPartition{Topic: topic, Partition: int32(i)}] = l.LogEndOffset()
		}
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(d.Dir(), checkpoint.ReplicationOffsetFile), hws); err != nil {
		t.Fatal(err)
	}
}

// upBrokerLog makes a broker-layout log dir with tiered's engine: topic
// "orders" (1 partition) with segs rolled segments of 4 batches of 10
// records and an active one, its high watermarks published. It returns the
// dir, the dir's engine, the partition's log and a broker view of the dir.
func upBrokerLog(t testing.TB, segs int) (string, *localtier.LogDir, *localtier.Log, *localtier.BrokerView) {
	t.Helper()
	dir := t.TempDir()
	d := upOpenDir(t, dir)
	upTopic(t, d, "orders", 1)
	l := upPartition(t, d, "orders", 0)
	upSegments(t, l, segs, 4, 10, 100)
	upBrokerHWs(t, d)
	view, err := localtier.OpenBrokerView(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d, l, view
}

// TestLostSegmentsRecorded: the broker's retention deletes rolled segments
// while the upload is stalled (every data PUT fails). The next pass records
// the hole as a gap in the manifest, counts the segments it listed before
// in tiered_uploader_segments_lost_total, logs at ERROR, and a read inside
// the hole is out of range, never the batches after it.
func TestLostSegmentsRecorded(t *testing.T) {
	ctx := context.Background()
	_, d, l, view := upBrokerLog(t, 2)
	mem := objstore.NewMemory()
	stalled := false
	bkt := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
		if stalled && c.Op == objstore.OpPut {
			return &objstore.Fault{Err: errors.New("injected: bucket unreachable")}
		}
		return nil
	}))
	var logs bytes.Buffer
	u := upUploader(t, bkt, NewBrokerSource(view, nil), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Retry: Retry{Attempts: 1, Base: 1, Max: 1}})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	committed := upLoad(t, mem, "orders", 0).NextOffset()
	if lost := testutil.ToFloat64(u.metrics.lostSegments); lost != 0 {
		t.Fatalf("segments_lost_total %v before any loss", lost)
	}

	// Three more segments roll while the bucket refuses every write.
	stalled = true
	for range 3 {
		upAppend(t, l, 4, 10, upKey, 100)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	upAppend(t, l, 1, 10, upKey, 100)
	upBrokerHWs(t, d)
	if rep, err := u.RunOnce(ctx); err == nil || rep.UploadedSegments != 0 || rep.LagSegments < 3 {
		t.Fatalf("stalled pass: %+v, %v", rep, err)
	}
	// The broker's retention deletes the two oldest of them (and the ones
	// uploaded before), then the bucket comes back.
	segs := l.Segments()
	lostFrom, lostTo := segs[2].BaseOffset, segs[4].BaseOffset // [committed end, base of the third new one)
	if lostFrom != committed {
		t.Fatalf("test setup: first new segment at %d, committed end %d", lostFrom, committed)
	}
	if _, err := l.DeleteSegments(lostTo); err != nil {
		t.Fatal(err)
	}
	upBrokerHWs(t, d)
	stalled = false
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := manifest.Gap{BaseOffset: lostFrom, LastOffset: lostTo - 1, DetectedMs: upNow.UnixMilli()}
	if rep.SegmentsLost != 2 || len(rep.Partitions) != 1 || len(rep.Partitions[0].Lost) != 1 || rep.Partitions[0].Lost[0] != want {
		t.Fatalf("report %+v, want gap %+v of 2 segments", rep, want)
	}
	m := upLoad(t, mem, "orders", 0)
	if len(m.Gaps) != 1 || m.Gaps[0] != want {
		t.Fatalf("manifest gaps %+v, want [%+v]", m.Gaps, want)
	}
	if got := testutil.ToFloat64(u.metrics.lostSegments); got != 2 {
		t.Fatalf("tiered_uploader_segments_lost_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(u.metrics.lostOffsets); got != float64(lostTo-lostFrom) {
		t.Fatalf("tiered_uploader_lost_offsets_total = %v, want %d", got, lostTo-lostFrom)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "data loss") {
		t.Fatalf("no ERROR line for the loss:\n%s", logs.String())
	}
	// Another pass records nothing more.
	if rep, err := u.RunOnce(ctx); err != nil || rep.SegmentsLost != 0 || testutil.ToFloat64(u.metrics.lostSegments) != 2 {
		t.Fatalf("pass after the loss: %+v, %v", rep, err)
	}
	// Reads: before the hole served, inside it out of range (a
	// *manifest.LostOffsetsError), after it served.
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "orders", 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, lostFrom - 1, lostTo} {
		res, err := rl.Read(ctx, off, 1<<20)
		if err != nil || len(res.Data) == 0 {
			t.Fatalf("read at %d: %d bytes, %v", off, len(res.Data), err)
		}
	}
	for _, off := range []int64{lostFrom, lostTo - 1} {
		_, err := rl.Read(ctx, off, 1<<20)
		var le *manifest.LostOffsetsError
		if !errors.As(err, &le) || !errors.Is(err, manifest.ErrOffsetOutOfRange) {
			t.Fatalf("read at %d inside the hole: %v, want a lost-offsets out-of-range error", off, err)
		}
	}
}

// TestLostSegmentInsideAPass: a segment missing between two listed ones
// (deleted before the first pass ever saw it) is a gap too, recorded in the
// same commit as the segments around it.
func TestLostSegmentInsideAPass(t *testing.T) {
	ctx := context.Background()
	dir, _, l, view := upBrokerLog(t, 4)
	segs := l.Segments()
	gone := segs[1]
	for _, ext := range []string{localtier.LogSuffix, ".index", ".timeindex"} {
		if err := os.Remove(localtier.SegmentPath(filepath.Join(dir, "orders-0"), gone.BaseOffset, ext)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := manifest.Gap{BaseOffset: gone.BaseOffset, LastOffset: gone.NextOffset - 1, DetectedMs: upNow.UnixMilli()}
	m := upLoad(t, mem, "orders", 0)
	if len(m.Gaps) != 1 || m.Gaps[0] != want || rep.SegmentsLost != 1 || rep.UploadedSegments != 3 {
		t.Fatalf("gaps %+v, report %+v; want [%+v] and 3 segments uploaded", m.Gaps, rep, want)
	}
}

// TestPartitionLagGauges: per partition, the bytes and age not yet tiered
// and the headroom before the source's retention deletes the oldest of
// them, as Kafka's broker would decide.
func TestPartitionLagGauges(t *testing.T) {
	ctx := context.Background()
	_, _, l, view := upBrokerLog(t, 3)
	src := NewBrokerSource(view, nil)
	const retMs, retBytes = 3_600_000, 1 << 20
	src.Retention = func(string) (int64, int64) { return retMs, retBytes }
	mem := objstore.NewMemory()
	later := upNow.Add(10 * time.Minute)
	u := upUploader(t, objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool { return c.Op == objstore.OpPut },
		errors.New("injected"))), src, Options{Retry: Retry{Attempts: 1, Base: 1, Max: 1}, Now: func() time.Time { return later }})
	rep, _ := u.RunOnce(ctx)
	pr := rep.Partitions[0]
	segs := l.Segments()
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	oldest := segs[0]
	now := later
	lbl := []string{"orders", "0"}
	if got := testutil.ToFloat64(u.metrics.partLagBytes.WithLabelValues(lbl...)); got != float64(pr.LagBytes) || pr.LagBytes == 0 {
		t.Fatalf("partition_lag_bytes %v, report %d", got, pr.LagBytes)
	}
	wantAge := float64(now.UnixMilli()-oldest.MaxTimestamp) / 1000
	if got := testutil.ToFloat64(u.metrics.partLagSeconds.WithLabelValues(lbl...)); math.Abs(got-wantAge) > 0.001 {
		t.Fatalf("partition_lag_seconds %v, want %v", got, wantAge)
	}
	wantHS := float64(oldest.MaxTimestamp+retMs-now.UnixMilli()) / 1000
	if got := testutil.ToFloat64(u.metrics.headroomSeconds.WithLabelValues(lbl...)); math.Abs(got-wantHS) > 0.001 {
		t.Fatalf("retention_headroom_seconds %v, want %v", got, wantHS)
	}
	wantHB := float64(retBytes + oldest.Size - total)
	if got := testutil.ToFloat64(u.metrics.headroomBytes.WithLabelValues(lbl...)); got != wantHB {
		t.Fatalf("retention_headroom_bytes %v, want %v", got, wantHB)
	}
	// Once everything is uploaded: no lag, the whole window as headroom;
	// without limits +Inf.
	u2 := upUploader(t, mem, src, Options{Now: func() time.Time { return later }})
	if _, err := u2.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(u2.metrics.partLagBytes.WithLabelValues(lbl...)); got != 0 {
		t.Fatalf("lag after upload %v", got)
	}
	if got := testutil.ToFloat64(u2.metrics.headroomSeconds.WithLabelValues(lbl...)); got != retMs/1000 {
		t.Fatalf("headroom with nothing waiting %v, want %v", got, retMs/1000)
	}
	src.Retention = func(string) (int64, int64) { return -1, -1 }
	if _, err := u2.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(u2.metrics.headroomBytes.WithLabelValues(lbl...)); !math.IsInf(got, 1) {
		t.Fatalf("headroom without a size limit %v, want +Inf", got)
	}
}
