package localtier

import (
	"errors"
	"fmt"
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

// TestCreateTopicAllOrNothing fails each filesystem operation of a topic
// create in turn (pebble's errorfs sweep). After every failure the topic
// does not exist — not in the dir, not on disk: no partition dir, no config
// file, no intent — the same create then succeeds, and a power cut at the
// failure (CrashClone) leaves a data dir that opens with either no topic or
// the whole topic. Before the create was all or nothing, a failure at
// partition k left k partition dirs behind.
func TestCreateTopicAllOrNothing(t *testing.T) {
	const parts = 4
	cfg := map[string]string{"segment.ms": "60000"}
	checkDisk := func(t *testing.T, what string, mem *vfs.MemFS, wantTopic bool) {
		t.Helper()
		d, rep, err := OpenLogDir(mem, "/data", LogDirOptions{Now: dfClock.Now})
		if err != nil {
			t.Fatalf("%s: the data dir does not open: %v", what, err)
		}
		defer d.Close()
		tp, ok := d.Topic("t")
		switch {
		case ok && len(tp.Partitions) != parts:
			t.Fatalf("%s: topic loaded with %d of %d partitions", what, len(tp.Partitions), parts)
		case ok && tp.Overrides["segment.ms"] != "60000":
			t.Fatalf("%s: topic loaded without its config: %v", what, tp.Overrides)
		case !ok && wantTopic:
			t.Fatalf("%s: the acknowledged topic is gone (rolled back: %v)", what, rep.CreatesRolledBack)
		}
		ents, err := mem.ReadDir("/data")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "t-") && !ok {
				t.Fatalf("%s: %s left behind without a topic", what, e.Name())
			}
		}
		if _, err := mem.Stat("/data/.tiered/creating/t.json"); err == nil {
			t.Fatalf("%s: the create intent survived a load", what)
		}
	}
	failures := 0
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		var n int64
		var crash *vfs.MemFS
		var firedOp vfs.Op
		armed := false
		written := map[string]bool{}
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if !armed {
				return nil
			}
			switch op.Kind {
			case vfs.OpFileWrite, vfs.OpFileWriteAt, vfs.OpFileTruncate:
				written[op.Path] = true
			case vfs.OpFileClose:
				if !written[op.Path] {
					return nil // as in TestDiskInjectedErrorsLogDir: nothing to lose
				}
			}
			n++
			if n-1 == i {
				crash, firedOp = mem.CrashClone(), op
				return fmt.Errorf("%w at op %d (%s)", vfs.ErrInjected, i, op)
			}
			return nil
		}))
		d, _, err := OpenLogDir(efs, "/data", LogDirOptions{Now: dfClock.Now, MaxOpenFiles: 3})
		if err != nil {
			t.Fatal(err)
		}
		armed = true
		_, err = d.CreateTopic("t", parts, cfg)
		armed = false
		if err == nil {
			if crash != nil {
				t.Fatalf("op %d (%s) was injected but the create succeeded", i, firedOp)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			checkDisk(t, fmt.Sprintf("op %d, after success", i), mem, true)
			t.Logf("create succeeded once op %d was past its %d operations (%d failures rolled back)", i, n, failures)
			break
		}
		failures++
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		if _, ok := d.Topic("t"); ok {
			t.Fatalf("op %d: create failed (%v) but the topic exists", i, err)
		}
		ents, _ := mem.ReadDir("/data")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "t-") {
				t.Fatalf("op %d: create failed (%v) and left %s behind", i, err, e.Name())
			}
		}
		for _, f := range []string{"/data/.tiered/topics/t.json", "/data/.tiered/creating/t.json"} {
			if _, err := mem.Stat(f); err == nil {
				t.Fatalf("op %d: create failed and left %s behind", i, f)
			}
		}
		if _, err := d.CreateTopic("t", parts, cfg); err != nil {
			t.Fatalf("op %d: the create, tried again, fails: %v", i, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		checkDisk(t, fmt.Sprintf("op %d, power cut at the failure", i), crash, false)
	}
}
