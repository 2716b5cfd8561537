package remotetier

import (
	"context"
	"testing"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// A lineage removed after the deleted-topic retention must stay refused: a
// sidecar whose broker still has the old incarnation's directory (a broker
// that was down while the topic was re-created, a sidecar lagging its
// broker) must not make the removed topic ID current again. Without the
// removed IDs remembered, the stale partition's ID looks new: it supersedes
// the live lineage B (whose uploads are then refused for ever and whose data
// is removed after the retention) and the old incarnation is served again.
func TestRemovedLineageStaysRefused(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()

	oldDir := upOpenDir(t, t.TempDir())
	upTopic(t, oldDir, "orders", 1)
	oldLog := upPartition(t, oldDir, "orders", 0)
	upSegments(t, oldLog, 4, 5, 10, 50)
	uOld := upUploader(t, mem, idSource{NewLocalSource(oldDir, nil), lineA}, Options{})
	if _, err := uOld.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}

	newDir := upOpenDir(t, t.TempDir())
	upTopic(t, newDir, "orders", 1)
	newLog := upPartition(t, newDir, "orders", 0)
	upSegments(t, newLog, 2, 5, 10, 70)
	uNew := upUploader(t, mem, idSource{NewLocalSource(newDir, nil), lineB}, Options{})
	if rep, err := uNew.RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("upload of the new lineage: %+v, %v", rep, err)
	}
	// The deleted-topic retention passes: lineage A is removed.
	if lr, err := RemoveExpiredLineages(ctx, mem, "", 0, time.Now().Add(time.Hour), nil); err != nil || lr.Lineages != 1 {
		t.Fatalf("removal: %+v, %v", lr, err)
	}

	// The stale log dir of A is seen again.
	rep, err := uOld.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if st.Current == nil || st.Current.TopicID != lineB {
		t.Fatalf("after a stale partition of the removed lineage was seen, the current lineage is %+v (superseded %+v), want %s", st.Current, st.Superseded, lineB)
	}
	if rep.RefusedPartitions != 1 || rep.UploadedSegments != 0 {
		t.Fatalf("stale partition of a removed lineage: %+v", rep)
	}
	if keys := lineageKeys(t, mem, "orders", lineA); len(keys) != 0 {
		t.Fatalf("the removed lineage was written again: %v", keys)
	}
	// The live lineage still uploads.
	upAppend(t, newLog, 5, 10, upKey, 70)
	if err := newLog.Roll(); err != nil {
		t.Fatal(err)
	}
	if rep, err := uNew.RunOnce(ctx); err != nil || rep.RefusedPartitions != 0 || rep.UploadedSegments != 1 {
		t.Fatalf("the live lineage after the stale one was seen: %+v, %v", rep, err)
	}
	upCheckRemote(t, mem, newLog, "orders", 0, 160)
}

// epochSource gives every partition of its source the leader epochs es (as
// a broker's leader-epoch-checkpoint does).
type epochSource struct {
	Source
	es []manifest.EpochEntry
}

func (s epochSource) Partitions(ctx context.Context) ([]Partition, error) {
	ps, err := s.Source.Partitions(ctx)
	for i := range ps {
		ps[i].LeaderEpochs = s.es
	}
	return ps, err
}

// An unclean leader election: the old leader uploaded offsets [0, 100) in
// epoch 5; the new leader had only [0, 40) and wrote other records from 40
// on in epoch 6. Its log is not the history the bucket holds from 40 on:
// appending its batches from 100 on would serve [40, 100) of one history
// and [100, ...) of another as one log. The uploader must not append past
// the committed end while the local epochs disagree with the committed
// ones at that end.
func TestUploadRefusesDivergedLeaderHistory(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()

	oldDir := upOpenDir(t, t.TempDir())
	upTopic(t, oldDir, "orders", 1)
	oldLog := upPartition(t, oldDir, "orders", 0)
	upSegments(t, oldLog, 2, 5, 10, 50) // rolled [0, 100)
	oldEpochs := []manifest.EpochEntry{{Epoch: 4, StartOffset: 0}, {Epoch: 5, StartOffset: 30}}
	if rep, err := upUploader(t, mem, epochSource{NewLocalSource(oldDir, nil), oldEpochs}, Options{}).RunOnce(ctx); err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("old leader: %+v, %v", rep, err)
	}

	newDir := upOpenDir(t, t.TempDir())
	upTopic(t, newDir, "orders", 1)
	newLog := upPartition(t, newDir, "orders", 0)
	upAppend(t, newLog, 4, 10, upKey, 50) // [0, 40): the common history
	if err := newLog.Roll(); err != nil {
		t.Fatal(err)
	}
	upAppend(t, newLog, 10, 10, upKey, 90) // [40, 140): the new leader's own
	if err := newLog.Roll(); err != nil {
		t.Fatal(err)
	}
	upAppend(t, newLog, 1, 10, upKey, 90)
	newEpochs := []manifest.EpochEntry{{Epoch: 4, StartOffset: 0}, {Epoch: 5, StartOffset: 30}, {Epoch: 6, StartOffset: 40}}
	rep, err := upUploader(t, mem, epochSource{NewLocalSource(newDir, nil), newEpochs}, Options{}).RunOnce(ctx)
	if m := upLoad(t, mem, "orders", 0); m.NextOffset() != 100 {
		t.Fatalf("the new leader's diverged history was appended to the old one: remote end %d, want 100 (report %+v)", m.NextOffset(), rep)
	}
	if err == nil {
		t.Fatalf("a diverged history was not reported: %+v", rep)
	}

	// A clean leader change (the new epoch starts past the committed end)
	// appends as before.
	cleanEpochs := []manifest.EpochEntry{{Epoch: 4, StartOffset: 0}, {Epoch: 5, StartOffset: 30}, {Epoch: 6, StartOffset: 110}}
	upAppend(t, oldLog, 5, 10, upKey, 50)
	if err := oldLog.Roll(); err != nil {
		t.Fatal(err)
	}
	if rep, err := upUploader(t, mem, epochSource{NewLocalSource(oldDir, nil), cleanEpochs}, Options{}).RunOnce(ctx); err != nil || rep.UploadedSegments != 1 {
		t.Fatalf("clean leader change: %+v, %v", rep, err)
	}
	upCheckRemote(t, mem, oldLog, "orders", 0, 160)
}

// dropSource lists only the partitions of its source whose topic keep
// returns true for (a broker whose topics are deleted).
type dropSource struct {
	Source
	keep func(topic string) bool
}

func (s dropSource) Partitions(ctx context.Context) ([]Partition, error) {
	ps, err := s.Source.Partitions(ctx)
	out := ps[:0]
	for _, p := range ps {
		if s.keep(p.Topic) {
			out = append(out, p)
		}
	}
	return out, err
}

// A sidecar beside a broker whose topics are created and deleted all the
// time (test runs, stream apps resetting their internal topics) must not
// keep every partition it ever uploaded in memory: the per-partition state
// (with its cached manifest) of a partition no pass lists any more goes.
func TestUploaderForgetsDeletedPartitions(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	for _, topic := range []string{"run-1", "run-2", "keep"} {
		upTopic(t, d, topic, 2)
		for p := int32(0); p < 2; p++ {
			upSegments(t, upPartition(t, d, topic, p), 1, 2, 10, 20)
		}
	}
	deleted := map[string]bool{}
	u := upUploader(t, mem, dropSource{NewLocalSource(d, nil), func(topic string) bool { return !deleted[topic] }}, Options{})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 6 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	deleted["run-1"], deleted["run-2"] = true, true
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range u.state {
		if deleted[k.topic] {
			t.Errorf("state of %s-%d kept after its topic was deleted", k.topic, k.partition)
		}
	}
	if len(u.state) != 2 {
		t.Errorf("%d partition states, want the 2 of the live topic", len(u.state))
	}
}
