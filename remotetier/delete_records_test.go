package remotetier

import (
	"context"
	"errors"
	"testing"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// TestDeleteRecords: the remote log start moves to the offset, the
// segments wholly below it go without orphans, and readers get nothing
// below it; an uploader that read the manifest before goes on from the new
// one and keeps the new log start; offsets past the end, at or below the
// start, and unknown partitions are refused or change nothing.
func TestDeleteRecords(t *testing.T) {
	ctx := context.Background()
	_, d, l, view := upBrokerLog(t, 5)
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	cut := segs[2].BaseOffset + 3
	o := DeleteRecordsOptions{Topic: "orders", Partition: 0, Before: cut}

	dry := o
	dry.DryRun = true
	pr, reports, err := DeleteRecords(ctx, mem, dry)
	if err != nil || pr.NewLogStartOffset != cut || len(reports) != 2 {
		t.Fatalf("dry run: %+v, %d segments, %v; want log start %d and 2 segments", pr, len(reports), err, cut)
	}
	if m := upLoad(t, mem, "orders", 0); m.LogStartOffset != 0 {
		t.Fatalf("the dry run moved the log start to %d", m.LogStartOffset)
	}

	pr, reports, err = DeleteRecords(ctx, mem, o)
	if err != nil || pr.LogStartOffset != 0 || pr.NewLogStartOffset != cut || pr.Segments != 2 || len(reports) != 2 {
		t.Fatalf("%+v, %d segments, %v", pr, len(reports), err)
	}
	m := upLoad(t, mem, "orders", 0)
	if m.LogStartOffset != cut {
		t.Fatalf("remote log start %d, want %d", m.LogStartOffset, cut)
	}
	upCheckNoOrphans(t, mem, manifest.Key{Topic: "orders", TopicID: upKeyID(t, mem, "orders"), Partition: 0})
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "orders", 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var oe *manifest.OffsetOutOfRangeError
	if _, err := rl.Read(ctx, cut-1, 1<<20); !errors.As(err, &oe) {
		t.Fatalf("read at %d: %v, want out of range", cut-1, err)
	}
	if res, err := rl.Read(ctx, cut, 1<<20); err != nil || len(res.Data) == 0 {
		t.Fatalf("read at %d: %d bytes, %v", cut, len(res.Data), err)
	}

	// The uploader holds the manifest it read before: its next commit
	// (the segment rolled since) finds the new one and keeps its start.
	upSegments(t, l, 1, 4, 10, 100)
	upBrokerHWs(t, d)
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 1 {
		t.Fatalf("upload after the deletion: %+v, %v", rep, err)
	}
	if m := upLoad(t, mem, "orders", 0); m.LogStartOffset != cut || m.NextOffset() != l.Segments()[len(l.Segments())-1].BaseOffset {
		t.Fatalf("after the upload: log start %d next %d", m.LogStartOffset, m.NextOffset())
	}

	for _, before := range []int64{cut, cut - 5, 0} {
		o.Before = before
		if pr, _, err := DeleteRecords(ctx, mem, o); err != nil || pr.NewLogStartOffset != cut {
			t.Fatalf("before %d: %+v, %v; want nothing changed", before, pr, err)
		}
	}
	var re *DeleteRecordsRangeError
	o.Before = l.LogEndOffset() + 1
	if _, _, err := DeleteRecords(ctx, mem, o); !errors.As(err, &re) {
		t.Fatalf("past the end: %v", err)
	}
	var ue *remotelog.UnknownTopicOrPartitionError
	if _, _, err := DeleteRecords(ctx, mem, DeleteRecordsOptions{Topic: "orders", Partition: 3, Before: 1}); !errors.As(err, &ue) {
		t.Fatalf("unknown partition: %v", err)
	}
}
