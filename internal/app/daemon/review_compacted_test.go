package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// TestSidecarCompactedTopicWithoutCleanerCheckpoint: a broker's replica of
// a compacted topic (cleanup.policy=compact in the metadata) holds the
// cleaner's offset gaps between its segments, but its own cleaner has not
// run yet, so its cleaner-offset-checkpoint does not name the partition (a
// replica that copied its leader's cleaned log after a reassignment).
// Those gaps are no loss: the sidecar records none, and a read inside one
// gets the next batch, as from Kafka, never OFFSET_OUT_OF_RANGE.
func TestSidecarCompactedTopicWithoutCleanerCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	props := "#Kafka meta.properties\nversion=1\ncluster.id=tiered-review\nnode.id=1\n"
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	meta, err := kraftlog.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := kraft.TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if _, err := meta.Append(kraftlog.RegisterBroker(1, 1), kraftlog.Topic("users", id), kraftlog.Partition(id, 0, 1, 0, 1),
		kraftlog.TopicConfig("users", "cleanup.policy", kraftlog.Value("compact"))); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "users-0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := localtier.WritePartitionMetadata(vfs.Default, part, localtier.TopicID(id)); err != nil {
		t.Fatal(err)
	}
	// Segments [0, 10) and [10, 20), each holding the batch of its first
	// five offsets (the cleaner removed the rest), and the active one.
	var enc record.Encoder
	for _, base := range []int64{0, 10} {
		rs := make([]record.Record, 5)
		for i := range rs {
			rs[i] = record.Record{Offset: base + int64(i), Timestamp: 1_700_000_000_000, Key: fmt.Appendf(nil, "k%d", base+int64(i)), Value: []byte("v")}
		}
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(base, codec.None), rs)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(localtier.SegmentPath(part, base, localtier.LogSuffix), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(localtier.SegmentPath(part, 20, localtier.LogSuffix), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, checkpoint.ReplicationOffsetFile),
		map[checkpoint.TopicPartition]int64{{Topic: "users", Partition: 0}: 20}); err != nil {
		t.Fatal(err)
	}

	name := "review-compacted-" + t.Name()
	t.Cleanup(func() { objstore.DropMemory(name) })
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessSidecar,
		Flags: map[string]string{"kafka-log-dir": dir, "bucket": "mem://" + name, "topics": "users"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSidecar(ctx, SidecarOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.uploader.RunOnce(ctx)
	if err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("pass: %+v, %v", rep, err)
	}
	if rep.SegmentsLost != 0 {
		t.Errorf("the cleaner's gap was recorded as data loss: %+v", rep.Partitions)
	}
	rl, err := remotelog.OpenRemoteLog(ctx, s.bucket, "", "users", 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rl.Read(ctx, 5, 1<<20)
	if err != nil {
		t.Fatalf("read inside the cleaner's gap: %v", err)
	}
	it := record.NewIter(res.Data)
	if b, ok := it.Next(); !ok || b.BaseOffset() != 10 {
		t.Fatalf("read at 5: first batch %v (ok %v), want the batch at 10", b.BaseOffset(), ok)
	}
}
