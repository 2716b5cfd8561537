package daemon

import (
	"context"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// TestSidecarReformattedWhileRunning is TestSidecarReformattedSameClusterID
// with one sidecar process that keeps running while the broker's storage is
// formatted again with the same cluster.id (an operator re-formatting lost
// storage with the ID it kept; kafka and the sidecar as separate services).
// The KRaft reader replays the new log, and the source's remembered topics
// (deletions.seen) report every old topic deleted under its old ID: the
// DeletedTopics path marks foo's live-in-the-bucket lineage deleted, with no
// proof or witness consulted.
func TestSidecarReformattedWhileRunning(t *testing.T) {
	ctx := context.Background()
	bucket := "mem://sidecar-reformatted-running"
	t.Cleanup(func() { objstore.DropMemory(bucket[len("mem://"):]) })
	logDir, _, fooID := reconcileBroker(t)
	s := reconcileSidecar(t, map[string]string{"kafka-log-dir": logDir, "bucket": bucket})
	defer s.Close()
	if rep, err := s.uploader.RunOnce(ctx); err != nil || rep.UploadedSegments != 1 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	reconcileReformat(t, logDir)
	_, _ = s.uploader.RunOnce(ctx)
	_, _ = s.uploader.RunOnce(ctx)
	b, err := objstore.Open(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, b, "", "foo")
	if err != nil {
		t.Fatal(err)
	}
	if _, id, ok := st.Serving(); !ok || id != fooID.String() {
		t.Fatalf("foo serves %q, %v after its cluster was formatted again under a running sidecar; want %s (superseded %+v)", id, ok, fooID, st.Superseded)
	}
}
