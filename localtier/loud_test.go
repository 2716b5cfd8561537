package localtier

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
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

// TestAppendTimestampBounds: Kafka 4's message.timestamp.before.max.ms /
// after.max.ms on CreateTime topics (defaults: any past, at most 1 h
// ahead), INVALID_TIMESTAMP refusing the whole append; LogAppendTime topics
// and the "no timestamp" -1 are not checked; a producer may not claim
// LogAppendTime.
func TestAppendTimestampBounds(t *testing.T) {
	const now = int64(1_700_000_000_000)
	clock := &fakeClock{t: time.UnixMilli(now)}
	one := func(ts int64, logAppend bool) []byte {
		var e record.Encoder
		spec := record.NewBatchSpec(0, codec.None)
		b, err := e.AppendBatch(nil, spec, []record.Record{{Offset: 0, Timestamp: now, Value: []byte("ok")}, {Offset: 1, Timestamp: ts, Value: []byte("x")}})
		if err != nil {
			t.Fatal(err)
		}
		if logAppend {
			record.Batch(b).SetMaxTimestampLogAppend(ts)
		}
		return b
	}
	tests := []struct {
		name      string
		cfg       map[string]string
		ts        int64
		logAppend bool
		wantErr   bool
	}{
		{"max_int64_refused_by_default", nil, math.MaxInt64, false, true},
		{"an_hour_ahead_accepted", nil, now + 3_600_000, false, false},
		{"an_hour_and_1ms_ahead_refused", nil, now + 3_600_001, false, true},
		{"epoch_accepted_by_default", nil, 0, false, false},
		{"no_timestamp_not_checked", map[string]string{"message.timestamp.after.max.ms": "0", "message.timestamp.before.max.ms": "0"}, -1, false, false},
		{"before_max_refuses_old", map[string]string{"message.timestamp.before.max.ms": "86400000"}, now - 86_400_001, false, true},
		{"before_max_edge_accepted", map[string]string{"message.timestamp.before.max.ms": "86400000"}, now - 86_400_000, false, false},
		{"after_max_raised", map[string]string{"message.timestamp.after.max.ms": "9223372036854775807"}, math.MaxInt64, false, false},
		{"log_append_time_topic_not_checked", map[string]string{"message.timestamp.type": "LogAppendTime"}, math.MaxInt64, false, false},
		{"producer_claims_log_append_time", map[string]string{"message.timestamp.type": "LogAppendTime"}, now, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, tc.cfg), clock, 0)
			defer l.Close()
			_, err := l.Append(one(tc.ts, tc.logAppend))
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("append refused: %v", err)
				}
				return
			}
			var ie *InvalidRecordError
			if !errors.As(err, &ie) || ie.Code != "INVALID_TIMESTAMP" || !errors.Is(err, kafkaerr.ErrInvalidTimestamp) {
				t.Fatalf("got %v, want INVALID_TIMESTAMP", err)
			}
			if !tc.logAppend && !strings.Contains(err.Error(), fmt.Sprintf("Timestamp %d of message with offset 1 is out of range", tc.ts)) {
				t.Fatalf("message %q does not name the timestamp and offset as Kafka's does", err)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("refused append wrote data: end %d, size %d", l.LogEndOffset(), l.Size())
			}
		})
	}
}
