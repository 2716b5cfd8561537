package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// appendAt appends one batch of 5 records (100-byte values) whose timestamps
// are ts..ts+4.
func appendAt(t *testing.T, l *localtier.Log, ts int64) {
	t.Helper()
	recs := make([]record.Record, 5)
	for i := range recs {
		recs[i] = record.Record{Offset: int64(i), Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{'v'}, 100)}
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(b); err != nil {
		t.Fatal(err)
	}
}

func openDir(t *testing.T, dir string) *localtier.LogDir {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// snapshot maps every file under dir to its size.
func snapshot(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		out[path] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fixedNow() time.Time { return now }

// readFrom reads every record from the log start to the end, checking
// offsets are consecutive.
func readFrom(t *testing.T, l *localtier.Log) []record.Record {
	t.Helper()
	var out []record.Record
	var dec record.Decoder
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		it := record.NewIter(res.Data)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			recs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset < off {
					continue
				}
				if r.Offset != off {
					t.Fatalf("record offset %d, want %d", r.Offset, off)
				}
				out = append(out, r)
				off++
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	return out
}

// TestRunOnceDeletesThroughLogDir drives a real data dir: segments rolled by
// internal.segment.bytes with timestamps spread over hours, a dry run that
// changes nothing, then a pass that deletes exactly the expired prefix,
// leaves no .deleted files, reads back from the new log start and
// checkpoints it.
func TestRunOnceDeletesThroughLogDir(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	if _, err := d.CreateTopic("events", 2, map[string]string{"internal.segment.bytes": "2000", "retention.ms": fmt.Sprint(hour)}); err != nil {
		t.Fatal(err)
	}
	l, err := d.Partition("events", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 24; i++ {
		appendAt(t, l, ago(int64(24-i)*10*60*1000)) // 4 h ago up to 10 min ago
	}
	before := l.Segments()
	var want []localtier.SegmentInfo
	for _, s := range before {
		if s.Active || now.UnixMilli()-s.MaxTimestamp <= hour {
			break
		}
		want = append(want, s)
	}
	if len(want) < 2 || len(want) >= len(before)-1 {
		t.Fatalf("test setup: %d of %d segments expired", len(want), len(before))
	}
	end := l.LogEndOffset()
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	files := snapshot(t, dir)
	ckpt, err := os.ReadFile(filepath.Join(dir, localtier.LogStartOffsetCheckpoint))
	if err != nil {
		t.Fatal(err)
	}

	dry, err := RunOnce(context.Background(), d, PassOptions{DryRun: true, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	checkReported(t, dry, want)
	if !dry.DryRun || len(dry.Partitions) != 2 || dry.Partitions[0].NewLogStartOffset != want[len(want)-1].NextOffset {
		t.Fatalf("dry run report: %+v", dry)
	}
	if got := snapshot(t, dir); fmt.Sprint(got) != fmt.Sprint(files) {
		t.Fatalf("dry run changed the data dir:\nbefore %v\nafter  %v", files, got)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, localtier.LogStartOffsetCheckpoint)); !bytes.Equal(again, ckpt) {
		t.Fatalf("dry run rewrote the checkpoint")
	}
	if l.LogStartOffset() != 0 || len(l.Segments()) != len(before) {
		t.Fatal("dry run changed the log")
	}

	rep, err := RunOnce(context.Background(), d, PassOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	checkReported(t, rep, want)
	start := want[len(want)-1].NextOffset
	if l.LogStartOffset() != start || rep.Partitions[0].NewLogStartOffset != start || rep.Partitions[0].LogStartOffset != 0 {
		t.Fatalf("log start %d, report %+v; want %d", l.LogStartOffset(), rep.Partitions[0], start)
	}
	for path := range snapshot(t, dir) {
		if strings.HasSuffix(path, localtier.DeletedSuffix) {
			t.Errorf("leftover %s", path)
		}
		for _, s := range want {
			if strings.HasPrefix(filepath.Base(path), localtier.FilenamePrefix(s.BaseOffset)) && filepath.Base(filepath.Dir(path)) == "events-0" {
				t.Errorf("file of deleted segment %d remains: %s", s.BaseOffset, path)
			}
		}
	}
	recs := readFrom(t, l)
	if int64(len(recs)) != end-start || recs[0].Offset != start {
		t.Fatalf("read back %d records from %d, want %d from %d", len(recs), recs[0].Offset, end-start, start)
	}
	offs, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, localtier.LogStartOffsetCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if got := offs[checkpoint.TopicPartition{Topic: "events", Partition: 0}]; got != start {
		t.Fatalf("checkpointed log start %d, want %d", got, start)
	}
	// A second pass finds nothing more.
	if rep, err := RunOnce(context.Background(), d, PassOptions{Now: fixedNow}); err != nil || rep.DeletedSegments != 0 {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDir(t, dir)
	defer d.Close()
	l, _ = d.Partition("events", 0)
	if l.LogStartOffset() != start || int64(len(readFrom(t, l))) != end-start {
		t.Fatalf("reopened: log start %d", l.LogStartOffset())
	}
}

func checkReported(t *testing.T, rep PassReport, want []localtier.SegmentInfo) {
	t.Helper()
	if len(rep.Segments) != len(want) || rep.DeletedSegments != len(want) {
		t.Fatalf("report lists %d segments (%d), want %d: %+v", len(rep.Segments), rep.DeletedSegments, len(want), rep.Segments)
	}
	var total int64
	for i, s := range rep.Segments {
		w := want[i]
		if s.Topic != "events" || s.Partition != 0 || s.BaseOffset != w.BaseOffset || s.LastOffset != w.NextOffset-1 ||
			s.SizeBytes != w.Size || s.MaxTimestamp != w.MaxTimestamp || s.Reason != ReasonRetentionMs || s.SizeBeatTime {
			t.Errorf("segment %d reported %+v, want %+v by retention.ms", i, s, w)
		}
		total += w.Size
	}
	if rep.DeletedBytes != total || rep.Partitions[0].Bytes != total || rep.Partitions[0].Segments != len(want) {
		t.Errorf("bytes: report %d, partition %+v, want %d", rep.DeletedBytes, rep.Partitions[0], total)
	}
}

// TestRunOnceSizeBeatsTimeWarns: a byte cap deleting young data is reported,
// flagged, and logged as a warning; JSON and text reports carry it.
func TestRunOnceSizeBeatsTimeWarns(t *testing.T) {
	d := openDir(t, t.TempDir())
	defer d.Close()
	if _, err := d.CreateTopic("capped", 1, map[string]string{"internal.segment.bytes": "2000", "retention.bytes": "3000"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("other", 1, map[string]string{"internal.segment.bytes": "2000", "retention.ms": "1"}); err != nil {
		t.Fatal(err)
	}
	l, _ := d.Partition("capped", 0)
	o, _ := d.Partition("other", 0)
	for i := 0; i < 20; i++ {
		appendAt(t, l, ago(hour))
		appendAt(t, o, ago(hour))
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	rep, err := RunOnce(context.Background(), d, PassOptions{Topic: "capped", Now: fixedNow, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0].Topic != "capped" {
		t.Fatalf("topic filter: %+v", rep.Partitions)
	}
	if len(o.Segments()) < 3 || o.LogStartOffset() != 0 {
		t.Fatal("the other topic was touched")
	}
	if rep.DeletedSegments == 0 {
		t.Fatal("nothing deleted")
	}
	for _, s := range rep.Segments {
		if s.Reason != ReasonRetentionBytes || !s.SizeBeatTime {
			t.Errorf("segment %+v: want retention.bytes, size beat time", s)
		}
	}
	// Kafka's rule: the log stays at or over the cap, and one more segment
	// would take it under.
	if rest := l.Segments(); l.Size() < 3000 || l.Size()-rest[0].Size >= 3000 {
		t.Errorf("log size %d (first segment %d bytes) after trimming to 3000", l.Size(), rest[0].Size)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "retention.bytes deleted data younger than retention.ms") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"dry_run":false`, `"topic":"capped"`, `"reason":"retention.bytes"`, `"size_beat_time":true`, `"base_offset":0`, `"max_timestamp":`, `"size_bytes":`, `"last_offset":`} {
		if !bytes.Contains(js, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, js)
		}
	}
	text := rep.String()
	for _, want := range []string{"deleted " + fmt.Sprint(rep.DeletedSegments) + " segment(s)", "capped", "retention.bytes (before its time limit)", "log start offset 0 -> "} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	if _, err := RunOnce(context.Background(), d, PassOptions{Topic: "nope"}); !errors.As(err, new(*localtier.UnknownTopicOrPartitionError)) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TestRunOnceRemoteGate: a remote-enabled topic keeps its local segments
// without a remote tier, and with one deletes only what the tier holds.
func TestRunOnceRemoteGate(t *testing.T) {
	d := openDir(t, t.TempDir())
	defer d.Close()
	if _, err := d.CreateTopic("tiered", 1, map[string]string{"internal.segment.bytes": "2000", "remote.storage.enable": "true",
		"local.retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	l, _ := d.Partition("tiered", 0)
	for i := 0; i < 20; i++ {
		appendAt(t, l, ago(hour))
	}
	segs := l.Segments()
	rep, err := RunOnce(context.Background(), d, PassOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedSegments != 0 || len(l.Segments()) != len(segs) || !strings.Contains(rep.Partitions[0].Held, "no remote tier") {
		t.Fatalf("without a remote tier: %+v", rep)
	}
	if !strings.Contains(rep.String(), "kept: remote.storage.enable=true") {
		t.Errorf("text report does not say why:\n%s", rep)
	}
	asked := 0
	lookup := func(_ context.Context, pl localtier.PartitionLog) (RemoteState, error) {
		topic, p := pl.Topic, pl.Partition
		asked++
		if topic != "tiered" || p != 0 {
			t.Errorf("asked about %s-%d", topic, p)
		}
		return RemoteState{Consulted: true, HighestOffset: segs[1].NextOffset - 1}, nil
	}
	rep, err = RunOnce(context.Background(), d, PassOptions{Now: fixedNow, Remote: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || rep.DeletedSegments != 2 || rep.Segments[1].Reason != ReasonLocalRetentionMs || l.LogStartOffset() != segs[2].BaseOffset {
		t.Fatalf("with the remote tier holding two segments: %+v", rep)
	}
	if !strings.Contains(rep.Partitions[0].Held, "not yet in the remote tier") {
		t.Errorf("held: %q", rep.Partitions[0].Held)
	}
	failing := func(context.Context, localtier.PartitionLog) (RemoteState, error) {
		return RemoteState{}, errors.New("bucket down")
	}
	rep, err = RunOnce(context.Background(), d, PassOptions{Now: fixedNow, Remote: failing})
	if err == nil || !strings.Contains(err.Error(), "bucket down") || rep.Partitions[0].Error == "" {
		t.Fatalf("remote failure: %v, %+v", err, rep)
	}
}

func TestRunOnceCancelled(t *testing.T) {
	d := openDir(t, t.TempDir())
	defer d.Close()
	if _, err := d.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunOnce(ctx, d, PassOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
