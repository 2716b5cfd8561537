package localtier

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestMissingTopicConfigRefusesToStart: a topic whose partition dirs exist
// but whose config file is gone is refused, naming the file, on open and on
// reload; it is never silently reverted to the defaults.
func TestMissingTopicConfigRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("tiered-topic", 2, map[string]string{"remote.storage.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, ".tiered", "topics", "tiered-topic.json")
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	err = d.ReloadTopicConfigs(nil)
	var me *MissingTopicConfigError
	if !errors.As(err, &me) || me.Path != cfgPath {
		t.Fatalf("reload with the config file gone: %v, want a MissingTopicConfigError naming %s", err, cfgPath)
	}
	if l, _ := d.Partition("tiered-topic", 0); !l.Config().RemoteStorageEnable {
		t.Fatal("a failed reload reverted remote.storage.enable")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{ReadOnly: ro})
		if !errors.As(err, &me) || !strings.Contains(err.Error(), cfgPath) {
			t.Fatalf("open (read-only %v) with the config file gone: %v, want an error naming %s", ro, err, cfgPath)
		}
	}
	// Writing the empty overrides the error suggests makes the dir open again.
	if err := os.WriteFile(cfgPath, []byte(`{"version":1,"overrides":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, _, err = OpenLogDir(vfs.Default, dir, LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogStartBeyondLogEndWarns: a log start offset checkpoint beyond the
// log end is clamped to the log end with a warning naming the checkpoint
// file and both offsets; the segments are not deleted.
func TestLogStartBeyondLogEndWarns(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	l, _ := d.Partition("t", 0)
	mustAppend(t, l, batchOf(t, 10, 10, clock.t.UnixMilli(), codec.None))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, LogStartOffsetCheckpoint)
	if err := checkpoint.WriteOffsets(vfs.Default, cp, map[checkpoint.TopicPartition]int64{{Topic: "t", Partition: 0}: 500}); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		var logs bytes.Buffer
		d, rep, err := OpenLogDir(vfs.Default, dir, LogDirOptions{Now: clock.Now, ReadOnly: ro,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := d.Partition("t", 0)
		if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 || rep.Recovery.LogStartOffsetsClamped != 1 {
			t.Fatalf("read-only %v: log start %d, end %d, report %+v; want both 10 and one clamp", ro, l.LogStartOffset(), l.LogEndOffset(), rep.Recovery)
		}
		out := logs.String()
		for _, want := range []string{"level=WARN", "checkpoint=" + cp, "checkpoint_log_start_offset=500", "log_end_offset=10"} {
			if !strings.Contains(out, want) {
				t.Fatalf("read-only %v: warning %q lacks %q", ro, out, want)
			}
		}
		if _, err := os.Stat(SegmentPath(filepath.Join(dir, "t-0"), 0, LogSuffix)); err != nil {
			t.Fatalf("the clamp deleted the segment: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
