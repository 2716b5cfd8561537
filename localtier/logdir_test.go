package localtier

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestLogDirTopics(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("orders", 3, map[string]string{"cleanup.policy": "compact", "segment.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	// topic create makes each partition dir with an empty active segment.
	for p := 0; p < 3; p++ {
		for _, suf := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			fi, err := os.Stat(filepath.Join(dir, "orders-"+string(rune('0'+p)), FilenamePrefix(0)+suf))
			if err != nil || fi.Size() != 0 {
				t.Fatalf("partition %d %s: %v", p, suf, err)
			}
		}
	}
	bad := []struct {
		name  string
		parts int
		cfg   map[string]string
		want  string
	}{
		{"../escape", 1, nil, "illegal"},
		{"a/b", 1, nil, "illegal"},
		{"", 1, nil, ""},
		{"ok", 0, nil, "partition count"},
		{"ok", 1, map[string]string{"segment.bytes": "-5"}, "segment.bytes"},
		{"ok", 1, map[string]string{"bogus": "1"}, "bogus"},
		{"orders", 1, nil, "already exists"},
	}
	for _, b := range bad {
		_, err := d.CreateTopic(b.name, b.parts, b.cfg)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Fatalf("create %q: got %v, want error containing %q", b.name, err, b.want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape-0")); err == nil {
		t.Fatal("a topic name escaped the data dir")
	}
	l, err := d.Partition("orders", 1)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchOf(t, 4, 10, 1_700_000_000_000, codec.None))
	if _, err := d.Partition("orders", 3); !errors.As(err, new(*UnknownTopicOrPartitionError)) {
		t.Fatalf("partition 3: %v", err)
	}
	// Alter: bad values refused, nothing changes; good ones applied live.
	if err := d.AlterTopic("orders", map[string]string{"local.retention.ms": "99999999999"}, nil); err == nil {
		t.Fatal("local.retention.ms > retention.ms accepted")
	}
	if err := d.AlterTopic("orders", map[string]string{"max.message.bytes": "2000"}, []string{"segment.ms"}); err != nil {
		t.Fatal(err)
	}
	if got := l.Config().MaxMessageBytes; got != 2000 {
		t.Fatalf("alter not applied to the open log: %d", got)
	}
	desc, err := d.DescribeTopic("orders")
	if err != nil {
		t.Fatal(err)
	}
	overrides := map[string]string{}
	for _, e := range desc.Configs {
		if !e.IsDefault {
			overrides[e.Name] = e.Value
		}
	}
	if len(overrides) != 2 || overrides["cleanup.policy"] != "compact" || overrides["max.message.bytes"] != "2000" {
		t.Fatalf("describe overrides %v", overrides)
	}
	if len(desc.Partitions) != 3 || desc.Partitions[1].LogEndOffset != 4 {
		t.Fatalf("describe partitions %+v", desc.Partitions)
	}
	// A second process cannot take the data dir.
	if _, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// The checkpoints record every partition's recovery point.
	rps, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, RecoveryPointCheckpoint))
	if err != nil || len(rps) != 3 || rps[checkpoint.TopicPartition{Topic: "orders", Partition: 1}] != 4 {
		t.Fatalf("recovery points %v %v", rps, err)
	}
	// Reload: configs and data survive; an unrelated dir is skipped.
	if err := os.MkdirAll(filepath.Join(dir, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	d2, rep, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if rep.Partitions != 3 || rep.Recovery.SegmentsRecovered != 0 {
		t.Fatalf("reload report %+v", rep)
	}
	l2, _ := d2.Partition("orders", 1)
	if l2.LogEndOffset() != 4 || l2.Config().MaxMessageBytes != 2000 || !l2.Config().CleanupPolicy.Compact {
		t.Fatalf("after reload: end %d cfg %+v", l2.LogEndOffset(), l2.Config())
	}
	if got := d2.Topics(); len(got) != 1 || got[0] != "orders" {
		t.Fatalf("topics %v", got)
	}
}

// TestLogDirUncleanShutdownRecovers: without a checkpoint (kill -9), every
// segment is recovered and a torn tail is cut.
func TestLogDirUncleanShutdownRecovers(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := d.CreateTopic("t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		mustAppend(t, tp.Partitions[0], batchOf(t, 2, 50, 1_700_000_000_000, codec.None))
	}
	if err := tp.Partitions[0].Flush(); err != nil {
		t.Fatal(err)
	}
	// Simulate kill -9: no Close, no checkpoint; a torn write at the end.
	f, err := os.OpenFile(filepath.Join(dir, "t-0", FilenamePrefix(0)+LogSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(batchOf(t, 2, 50, 1_700_000_000_000, codec.None)[:30])
	_ = f.Close()
	// Release the flock as the kernel would for a killed process.
	_ = d.lock.Close()
	d2, rep, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if rep.Recovery.BytesTruncated != 30 {
		t.Fatalf("truncated %d bytes, want the 30-byte torn tail", rep.Recovery.BytesTruncated)
	}
	l, _ := d2.Partition("t", 0)
	if l.LogEndOffset() != 10 {
		t.Fatalf("end %d", l.LogEndOffset())
	}
	// Close the first handle's logs so no files leak.
	for _, l := range tp.Partitions {
		_ = l.Close()
	}
	_ = topicconfig.Defaults()
}
