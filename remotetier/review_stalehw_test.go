package remotetier

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// The broker's replication-offset-checkpoint names partitions, not topic
// IDs, and is rewritten only every few seconds: just after a topic is
// deleted and re-created it still holds the old incarnation's high
// watermark, past the new log's end. The sidecar must not take the new
// log's segments for committed by it (they may be above the real high
// watermark, and truncated later); once the checkpoint is this log's
// again, they are uploaded.
func TestSidecarStaleHighWatermark(t *testing.T) {
	ctx := context.Background()
	dir, _, l, view := upBrokerLog(t, 3)
	end := l.LogEndOffset()
	writeHW := func(hw int64) {
		t.Helper()
		if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, checkpoint.ReplicationOffsetFile),
			map[checkpoint.TopicPartition]int64{{Topic: "orders", Partition: 0}: hw}); err != nil {
			t.Fatal(err)
		}
	}
	writeHW(end + 5000) // the deleted incarnation's
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
	rep, err := u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.UploadedSegments != 0 {
		t.Fatalf("uploaded %d segments under a high watermark (%d) past the log's end (%d)", rep.UploadedSegments, end+5000, end)
	}
	writeHW(end)
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 3 {
		t.Fatalf("pass with the log's own high watermark: %+v, %v", rep, err)
	}
}
