package kraft_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const fixtures = "../../testdata/fixtures/kafka-tester"

// TestFixtures: the real KRaft log dirs of a Kafka 3.7 broker read back as that broker had
// them: topic foo with the ID in foo-0/partition.metadata, one partition on broker 1 (the
// only replica, node.id 1 in meta.properties), broker 1 registered, no configs, nothing
// deleted.
func TestFixtures(t *testing.T) {
	for _, c := range []struct {
		commit      string
		leaderEpoch int32
		brokerEpoch int64
	}{
		{"e856b9acfbc9c4aa601502057e350051d1304c9f", 3, 83},
		{"510714e73872b0137b684b90ffd0586c3adcc23b", 1, 6},
	} {
		t.Run(c.commit[:7], func(t *testing.T) {
			logDir := filepath.Join(fixtures, c.commit, "kraft-combined-logs")
			im, err := kraft.ReadLogDir(vfs.Default, logDir)
			if err != nil {
				t.Fatal(err)
			}
			id, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(logDir, "foo-0"))
			if err != nil || id.IsZero() {
				t.Fatalf("partition.metadata: %v %v", id, err)
			}
			if got := im.Names(); !reflect.DeepEqual(got, []string{"foo"}) {
				t.Fatalf("topics %v", got)
			}
			foo := im.Topics["foo"]
			if foo.ID != id {
				t.Errorf("foo's ID %s, partition.metadata says %s", foo.ID, id)
			}
			want := kraft.Partition{Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: -1, LeaderEpoch: c.leaderEpoch, PartitionEpoch: c.leaderEpoch}
			if len(foo.Partitions) != 1 || !reflect.DeepEqual(*foo.Partitions[0], want) {
				t.Errorf("foo's partitions %+v, want {0: %+v}", foo.Partitions, want)
			}
			if len(foo.Configs) != 0 || len(im.BrokerConfigs) != 0 || len(im.Deleted) != 0 {
				t.Errorf("configs %v, broker configs %v, deleted %v; the fixture has none", foo.Configs, im.BrokerConfigs, im.Deleted)
			}
			if b, ok := im.Brokers[1]; !ok || len(im.Brokers) != 1 || b.Epoch != c.brokerEpoch {
				t.Errorf("brokers %+v, want broker 1 at epoch %d", im.Brokers, c.brokerEpoch)
			}
			if im.SnapshotEnd != -1 || im.NextOffset == 0 {
				t.Errorf("snapshot end %d, next offset %d", im.SnapshotEnd, im.NextOffset)
			}
		})
	}
	if _, err := kraft.ReadLogDir(vfs.Default, t.TempDir()); !errors.Is(err, kraft.ErrNoMetadataLog) {
		t.Errorf("a log dir without a metadata log: %v", err)
	}
}

func tid(b byte) kraft.TopicID { return kraft.TopicID{0: b, 15: b} }

// generated writes a metadata log with brokers, topics, topic and broker configs, leader
// changes, control batches, a deletion and a re-creation, a snapshot in the middle (the
// segments before it deleted, as Kafka does), and more changes after it.
func generated(t *testing.T, c codec.Codec) (string, *kraftlog.Log) {
	t.Helper()
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	l.Codec = c
	v := kraftlog.Value
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.AppendControl())
	must(l.Append(kraftlog.RegisterBroker(1, 10), kraftlog.RegisterBroker(2, 11), kraftlog.RegisterBroker(3, 12)))
	must(l.Append(kraftlog.BrokerConfig("", "log.retention.ms", v("3600000")), kraftlog.BrokerConfig("2", "log.segment.bytes", v("1048576"))))
	must(l.Append(kraftlog.TopicConfig("orders", "cleanup.policy", v("compact")), kraftlog.Topic("orders", tid(1)),
		kraftlog.Partition(tid(1), 0, 1, 0, 1, 2, 3), kraftlog.Partition(tid(1), 1, 2, 0, 2, 3, 1)))
	must(l.Append(kraftlog.Topic("logs", tid(2)), kraftlog.Partition(tid(2), 0, 3, 0, 3)))
	must(l.Append(kraftlog.TopicConfig("logs", "retention.ms", v("60000")), kraftlog.TopicConfig("logs", "segment.bytes", v("2097152"))))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	must(l.Append(kraftlog.LeaderChange(tid(1), 0, 2)))
	must(l.Append(kraftlog.Topic("scratch", tid(3)), kraftlog.Partition(tid(3), 0, 1, 0, 1)))
	must(l.Append(kraftlog.RemoveTopic(tid(3))))
	// Snapshot of everything so far, then drop the segments it covers.
	before, err := kraft.ReadDir(vfs.Default, l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot(kraftlog.ImageRecords(before)); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteSegmentsBefore(l.Next()); err != nil {
		t.Fatal(err)
	}
	must(l.AppendControl())
	must(l.Append(kraftlog.TopicConfig("orders", "cleanup.policy", nil), kraftlog.TopicConfig("orders", "retention.bytes", v("1000"))))
	must(l.Append(kraftlog.BrokerConfig("", "log.retention.ms", v("7200000"))))
	must(l.Append(kraftlog.LeaderChange(tid(1), 1, 3), kraftlog.LeaderChange(tid(1), 1, 1)))
	must(l.Append(kraftlog.RemoveTopic(tid(2))))
	must(l.Append(kraftlog.Topic("logs", tid(4)), kraftlog.Partition(tid(4), 0, 2, 0, 2), kraftlog.Partition(tid(4), 1, 1, 0, 1)))
	must(l.Append(kraftlog.TopicConfig("logs", "retention.ms", v("120000"))))
	return logDir, l
}

// TestGenerated: a generated log with a snapshot, config changes and deletions reads back
// exactly.
func TestGenerated(t *testing.T) {
	for _, c := range []codec.Codec{codec.None, codec.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			logDir, l := generated(t, c)
			im, err := kraft.ReadLogDir(vfs.Default, logDir)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]kraft.Topic{
				"orders": {Name: "orders", ID: tid(1), Configs: map[string]string{"retention.bytes": "1000"}, Partitions: map[int32]*kraft.Partition{
					0: {Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1},
					1: {Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2},
				}},
				"logs": {Name: "logs", ID: tid(4), Configs: map[string]string{"retention.ms": "120000"}, Partitions: map[int32]*kraft.Partition{
					0: {Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
					1: {Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
				}},
			}
			if len(im.Topics) != len(want) {
				t.Fatalf("topics %v", im.Names())
			}
			for name, w := range want {
				got := im.Topics[name]
				if got == nil || !reflect.DeepEqual(*got, w) {
					t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
					if got != nil {
						for p, pp := range got.Partitions {
							t.Logf("  got partition %d: %+v", p, *pp)
						}
					}
				}
			}
			if len(im.Deleted) != 1 || im.Deleted[0].Name != "logs" || im.Deleted[0].ID != tid(2) || im.Deleted[0].Offset <= im.SnapshotEnd {
				t.Errorf("deleted %+v (snapshot end %d); want logs with its first ID, after the snapshot", im.Deleted, im.SnapshotEnd)
			}
			if got := im.BrokerDefaults(2); !reflect.DeepEqual(got, map[string]string{"log.retention.ms": "7200000", "log.segment.bytes": "1048576"}) {
				t.Errorf("broker 2's defaults %v", got)
			}
			if got := im.BrokerDefaults(1); !reflect.DeepEqual(got, map[string]string{"log.retention.ms": "7200000"}) {
				t.Errorf("broker 1's defaults %v", got)
			}
			if len(im.Brokers) != 3 || im.Brokers[3].Epoch != 12 {
				t.Errorf("brokers %+v", im.Brokers)
			}
			if im.SnapshotEnd <= 0 || im.NextOffset != l.Next() {
				t.Errorf("snapshot end %d, next offset %d, want %d", im.SnapshotEnd, im.NextOffset, l.Next())
			}
			_, _, segs, _ := kraft.Files(vfs.Default, l.Dir)
			if len(segs) != 1 {
				t.Errorf("segments %v: the ones before the snapshot should be gone, so the snapshot was what held them", segs)
			}
		})
	}
}

// TestSnapshotIsTheStart: records in a segment below the snapshot's end are not applied
// twice or over the snapshot (the snapshot wins), and a later snapshot replaces an
// earlier one.
func TestSnapshotIsTheStart(t *testing.T) {
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(kraftlog.Topic("a", tid(1)), kraftlog.Partition(tid(1), 0, 1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(kraftlog.LeaderChange(tid(1), 0, 2)); err != nil {
		t.Fatal(err)
	}
	// An older snapshot with other state, and the current one, which holds "b" only: the
	// reader must start from the newest and skip the log records it covers.
	if _, err := l.Snapshot([]kraft.Record{kraftlog.Topic("old", tid(9))}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(kraftlog.LeaderChange(tid(1), 0, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot([]kraft.Record{kraftlog.Topic("b", tid(2)), kraftlog.Partition(tid(2), 0, 5, 7, 5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(kraftlog.LeaderChange(tid(2), 0, 6)); err != nil {
		t.Fatal(err)
	}
	im, err := kraft.ReadLogDir(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Names(); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("topics %v, want [b] (the newest snapshot, then the log after it)", got)
	}
	if p := im.Topics["b"].Partitions[0]; p.Leader != 6 || p.LeaderEpoch != 8 {
		t.Errorf("b-0 %+v, want leader 6 at epoch 8", *p)
	}
	if im.SnapshotEnd != 4 || im.NextOffset != 5 {
		t.Errorf("snapshot end %d, next %d", im.SnapshotEnd, im.NextOffset)
	}
}

// TestCorruption: each kind of damage is a *CorruptError naming the file and position; an
// incomplete batch at the end of the last segment is the end of the log.
func TestCorruption(t *testing.T) {
	type setup func(t *testing.T, l *kraftlog.Log) (file string, pos int64, offset int64)
	appendOK := func(t *testing.T, l *kraftlog.Log) {
		if _, err := l.Append(kraftlog.Topic("a", tid(1)), kraftlog.Partition(tid(1), 0, 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	segSize := func(t *testing.T, path string) int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	seg0 := func(l *kraftlog.Log) string { return filepath.Join(l.Dir, "00000000000000000000.log") }
	tests := []struct {
		name   string
		setup  setup
		reason string // in the error; "" = no error
	}{
		{name: "bad_checksum", reason: "checksum mismatch", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			appendOK(t, l)
			pos := segSize(t, seg0(l))
			appendOK(t, l)
			b, _ := os.ReadFile(seg0(l))
			b[len(b)-3] ^= 0xff
			os.WriteFile(seg0(l), b, 0o644)
			return seg0(l), pos, -1
		}},
		{name: "garbage_record", reason: "frame version 7", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			appendOK(t, l)
			pos := segSize(t, seg0(l))
			off, _ := l.AppendRaw([]byte{7, 2, 0})
			return seg0(l), pos, off
		}},
		{name: "trailing_garbage", reason: "1 byte(s) of garbage after the record", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			v, _ := kraftlog.Encode(kraftlog.RemoveTopic(tid(1)))
			off, _ := l.AppendRaw(append(v, 0))
			return seg0(l), 0, off
		}},
		{name: "short_record", reason: "ends early", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			v, _ := kraftlog.Encode(kraftlog.Topic("abc", tid(1)))
			off, _ := l.AppendRaw(v[:len(v)-5])
			return seg0(l), 0, off
		}},
		{name: "version_too_new", reason: "version 9 (this reader knows 0-2)", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			off, _ := l.AppendRaw([]byte{1, 3, 9})
			return seg0(l), 0, off
		}},
		{name: "unknown_type_skipped", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			l.AppendRaw([]byte{1, 12, 0, 0xde, 0xad}) // FeatureLevelRecord: not decoded, skipped
			appendOK(t, l)
			return "", 0, 0
		}},
		{name: "torn_tail_of_last_segment", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			appendOK(t, l)
			size := segSize(t, seg0(l))
			appendOK(t, l)
			os.Truncate(seg0(l), size+20)
			return "", 0, 0
		}},
		{name: "torn_tail_before_last_segment", reason: "incomplete batch", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			appendOK(t, l)
			size := segSize(t, seg0(l))
			appendOK(t, l)
			os.Truncate(seg0(l), size+20)
			l.Roll()
			appendOK(t, l)
			return seg0(l), size, -1
		}},
		{name: "corrupt_snapshot", reason: "checksum mismatch", setup: func(t *testing.T, l *kraftlog.Log) (string, int64, int64) {
			appendOK(t, l)
			path, _ := l.Snapshot([]kraft.Record{kraftlog.Topic("a", tid(1))})
			b, _ := os.ReadFile(path)
			b[len(b)-30] ^= 0x01
			os.WriteFile(path, b, 0o644)
			return path, -1, -1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logDir := t.TempDir()
			l, err := kraftlog.Create(logDir)
			if err != nil {
				t.Fatal(err)
			}
			file, pos, off := tt.setup(t, l)
			im, err := kraft.ReadLogDir(vfs.Default, logDir)
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if im.Topics["a"] == nil {
					t.Fatalf("topic a missing: %v", im.Names())
				}
				return
			}
			var ce *kraft.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *kraft.CorruptError", err, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || ce.File != file || (pos >= 0 && ce.Pos != pos) || ce.Offset != off {
				t.Errorf("error %q: file %s pos %d offset %d; want %q in %s at %d, offset %d", err, ce.File, ce.Pos, ce.Offset, tt.reason, file, pos, off)
			}
		})
	}
}
