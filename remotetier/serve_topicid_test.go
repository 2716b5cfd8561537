package remotetier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
	"github.com/tiered/tiered/retention"
)

// serveOldIncarnation fills mem with the name-only lineage of topic t
// partition 0 as a release before topic IDs wrote it: segs uploaded
// segments (extra: topic configs). It returns the old data dir.
func serveOldIncarnation(t *testing.T, mem objstore.Bucket, segs int, extra ...string) *localtier.LogDir {
	t.Helper()
	old := upOpenDir(t, t.TempDir())
	upTopic(t, old, "t", 1, extra...)
	upSegments(t, upPartition(t, old, "t", 0), segs, 2, 3, 10)
	if _, err := upUploader(t, mem, NewLocalSource(old, nil), Options{}).RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _, err := remotelog.ReadTopicVersion(context.Background(), mem, "", "t"); st != nil || err != nil {
		t.Fatalf("test setup: the old incarnation wrote a topic object: %+v, %v", st, err)
	}
	return old
}

// serveTopicID is d's topic ID of t in Kafka's string form.
func serveTopicID(t *testing.T, d *localtier.LogDir, topic string) string {
	t.Helper()
	id, err := d.TopicID(topic)
	if err != nil || id.IsZero() {
		t.Fatalf("topic %s has no topic id: %v", topic, err)
	}
	return id.String()
}

// TestServeTopicCreatedWithID: a topic serve creates gets a random topic
// ID, durably in every partition directory's partition.metadata (Kafka's
// file), read back when the data dir opens again.
func TestServeTopicCreatedWithID(t *testing.T) {
	dir := t.TempDir()
	d := upOpenDirIDs(t, dir)
	upTopic(t, d, "t", 3)
	upTopic(t, d, "u", 1)
	id := serveTopicID(t, d, "t")
	if id == serveTopicID(t, d, "u") {
		t.Fatal("two topics got the same topic id")
	}
	for p := range 3 {
		got, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(dir, fmt.Sprintf("t-%d", p)))
		if err != nil || got.String() != id {
			t.Fatalf("partition %d: partition.metadata holds %q (%v), topic id %s", p, got, err, id)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := upOpenDirIDs(t, dir)
	if got := serveTopicID(t, d2, "t"); got != id {
		t.Fatalf("reopened: topic id %s, created with %s", got, id)
	}
	if pls := d2.RemotePartitions(nil); len(pls) != 4 || pls[0].TopicID.String() != id {
		t.Fatalf("remote partitions: %+v", pls)
	}
}

// TestServeTopicWithoutIDKeepsNone: a topic of a data dir written before
// topic IDs (no partition.metadata) opens without one and stays so; a
// partition directory whose ID differs from its topic's is refused.
func TestServeTopicWithoutIDKeepsNone(t *testing.T) {
	dir := t.TempDir()
	d := upOpenDir(t, dir)
	upTopic(t, d, "t", 2)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := upOpenDirIDs(t, dir)
	if id, err := d2.TopicID("t"); err != nil || !id.IsZero() {
		t.Fatalf("a topic without an id got %q (%v)", id, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t-0", localtier.PartitionMetadataFile)); !os.IsNotExist(err) {
		t.Fatalf("partition.metadata written for a topic without an id: %v", err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := localtier.WritePartitionMetadata(vfs.Default, filepath.Join(dir, "t-1"), localtier.NewTopicID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{}); err == nil {
		t.Fatal("opened a topic whose partitions disagree on its topic id")
	}
}

// TestServeFreshDataDirNewLineage: serve's data dir is lost and started
// anew over the same bucket, which holds the earlier incarnation's
// name-only lineage ending past the new log. The topic, created again,
// has a new topic ID: its first upload pass supersedes the name-only
// lineage and uploads every new segment into its own (none skipped as
// "committed"), readers serve that lineage, and local retention deletes
// only what it holds.
func TestServeFreshDataDirNewLineage(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	serveOldIncarnation(t, mem, 6, "local.retention.bytes", "0")
	oldEnd := upLoad(t, mem, "t", 0).NextOffset()

	d := upOpenDirIDs(t, t.TempDir())
	upTopic(t, d, "t", 1, "local.retention.bytes", "0")
	id := serveTopicID(t, d, "t")
	l := upPartition(t, d, "t", 0)
	upSegments(t, l, 2, 2, 3, 10)
	segs := l.Segments()
	rolledEnd := segs[len(segs)-1].BaseOffset
	if l.LogEndOffset() >= oldEnd {
		t.Fatalf("test setup: local log end %d, old remote end %d", l.LogEndOffset(), oldEnd)
	}
	// Local retention before the first upload: nothing of this log is in
	// the bucket (the name-only manifest is the old incarnation's).
	lookup, err := RemoteLookup(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	pass := func() retention.PassReport {
		t.Helper()
		rep, err := retention.RunOnce(ctx, d, retention.PassOptions{Now: func() time.Time { return upNow }, Remote: lookup})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := pass(); rep.DeletedSegments != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("before the first upload: deleted %d segments (log start %d)", rep.DeletedSegments, l.LogStartOffset())
	}

	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "t")
	if err != nil || st == nil || st.Current == nil || st.Current.TopicID != id || st.Current.NameOnlyKeys ||
		len(st.Superseded) != 1 || !st.Superseded[0].NameOnlyKeys {
		t.Fatalf("topic object %+v, %v: want topic id %s current in its own keys, the name-only lineage superseded", st, err, id)
	}
	m := upLoad(t, mem, "t", 0)
	if m.TopicID != id || m.NextOffset() != rolledEnd {
		t.Fatalf("served manifest: topic id %q ending at %d, want %s ending at %d (every rolled segment uploaded)", m.TopicID, m.NextOffset(), id, rolledEnd)
	}
	upCheckRemote(t, mem, l, "t", 0, rolledEnd)
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "t", 0, remotelog.ReaderOptions{})
	if err != nil || rl.TopicID() != id || rl.LogEndOffset() != rolledEnd {
		t.Fatalf("reader: %v, topic id %q, log end %d", err, rl.TopicID(), rl.LogEndOffset())
	}
	// Now local retention may delete what the new lineage holds, no more.
	pass()
	if l.LogStartOffset() != rolledEnd {
		t.Fatalf("local log start %d after the pass, want %d (what the topic's lineage holds)", l.LogStartOffset(), rolledEnd)
	}
}

// TestServeFreshDataDirLongerLogNotAdopted: the same when the new log has
// grown past the old name-only lineage's end before its first upload pass.
// The offsets alone would take the name-only lineage for the topic's own
// (a broker upgraded to topic IDs: adopted); a topic ID serve gave at the
// topic's creation never wrote name-only keys, so it is superseded all
// the same.
func TestServeFreshDataDirLongerLogNotAdopted(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	serveOldIncarnation(t, mem, 2)
	oldEnd := upLoad(t, mem, "t", 0).NextOffset()

	d := upOpenDirIDs(t, t.TempDir())
	upTopic(t, d, "t", 1)
	id := serveTopicID(t, d, "t")
	l := upPartition(t, d, "t", 0)
	upSegments(t, l, 5, 2, 3, 10)
	segs := l.Segments()
	rolledEnd := segs[len(segs)-1].BaseOffset
	if rolledEnd <= oldEnd {
		t.Fatalf("test setup: new rolled end %d, old remote end %d", rolledEnd, oldEnd)
	}
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "t")
	if err != nil || st == nil || st.Current == nil || st.Current.NameOnlyKeys || len(st.Superseded) != 1 {
		t.Fatalf("topic object %+v, %v: the name-only lineage was adopted by topic id %s", st, err, id)
	}
	m := upLoad(t, mem, "t", 0)
	if m.TopicID != id || m.NextOffset() != rolledEnd || m.SegmentCount() != len(segs)-1 {
		t.Fatalf("served manifest: topic id %q ending at %d with %d segments, want %s ending at %d with %d",
			m.TopicID, m.NextOffset(), m.SegmentCount(), id, rolledEnd, len(segs)-1)
	}
}

// TestServeFreshDataDirRemoteRetention: remote retention over a fresh
// data dir's topic never works on the old incarnation's lineage: before
// the first upload nothing is done (neither the old remote segments nor
// the local ones below the old remote log start are touched); after it,
// only the topic's own lineage.
func TestServeFreshDataDirRemoteRetention(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	old := serveOldIncarnation(t, mem, 6, "retention.ms", "3600000")
	later := func() time.Time { return upNow.Add(2 * time.Hour) }
	upSegments(t, upPartition(t, old, "t", 0), 1, 2, 3, 10) // a segment past the ones expiring
	if _, err := upUploader(t, mem, NewLocalSource(old, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := RemoteRetention(ctx, mem, old, RetentionOptions{Now: later}); err != nil {
		t.Fatal(err)
	}
	oldManifest := upLoad(t, mem, "t", 0)
	if oldManifest.LogStartOffset == 0 {
		t.Fatal("test setup: the old remote log start did not move")
	}

	d := upOpenDirIDs(t, t.TempDir())
	upTopic(t, d, "t", 1, "retention.ms", "3600000")
	l := upPartition(t, d, "t", 0)
	upSegments(t, l, 2, 2, 3, 10)
	before := len(l.Segments())
	for _, now := range []func() time.Time{func() time.Time { return upNow }, later} {
		rep, err := RemoteRetention(ctx, mem, d, RetentionOptions{Now: now})
		if err != nil || rep.LocalDeleted != 0 || rep.DeletedSegments != 0 || len(l.Segments()) != before {
			t.Fatalf("before the first upload: %+v, %v", rep, err)
		}
	}
	if m := upLoad(t, mem, "t", 0); m.Generation != oldManifest.Generation {
		t.Fatalf("the old lineage's manifest changed: generation %d, was %d", m.Generation, oldManifest.Generation)
	}
	if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := RemoteRetention(ctx, mem, d, RetentionOptions{Now: func() time.Time { return upNow }})
	if err != nil || rep.LocalDeleted != 0 || rep.DeletedSegments != 0 {
		t.Fatalf("after the first upload, nothing old enough: %+v, %v", rep, err)
	}
	rep, err = RemoteRetention(ctx, mem, d, RetentionOptions{Now: later})
	if err != nil || rep.DeletedSegments == 0 {
		t.Fatalf("after the first upload, two hours later: %+v, %v", rep, err)
	}
	if m := upLoad(t, mem, "t", 0); m.TopicID != serveTopicID(t, d, "t") {
		t.Fatalf("remote retention worked on lineage %q", m.TopicID)
	}
}

// TestServeSupersededDataDirHoldsLocal: two data dirs with topic IDs share
// a bucket; the second's uploads supersede the first's lineage. The first
// then holds all its local data (its uploads are refused, and what its
// lineage held is no longer served): its local retention deletes nothing
// on the word of the bucket, nor does its remote retention.
func TestServeSupersededDataDirHoldsLocal(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	d1 := upOpenDirIDs(t, t.TempDir())
	upTopic(t, d1, "t", 1, "local.retention.bytes", "0", "retention.ms", "3600000")
	l1 := upPartition(t, d1, "t", 0)
	upSegments(t, l1, 3, 2, 3, 10)
	if _, err := upUploader(t, mem, NewLocalSource(d1, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	d2 := upOpenDirIDs(t, t.TempDir())
	upTopic(t, d2, "t", 1)
	upSegments(t, upPartition(t, d2, "t", 0), 1, 2, 3, 10)
	if _, err := upUploader(t, mem, NewLocalSource(d2, nil), Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if k := upKeyID(t, mem, "t"); k != serveTopicID(t, d2, "t") {
		t.Fatalf("served lineage %q, want the second data dir's", k)
	}
	upSegments(t, l1, 1, 2, 3, 10)
	rep, err := upUploader(t, mem, NewLocalSource(d1, nil), Options{}).RunOnce(ctx)
	if err != nil || rep.RefusedPartitions != 1 {
		t.Fatalf("the superseded data dir's upload: %+v, %v", rep, err)
	}
	before := len(l1.Segments())
	lookup, err := RemoteLookup(mem, "")
	if err != nil {
		t.Fatal(err)
	}
	prep, err := retention.RunOnce(ctx, d1, retention.PassOptions{Now: func() time.Time { return upNow }, Remote: lookup})
	if err != nil || prep.DeletedSegments != 0 || len(l1.Segments()) != before {
		t.Fatalf("local pass of the superseded data dir: %+v, %v", prep, err)
	}
	rrep, err := RemoteRetention(ctx, mem, d1, RetentionOptions{Now: func() time.Time { return upNow.Add(2 * time.Hour) }})
	if err != nil || rrep.LocalDeleted != 0 || rrep.DeletedSegments != 0 || len(l1.Segments()) != before {
		t.Fatalf("remote retention of the superseded data dir: %+v, %v", rrep, err)
	}
}
