package remotetier

import (
	"context"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// TestReviewRetentionForeignManifestLocalPass: serve's data dir is lost (a
// replaced disk) and serve starts again on the same bucket. The topic is
// created again and its new log starts at offset 0, while the bucket's
// name-only manifest still holds the old incarnation's offsets 0..N. The
// uploader skips every new segment below N ("already committed"), so the
// local copy is the only copy of the new records; yet the local retention
// pass takes the manifest's offsets for them and deletes them by
// local.retention.bytes. A remote tier that ends past the local log end
// holds offsets this log never had: it holds nothing of this log.
func TestReviewRetentionForeignManifestLocalPass(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()

	// The old incarnation: 6 segments uploaded.
	old, _ := rrIncarnation(t, 6, "local.retention.bytes", "0")
	if _, err := upUploader(t, mem, NewLocalSource(old, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	remoteEnd := upLoad(t, mem, "t", 0).NextOffset()

	// The new incarnation on a fresh data dir: 2 rolled segments, fewer
	// offsets than the bucket holds.
	d, l := rrIncarnation(t, 2, "local.retention.bytes", "0")
	if l.LogEndOffset() >= remoteEnd {
		t.Fatalf("test setup: local log end %d, remote end %d", l.LogEndOffset(), remoteEnd)
	}
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := len(l.Segments())

	lookup, err := RemoteLookup(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := retention.RunOnce(ctx, d, retention.PassOptions{Now: func() time.Time { return upNow }, Remote: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedSegments != 0 || len(l.Segments()) != before {
		t.Fatalf("local pass deleted %d never-uploaded segments (log start now %d) on the word of a manifest ending at %d, past the local log end %d",
			rep.DeletedSegments, l.LogStartOffset(), remoteEnd, l.LogEndOffset())
	}
}

// TestReviewRetentionForeignManifestRemotePass: the same, when the old
// incarnation's remote log start lies past the new local log end: the
// remote retention pass deletes every rolled local segment below it at
// once, under no retention rule at all.
func TestReviewRetentionForeignManifestRemotePass(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()

	old, _ := rrIncarnation(t, 6, "retention.ms", "3600000")
	if _, err := upUploader(t, mem, NewLocalSource(old, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return upNow.Add(2 * time.Hour) }
	if _, err := RemoteRetention(ctx, mem, old, RetentionOptions{Now: later}); err != nil {
		t.Fatal(err)
	}
	remoteStart := upLoad(t, mem, "t", 0).LogStartOffset

	d, l := rrIncarnation(t, 2, "retention.ms", "3600000")
	if l.LogEndOffset() >= remoteStart {
		t.Fatalf("test setup: local log end %d, remote log start %d", l.LogEndOffset(), remoteStart)
	}
	before := len(l.Segments())
	// Run at upNow: by the topic's own retention.ms nothing local is old enough.
	rep, err := RemoteRetention(ctx, mem, d, RetentionOptions{Now: func() time.Time { return upNow }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LocalDeleted != 0 || len(l.Segments()) != before {
		t.Fatalf("remote retention deleted %d local segments (log start now %d) below a remote log start %d past the local log end %d",
			rep.LocalDeleted, l.LogStartOffset(), remoteStart, l.LogEndOffset())
	}
}

// rrIncarnation is one incarnation of topic t on a data dir of its own:
// one partition of segs rolled segments, the topic's configs cfg (name,
// value pairs).
func rrIncarnation(t *testing.T, segs int, cfg ...string) (*localtier.LogDir, *localtier.Log) {
	t.Helper()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "t", 1, cfg...)
	l := upPartition(t, d, "t", 0)
	upSegments(t, l, segs, 2, 3, 10)
	return d, l
}
