package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// reconcileOffsetsID is the topic ID of __consumer_offsets in the metadata
// reconcileBroker writes: the witness of its history in foo's proof.
var reconcileOffsetsID = kraft.TopicID{1: 1, 15: 9}

// reconcileBroker is the KRaft broker fixture (node 1, topic foo, foo-0
// rolled) with a metadata log the test writes: foo with its
// partition.metadata ID, led by node 1, and __consumer_offsets (on no
// broker of the fixture).
func reconcileBroker(t *testing.T) (logDir string, meta *kraftlog.Log, fooID kraft.TopicID) {
	t.Helper()
	logDir = brokerdir.Rolled(t, filepath.Join(t.TempDir(), "kafka"))
	fooID, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(logDir, "foo-0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(logDir, kraft.MetadataDir)); err != nil {
		t.Fatal(err)
	}
	if meta, err = kraftlog.Create(logDir); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Append(kraftlog.RegisterBroker(1, 1), kraftlog.Topic("foo", fooID), kraftlog.Partition(fooID, 0, 1, 0, 1),
		kraftlog.Topic("__consumer_offsets", reconcileOffsetsID)); err != nil {
		t.Fatal(err)
	}
	return logDir, meta, fooID
}

// reconcileReformat formats reconcileBroker's log dir again as an operator
// keeping its cluster.id would (meta.properties unchanged): a new metadata
// log, holding broker 1, a new __consumer_offsets and then recs; foo-0 gone
// with the old data.
func reconcileReformat(t *testing.T, logDir string, recs ...kraft.Record) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(logDir, kraft.MetadataDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(logDir, "foo-0")); err != nil {
		t.Fatal(err)
	}
	meta, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	recs = append([]kraft.Record{kraftlog.RegisterBroker(1, 1), kraftlog.Topic("__consumer_offsets", kraft.TopicID{3: 3})}, recs...)
	if _, err := meta.Append(recs...); err != nil {
		t.Fatal(err)
	}
}

// reconcileSidecar opens a sidecar configured by flags; the caller closes it.
func reconcileSidecar(t *testing.T, flags map[string]string) *Sidecar {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessSidecar, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSidecar(context.Background(), SidecarOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reconcileSnapshot has the controller write a metadata snapshot of the
// whole log and the broker drop the segments it covers: the records so
// far are state, no longer history.
func reconcileSnapshot(t *testing.T, meta *kraftlog.Log) {
	t.Helper()
	im, err := kraft.ReadDir(vfs.Default, meta.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Snapshot(kraftlog.ImageRecords(im)); err != nil {
		t.Fatal(err)
	}
	if err := meta.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := meta.DeleteSegmentsBefore(meta.Next()); err != nil {
		t.Fatal(err)
	}
}

// reconcilePass runs one upload pass of a sidecar started afresh over
// logDir and bucket, then closes it (the sidecar stops).
func reconcilePass(t *testing.T, logDir, bucket string) remotetier.Report {
	t.Helper()
	s := reconcileSidecar(t, map[string]string{"kafka-log-dir": logDir, "bucket": bucket})
	defer s.Close()
	rep, err := s.uploader.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return rep
}

// A topic deleted (or deleted and re-created) while its sidecars were down,
// the controller writing a metadata snapshot past the RemoveTopicRecord
// before a sidecar started again: the restarted sidecar replays from the
// snapshot, which holds state, not history, so no deletion is reported.
// The topic's lineage must still stop being served: the metadata image,
// later than the one the lineage was recorded live in, no longer holds it.
func TestSidecarDeletedWhileDown(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		name := map[bool]string{false: "deleted", true: "re-created"}[recreate]
		t.Run(name, func(t *testing.T) {
			bucket := "mem://sidecar-deleted-while-down-" + name
			t.Cleanup(func() { objstore.DropMemory(bucket[len("mem://"):]) })
			logDir, meta, fooID := reconcileBroker(t)
			if rep := reconcilePass(t, logDir, bucket); rep.UploadedSegments != 1 {
				t.Fatalf("first pass: %+v", rep)
			}
			b, err := objstore.Open(context.Background(), bucket)
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := remotelog.ReadTopicVersion(context.Background(), b, "", "foo")
			if err != nil || s == nil || s.Current == nil || s.Current.TopicID != fooID.String() {
				t.Fatalf("after the first pass: %+v, %v", s, err)
			}
			if p, ok := s.Proof(); !ok || p.ClusterID != "rwd2jqiwRaCycLq7mKVHXA" || p.MetadataOffset < 0 || len(p.Witnesses) != 1 || p.Witnesses[0] != reconcileOffsetsID.String() {
				t.Fatalf("the first pass recorded no proof: %+v, %v (configs %v)", p, ok, s.Configs)
			}

			// While the sidecar is down: foo is deleted (re-created), its
			// partition directory removed, and a metadata snapshot covers
			// the removal.
			recs := []kraft.Record{kraftlog.RemoveTopic(fooID)}
			newID := kraft.TopicID{7: 7}
			if recreate {
				recs = append(recs, kraftlog.Topic("foo", newID), kraftlog.Partition(newID, 0, 1, 0, 1))
			}
			if _, err := meta.Append(recs...); err != nil {
				t.Fatal(err)
			}
			reconcileSnapshot(t, meta)
			if err := os.RemoveAll(filepath.Join(logDir, "foo-0")); err != nil {
				t.Fatal(err)
			}
			// The restarted source indeed reports no deletion.
			snap, err := (&brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}).Snapshot(context.Background())
			if err != nil || snap.DeletedID(fooID) {
				t.Fatalf("restarted source: deleted %+v, %v", snap.Deleted, err)
			}

			rep := reconcilePass(t, logDir, bucket)
			s, _, err = remotelog.ReadTopicVersion(context.Background(), b, "", "foo")
			if err != nil {
				t.Fatal(err)
			}
			if _, id, ok := s.Serving(); ok {
				t.Fatalf("foo, deleted while the sidecar was down, is still served (lineage %s)", id)
			}
			if rep.ReconciledTopics != 1 || len(s.Superseded) != 1 || s.Superseded[0].TopicID != fooID.String() {
				t.Fatalf("reconciled %d; superseded %+v", rep.ReconciledTopics, s.Superseded)
			}
		})
	}
}

// A cluster whose metadata is formatted again with the same cluster.id (a
// fixed CLUSTER_ID in a container image or deployment template): its
// metadata offsets start again at 0 and pass the proof's, and its image
// holds neither foo nor any topic of the old history. Nothing tells that
// foo was deleted rather than not yet re-created by an operator restoring
// the cluster: foo stays served. The same with foo re-created under a new
// ID: that is a new lineage when its data is uploaded, not a deletion.
func TestSidecarReformattedSameClusterID(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		name := map[bool]string{false: "absent", true: "re-created"}[recreate]
		t.Run(name, func(t *testing.T) {
			bucket := "mem://sidecar-reformatted-" + name
			t.Cleanup(func() { objstore.DropMemory(bucket[len("mem://"):]) })
			logDir, _, fooID := reconcileBroker(t)
			if rep := reconcilePass(t, logDir, bucket); rep.UploadedSegments != 1 {
				t.Fatalf("first pass: %+v", rep)
			}
			// A metadata log longer than the old one.
			var recs []kraft.Record
			for i := range 8 {
				recs = append(recs, kraftlog.BrokerConfig("1", "log.retention.ms", kraftlog.Value(strconv.Itoa(i+1))))
			}
			if recreate {
				newID := kraft.TopicID{7: 7}
				recs = append(recs, kraftlog.Topic("foo", newID))
			}
			reconcileReformat(t, logDir, recs...)
			rep := reconcilePass(t, logDir, bucket)
			b, err := objstore.Open(context.Background(), bucket)
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := remotelog.ReadTopicVersion(context.Background(), b, "", "foo")
			if err != nil {
				t.Fatal(err)
			}
			p, _ := s.Proof()
			if snap, err := (&brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}).Snapshot(context.Background()); err != nil || snap.MetadataOffset <= p.MetadataOffset {
				t.Fatalf("the new metadata (offset %d, %v) is not past the proof's (%d): the test proves nothing", snap.MetadataOffset, err, p.MetadataOffset)
			}
			if _, id, ok := s.Serving(); !ok || id != fooID.String() || rep.ReconciledTopics != 0 {
				t.Fatalf("foo serves %q, %v (reconciled %d) after its cluster was formatted again; want %s", id, ok, rep.ReconciledTopics, fooID)
			}
		})
	}
}

// Only an authoritative snapshot that knows its cluster gives a view of
// the live topics: the partition.metadata fallback, a bootstrap server's
// listing, a KRaft log dir without a cluster.id, and a snapshot that
// failed give none (or the error), and so delete nothing.
func TestSidecarLiveTopicsSources(t *testing.T) {
	ctx := context.Background()
	logDir, _, fooID := reconcileBroker(t)
	v, err := (&sidecarMeta{src: &brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}, nodeID: 1}).liveTopics(ctx)
	if err != nil || v == nil || v.ClusterID != "rwd2jqiwRaCycLq7mKVHXA" || v.IDs["foo"] != fooID.String() || v.MetadataOffset < 0 {
		t.Fatalf("KRaft: %+v, %v", v, err)
	}

	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := (&sidecarMeta{src: brokermeta.NewFallbackSource(view), nodeID: 1}).liveTopics(ctx); err != nil || v != nil {
		t.Fatalf("fallback source: %+v, %v; want none", v, err)
	}
	admin := metaSnapshot(1)
	admin.Origin, admin.ClusterID = brokermeta.OriginAdmin, "rwd2jqiwRaCycLq7mKVHXA"
	if v, err := (&sidecarMeta{src: fixedMeta{admin}, nodeID: 1}).liveTopics(ctx); err != nil || v != nil {
		t.Fatalf("admin source: %+v, %v; want none", v, err)
	}
	// With a bootstrap server, the log dir's KRaft image is the view.
	withImage := &sidecarMeta{src: fixedMeta{admin}, nodeID: 1, image: &brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}}
	if v, err := withImage.liveTopics(ctx); err != nil || v == nil || v.IDs["foo"] != fooID.String() || len(v.IDs) != 2 {
		t.Fatalf("admin source with a KRaft log dir: %+v, %v; want the image's", v, err)
	}

	if err := os.WriteFile(filepath.Join(logDir, "meta.properties"), []byte("version=1\nnode.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := (&sidecarMeta{src: &brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}, nodeID: 1}).liveTopics(ctx); err != nil || v != nil {
		t.Fatalf("KRaft without a cluster.id: %+v, %v; want none", v, err)
	}
	if err := os.RemoveAll(filepath.Join(logDir, kraft.MetadataDir)); err != nil {
		t.Fatal(err)
	}
	if v, err := (&sidecarMeta{src: &brokermeta.KRaftSource{LogDir: logDir, NodeID: 1}, nodeID: 1}).liveTopics(ctx); err == nil || v != nil {
		t.Fatalf("failed snapshot: %+v, %v; want the error", v, err)
	}
	// The admin source's image failing: no view; the pass goes on.
	if v, err := withImage.liveTopics(ctx); err != nil || v != nil {
		t.Fatalf("admin source, image failed: %+v, %v; want none", v, err)
	}
}

// A sidecar with a bootstrap server over a KRaft broker's log dir reads the
// log dir's metadata log for its view of the live topics.
func TestSidecarAdminReadsImage(t *testing.T) {
	logDir := brokerdir.Rolled(t, filepath.Join(t.TempDir(), "kafka"))
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "foo"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Cleanup(func() { objstore.DropMemory("sidecar-admin-image") })
	s := reconcileSidecar(t, map[string]string{"kafka-log-dir": logDir, "bucket": "mem://sidecar-admin-image",
		"bootstrap-server": c.ListenAddrs()[0]})
	defer s.Close()
	v, err := s.meta.liveTopics(context.Background())
	if err != nil || v == nil || v.ClusterID != "rwd2jqiwRaCycLq7mKVHXA" {
		t.Fatalf("live topics with a bootstrap server: %+v, %v; want the log dir's image", v, err)
	}
}

// A RemoveTopicRecord inside a metadata transaction (KIP-868) not yet
// ended, then aborted, deletes nothing: the image that reconciliation reads
// holds foo live while its offset is past the removal (the transaction's
// records are held back, as Kafka holds them), and after the abort, also
// from a metadata snapshot. foo-0 is gone from the log dir meanwhile (a
// replica moved away), so nothing but the image tells.
func TestSidecarPendingRemovalNotReconciled(t *testing.T) {
	bucket := "mem://sidecar-pending-removal"
	t.Cleanup(func() { objstore.DropMemory(bucket[len("mem://"):]) })
	logDir, meta, fooID := reconcileBroker(t)
	reconcilePass(t, logDir, bucket)
	b, err := objstore.Open(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	served := func(when string) {
		t.Helper()
		s, _, err := remotelog.ReadTopicVersion(context.Background(), b, "", "foo")
		if err != nil {
			t.Fatal(err)
		}
		if _, id, ok := s.Serving(); !ok || id != fooID.String() {
			t.Fatalf("%s: foo no longer served (%v, %q); superseded %+v", when, ok, id, s.Superseded)
		}
	}
	if _, err := meta.Append(kraftlog.BeginTxn(), kraftlog.RemoveTopic(fooID)); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.AppendControl(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(logDir, "foo-0")); err != nil {
		t.Fatal(err)
	}
	reconcilePass(t, logDir, bucket)
	served("removal in a transaction not ended")
	if _, err := meta.Append(kraftlog.AbortTxn()); err != nil {
		t.Fatal(err)
	}
	reconcilePass(t, logDir, bucket)
	served("transaction aborted")
	reconcileSnapshot(t, meta)
	reconcilePass(t, logDir, bucket)
	served("aborted transaction covered by a snapshot")
}
