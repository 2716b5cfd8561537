package remotetier

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

const (
	rcCluster = "MkU3OEVBNTcwNTJENDM2Qk"
	rcOther   = "q1Sh-9_ISia_zwGINzRvyQ"
	// Topic IDs of other topics: witnesses of one metadata history
	// (rcOffsets, rcTxn), and one a re-formatted cluster gave its
	// __consumer_offsets (rcNewHistory).
	rcOffsets    = "Ak2gHfBYT9-xXwpLtyqY9Q"
	rcTxn        = "ZQ4PCuBeRWWv3Nn0tmVE6g"
	rcNewHistory = "9bJ6IxxkQ0i0rT1YLNv0mw"
)

// rcView is a KRaft image of cluster at metadata offset off holding ids.
func rcView(cluster string, off int64, ids map[string]string) *LiveTopics {
	return &LiveTopics{ClusterID: cluster, MetadataOffset: off, IDs: ids}
}

// rcUploaded uploads orders (topic ID lineA) through an uploader whose
// passes see the live topics first (nil: a source with none), and returns
// the bucket: the topic object a sidecar's pass leaves.
func rcUploaded(t *testing.T, first *LiveTopics) *objstore.Memory {
	t.Helper()
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	upSegments(t, upPartition(t, d, "orders", 0), 2, 5, 10, 50)
	o := Options{RemoveLineages: true, DeletedTopicRetention: 24 * 3600e9}
	if first != nil {
		o.LiveTopics = func(context.Context) (*LiveTopics, error) { return first, nil }
	}
	if rep, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, o).RunOnce(context.Background()); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	return mem
}

// rcRestart runs one pass of a restarted sidecar whose broker no longer
// holds orders (Kafka removed its partitions), its view of the live topics
// given by live.
func rcRestart(t *testing.T, mem objstore.Bucket, live func(context.Context) (*LiveTopics, error)) (Report, error) {
	t.Helper()
	d := upOpenDir(t, t.TempDir())
	o := Options{RemoveLineages: true, DeletedTopicRetention: 24 * 3600e9, LiveTopics: live}
	u := upUploader(t, mem, NewLocalSource(d, nil), o)
	rep, err := u.RunOnce(context.Background())
	if got := testutil.ToFloat64(u.lineageMetrics.reconciled); got != float64(rep.ReconciledTopics) {
		t.Errorf("tiered_uploader_reconciled_topics_total %v, reported %d", got, rep.ReconciledTopics)
	}
	return rep, err
}

func rcServed(t *testing.T, mem objstore.Bucket) (string, bool) {
	t.Helper()
	s, _, err := remotelog.ReadTopicVersion(context.Background(), mem, "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	_, id, ok := s.Serving()
	return id, ok
}

// A topic deleted while no sidecar ran, its RemoveTopicRecord covered by a
// metadata snapshot before a sidecar started again: no logged deletion
// reports it. The restarted sidecar's metadata (a KRaft image: the whole
// state, later than the one the bucket's lineage was seen live in) no
// longer holds the topic, or holds another ID under its name (re-created
// while down, the new incarnation not uploaded yet): the lineage is marked
// deleted, and no longer served.
func TestReconcileDeletedWhileDown(t *testing.T) {
	for name, ids := range map[string]map[string]string{
		"deleted":    {"keep": lineB, "__consumer_offsets": rcOffsets},
		"re-created": {"orders": lineB, "__consumer_offsets": rcOffsets},
	} {
		t.Run(name, func(t *testing.T) {
			mem := rcUploaded(t, rcView(rcCluster, 10, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets}))
			s, _, err := remotelog.ReadTopicVersion(context.Background(), mem, "", "orders")
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := s.Proof(); !ok || !p.Equal(manifest.LineageProof{ClusterID: rcCluster, MetadataOffset: 10, Witnesses: []string{rcOffsets}}) {
				t.Fatalf("proof recorded by the first pass: %+v, %v (configs %v)", p, ok, s.Configs)
			}
			view := rcView(rcCluster, 20, ids)
			rep, err := rcRestart(t, mem, func(context.Context) (*LiveTopics, error) { return view, nil })
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := rcServed(t, mem); ok {
				t.Fatalf("orders, deleted while no sidecar ran, is still served (lineage %s)", id)
			}
			if rep.ReconciledTopics != 1 {
				t.Fatalf("reconciled %d topics, want 1", rep.ReconciledTopics)
			}
			s, _, err = remotelog.ReadTopicVersion(context.Background(), mem, "", "orders")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Superseded) != 1 || s.Superseded[0].TopicID != lineA || s.Superseded[0].Reason != manifest.ReasonDeleted {
				t.Fatalf("superseded %+v, want lineage %s deleted", s.Superseded, lineA)
			}
			// The new incarnation uploads into its own lineage.
			if name == "re-created" {
				d := upOpenDir(t, t.TempDir())
				upTopic(t, d, "orders", 1)
				upSegments(t, upPartition(t, d, "orders", 0), 1, 5, 10, 50)
				o := Options{LiveTopics: func(context.Context) (*LiveTopics, error) { return view, nil }}
				if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineB}, o).RunOnce(context.Background()); err != nil {
					t.Fatal(err)
				}
				if id, ok := rcServed(t, mem); !ok || id != lineB {
					t.Fatalf("the re-created topic serves %q, %v; want %s", id, ok, lineB)
				}
			}
		})
	}
}

// Only proof deletes: a lineage recorded by another cluster, one without a
// proof (an older release, serve, a source without a cluster ID), a view
// that failed, none (a bootstrap server's listing, partition.metadata), a
// view not later than the metadata the lineage was seen live in (this
// broker's metadata log lags), or one holding the name under an unknown ID
// leave the lineage served.
func TestReconcileDeletedGuards(t *testing.T) {
	seen := rcView(rcCluster, 10, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets})
	gone := rcView(rcCluster, 20, map[string]string{"__consumer_offsets": rcOffsets})
	ok := func(v *LiveTopics) func(context.Context) (*LiveTopics, error) {
		return func(context.Context) (*LiveTopics, error) { return v, nil }
	}
	for _, tt := range []struct {
		name    string
		first   *LiveTopics
		live    func(context.Context) (*LiveTopics, error)
		wantErr bool
	}{
		{name: "other cluster", first: seen, live: ok(rcView(rcOther, 20, map[string]string{"__consumer_offsets": rcOffsets}))},
		// The same cluster.id formatted again: a new metadata history,
		// whose offsets passed the proof's, holds none of its witnesses.
		{name: "re-formatted with the same cluster id", first: seen, live: ok(rcView(rcCluster, 20, map[string]string{"__consumer_offsets": rcNewHistory}))},
		{name: "re-formatted, the name re-created", first: seen, live: ok(rcView(rcCluster, 20, map[string]string{"orders": lineB, "__consumer_offsets": rcNewHistory}))},
		{name: "no witness when proved", first: rcView(rcCluster, 10, map[string]string{"orders": lineA}), live: ok(gone)},
		{name: "witnesses deleted too", first: seen, live: ok(rcView(rcCluster, 20, map[string]string{"keep": lineB}))},
		{name: "no proof", first: nil, live: ok(gone)},
		{name: "first view without a cluster id", first: rcView("", 10, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets}), live: ok(gone)},
		{name: "first view did not hold the id", first: rcView(rcCluster, 10, map[string]string{"orders": lineB, "__consumer_offsets": rcOffsets}), live: ok(gone)},
		{name: "source error", first: seen, live: func(context.Context) (*LiveTopics, error) { return gone, errors.New("metadata log unreadable") }, wantErr: true},
		{name: "not authoritative", first: seen, live: ok(nil)},
		{name: "same offset", first: seen, live: ok(rcView(rcCluster, 10, map[string]string{"__consumer_offsets": rcOffsets}))},
		{name: "lagging metadata", first: seen, live: ok(rcView(rcCluster, 5, map[string]string{"__consumer_offsets": rcOffsets}))},
		{name: "unknown offset", first: seen, live: ok(rcView(rcCluster, -1, map[string]string{"__consumer_offsets": rcOffsets}))},
		{name: "unknown id", first: seen, live: ok(rcView(rcCluster, 20, map[string]string{"orders": "", "__consumer_offsets": rcOffsets}))},
		{name: "still live", first: seen, live: ok(rcView(rcCluster, 20, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := rcUploaded(t, tt.first)
			rep, err := rcRestart(t, mem, tt.live)
			if (err != nil) != tt.wantErr {
				t.Fatalf("pass: %v", err)
			}
			if id, ok := rcServed(t, mem); !ok || id != lineA {
				t.Fatalf("orders serves %q, %v after the restart; want %s", id, ok, lineA)
			}
			if rep.ReconciledTopics != 0 {
				t.Fatalf("reconciled %d", rep.ReconciledTopics)
			}
		})
	}
}

// A proof's witnesses follow its history: a proof recorded without any (by
// the release before witnesses, or from a metadata holding no other
// topic) gets them from the first metadata that holds its lineage and
// others, and one whose witness was deleted gets the current ones, while
// the proof takes that metadata's offset too. Only then can the lineage be found
// deleted.
func TestReconcileWitnessesRefreshed(t *testing.T) {
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	upSegments(t, upPartition(t, d, "orders", 0), 2, 5, 10, 50)
	var view *LiveTopics
	o := Options{LiveTopics: func(context.Context) (*LiveTopics, error) { return view, nil }}
	pass := func(v *LiveTopics) manifest.LineageProof {
		t.Helper()
		view = v
		if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, o).RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		s, _, err := remotelog.ReadTopicVersion(context.Background(), mem, "", "orders")
		if err != nil {
			t.Fatal(err)
		}
		p, ok := s.Proof()
		if !ok {
			t.Fatalf("no proof (configs %v)", s.Configs)
		}
		return p
	}
	want := func(p manifest.LineageProof, off int64, witnesses ...string) {
		t.Helper()
		if w := (manifest.LineageProof{ClusterID: rcCluster, MetadataOffset: off, Witnesses: witnesses}); !p.Equal(w) {
			t.Fatalf("proof %+v, want %+v", p, w)
		}
	}
	want(pass(rcView(rcCluster, 10, map[string]string{"orders": lineA})), 10)
	// Internal topics first, then the others by ID; never the lineage's own.
	want(pass(rcView(rcCluster, 15, map[string]string{"orders": lineA, "b": lineB, "__transaction_state": rcTxn, "__consumer_offsets": rcOffsets})),
		15, rcOffsets, rcTxn, lineB)
	// Unchanged while every witness is live.
	want(pass(rcView(rcCluster, 16, map[string]string{"orders": lineA, "b": lineB, "__transaction_state": rcTxn, "__consumer_offsets": rcOffsets, "c": rcNewHistory})),
		15, rcOffsets, rcTxn, lineB)
	// b deleted: the witnesses are the live ones again.
	want(pass(rcView(rcCluster, 17, map[string]string{"orders": lineA, "__transaction_state": rcTxn, "__consumer_offsets": rcOffsets, "c": rcNewHistory})),
		17, rcOffsets, rcTxn, rcNewHistory)
	// A view of another cluster changes nothing.
	want(pass(rcView(rcOther, 30, map[string]string{"orders": lineA, "__consumer_offsets": lineB})),
		17, rcOffsets, rcTxn, rcNewHistory)
	// Deleted while down, its earlier witnesses gone but c still live.
	rep, err := rcRestart(t, mem, func(context.Context) (*LiveTopics, error) {
		return rcView(rcCluster, 40, map[string]string{"c": rcNewHistory}), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := rcServed(t, mem); ok || rep.ReconciledTopics != 1 {
		t.Fatalf("orders serves %q, %v (reconciled %d); want it deleted", id, ok, rep.ReconciledTopics)
	}
}
