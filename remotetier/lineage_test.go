package remotetier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

const (
	lineA = "o3Bx6y0QQxyxS2FrDcDiOw"
	lineB = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// idSource gives every partition of its source topic ID id (as a broker's
// partition.metadata does; "" leaves it without one).
type idSource struct {
	Source
	id string
}

func (s idSource) Partitions(ctx context.Context) ([]Partition, error) {
	ps, err := s.Source.Partitions(ctx)
	for i := range ps {
		ps[i].TopicID = s.id
	}
	return ps, err
}

// lineageKeys lists the bucket's keys in topic's partition directories of
// the lineage keyID.
func lineageKeys(t testing.TB, b objstore.BucketReader, topic, keyID string) []string {
	t.Helper()
	var out []string
	for _, k := range upKeys(t, b) {
		pk, err := manifest.ParseKey(k)
		if err == nil && pk.Topic == topic && pk.TopicID == keyID {
			out = append(out, k)
		}
	}
	return out
}

// The re-creation scenario at the uploader: topic orders uploaded under ID
// A, deleted and re-created under ID B with other records. The new lineage
// starts empty in its own directories and reads back exactly the new log;
// a stale log dir of A is refused; A is removed after the retention, B is
// untouched.
func TestLineageRecreation(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()

	oldDir := upOpenDir(t, t.TempDir())
	upTopic(t, oldDir, "orders", 1)
	oldLog := upPartition(t, oldDir, "orders", 0)
	upSegments(t, oldLog, 4, 5, 10, 50) // offsets 0-209
	u := upUploader(t, mem, idSource{NewLocalSource(oldDir, nil), lineA}, Options{})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	upCheckRemote(t, mem, oldLog, "orders", 0, 200)
	if len(lineageKeys(t, mem, "orders", lineA)) == 0 || len(lineageKeys(t, mem, "orders", "")) != 0 {
		t.Fatal("lineage A was not written to its own directories")
	}

	newDir := upOpenDir(t, t.TempDir())
	upTopic(t, newDir, "orders", 1)
	newLog := upPartition(t, newDir, "orders", 0)
	upSegments(t, newLog, 2, 5, 10, 70) // offsets 0-109, other bytes
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "orders", 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u2 := upUploader(t, mem, idSource{NewLocalSource(newDir, nil), lineB}, Options{})
	rep, err := u2.RunOnce(ctx)
	if err != nil || rep.UploadedSegments != 2 {
		t.Fatalf("upload of the new lineage: %+v, %v", rep, err)
	}
	upCheckRemote(t, mem, newLog, "orders", 0, 100)
	// A reader opened on the old lineage moves to the new one at its next
	// refresh: offsets past the new end are out of range, never old data.
	if _, err := rl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if rl.TopicID() != lineB || rl.LogEndOffset() != 100 {
		t.Fatalf("after refresh: topic id %q, end %d", rl.TopicID(), rl.LogEndOffset())
	}
	if _, err := rl.Read(ctx, 150, 1); err == nil {
		t.Fatal("offset 150 of the old lineage served after re-creation")
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders")
	if err != nil || st.Current.TopicID != lineB || len(st.Superseded) != 1 || st.Superseded[0].TopicID != lineA {
		t.Fatalf("topic object %+v, %v", st, err)
	}

	// The old uploader, still seeing the old log dir, is refused.
	before := lineageKeys(t, mem, "orders", lineA)
	upAppend(t, oldLog, 5, 10, upKey, 50)
	if err := oldLog.Roll(); err != nil {
		t.Fatal(err)
	}
	rep, err = u.RunOnce(ctx)
	if err != nil || rep.RefusedPartitions != 1 || rep.UploadedSegments != 0 {
		t.Fatalf("stale lineage: %+v, %v", rep, err)
	}
	if got := testutil.ToFloat64(u.lineageMetrics.refused); got != 1 {
		t.Fatalf("tiered_uploader_refused_partitions_total %v, want 1", got)
	}
	if after := lineageKeys(t, mem, "orders", lineA); len(after) != len(before) {
		t.Fatalf("the superseded lineage was written to: %d keys, then %d", len(before), len(after))
	}

	// Removal after the retention: not before it.
	superseded := time.UnixMilli(st.Superseded[0].SupersededMs)
	if lr, err := RemoveExpiredLineages(ctx, mem, "", time.Hour, superseded.Add(time.Hour-time.Millisecond), nil); err != nil || lr.Lineages != 0 {
		t.Fatalf("removal within the retention: %+v, %v", lr, err)
	}
	lr, err := RemoveExpiredLineages(ctx, mem, "", time.Hour, superseded.Add(time.Hour), nil)
	if err != nil || lr.Lineages != 1 || lr.DeletedObjects != len(before) {
		t.Fatalf("removal: %+v (want %d objects), %v", lr, len(before), err)
	}
	if left := lineageKeys(t, mem, "orders", lineA); len(left) != 0 {
		t.Fatalf("lineage A left: %v", left)
	}
	upCheckRemote(t, mem, newLog, "orders", 0, 100)
	// Kept as removed (no partitions left): its ID stays refused.
	if st, _, _ := remotelog.ReadTopicVersion(ctx, mem, "", "orders"); len(st.Superseded) != 1 || st.Superseded[0].TopicID != lineA || st.Superseded[0].Partitions != 0 {
		t.Fatalf("the removed lineage is not kept as removed: %+v", st.Superseded)
	}
	// Idempotent: a second sidecar running the same removal finds nothing.
	if lr, err := RemoveExpiredLineages(ctx, mem, "", time.Hour, superseded.Add(2*time.Hour), nil); err != nil || lr.Lineages != 0 {
		t.Fatalf("second removal: %+v, %v", lr, err)
	}
}

// Upgrade of an existing bucket: partitions uploaded without a topic ID
// (name-only), then the broker gives the topic an ID: the ID adopts the
// name-only lineage, uploads continue in it, and readers see the ID.
func TestLineageUpgradeAdopts(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	l := upPartition(t, d, "orders", 0)
	upSegments(t, l, 2, 5, 10, 50)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), ""}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders"); st != nil || err != nil {
		t.Fatalf("a topic without an ID got a topic object: %+v, %v", st, err)
	}
	gen := upLoad(t, mem, "orders", 0).Generation
	upSegments(t, l, 1, 5, 10, 50)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders")
	if err != nil || st.Current.TopicID != lineA || !st.Current.NameOnlyKeys {
		t.Fatalf("topic object %+v, %v", st, err)
	}
	m := upLoad(t, mem, "orders", 0)
	if m.TopicID != "" || m.Generation <= gen || len(lineageKeys(t, mem, "orders", lineA)) != 0 {
		t.Fatalf("adopted lineage: manifest topic id %q generation %d (was %d)", m.TopicID, m.Generation, gen)
	}
	upCheckRemote(t, mem, l, "orders", 0, 160)
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "orders", 0, remotelog.ReaderOptions{})
	if err != nil || rl.TopicID() != lineA {
		t.Fatalf("reader: %v, topic id %q", err, rl.TopicID())
	}
	// A partition losing its ID under a topic that has one is refused.
	rep, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), ""}, Options{}).RunOnce(ctx)
	if err != nil || rep.RefusedPartitions != 1 {
		t.Fatalf("no id under an id: %+v, %v", rep, err)
	}
}

// A deleted topic is no longer served; the lineage stays until removed.
func TestMarkTopicDeleted(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 2)
	upSegments(t, upPartition(t, d, "orders", 1), 2, 5, 10, 50)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := MarkTopicDeleted(ctx, mem, "", "orders", 2, upNow); err != nil {
		t.Fatal(err)
	}
	var ue *remotelog.UnknownTopicOrPartitionError
	if _, err := remotelog.OpenRemoteLog(ctx, mem, "", "orders", 1, remotelog.ReaderOptions{}); !errors.As(err, &ue) || !ue.Deleted {
		t.Fatalf("deleted topic opened: %v", err)
	}
	if len(lineageKeys(t, mem, "orders", lineA)) == 0 {
		t.Fatal("the lineage was removed at once")
	}
	lr, err := RemoveExpiredLineages(ctx, mem, "", 0, upNow, nil)
	if err != nil || lr.Lineages != 1 || len(lineageKeys(t, mem, "orders", lineA)) != 0 {
		t.Fatalf("retention 0: %+v, %v, left %v", lr, err, lineageKeys(t, mem, "orders", lineA))
	}
	// A topic never given an object: its name-only lineage is deleted.
	if err := MarkTopicDeleted(ctx, mem, "", "logs", 3, upNow); err != nil {
		t.Fatal(err)
	}
	if _, _, err := remotelog.ResolveTopic(ctx, mem, "", "logs"); !errors.Is(err, remotelog.ErrTopicDeleted) {
		t.Fatalf("logs: %v", err)
	}
	if lr, err := RemoveExpiredLineages(ctx, mem, "", -1, upNow.Add(1000*time.Hour), nil); err != nil || lr.Lineages != 0 {
		t.Fatalf("retention -1 removed: %+v, %v", lr, err)
	}
}

// Two writers updating one topic object at once lose nothing: every
// update is a conditional PUT, the loser re-reads and applies again.
func TestTopicObjectRace(t *testing.T) {
	t.Run("memory", func(t *testing.T) { topicObjectRace(t, objstore.NewMemory()) })
	t.Run("minio", func(t *testing.T) {
		srv := testminio.Shared(t)
		testminio.SetCredentialsEnv(t)
		b, err := objstore.Open(context.Background(), srv.URL(srv.NewBucket(t), "race"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		topicObjectRace(t, b)
	})
}

func topicObjectRace(t *testing.T, mem objstore.Bucket) {
	ctx := context.Background()
	const writers, updates = 2, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*updates)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range updates {
				_, err := UpdateTopicState(ctx, mem, "", "orders", func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
					cfg := map[string]string{}
					if s != nil {
						for k, v := range s.Configs {
							cfg[k] = v
						}
					}
					cfg[fmt.Sprintf("w%d.%d", w, i)] = "x"
					n, _, write, err := manifest.ObserveTopic("", "orders", s, manifest.Observation{TopicID: lineA, Partitions: int32(i + 1), Configs: cfg, NowMs: 1})
					return n, write, err
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !strings.Contains(err.Error(), "conditional writes lost") {
			t.Fatal(err)
		}
		t.Fatalf("a writer gave up: %v", err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Configs) != writers*updates || st.Current.Partitions != updates {
		t.Fatalf("%d configs (want %d), %d partitions: an update was lost", len(st.Configs), writers*updates, st.Current.Partitions)
	}
}

// Upgrade where the topic was re-created before its first ID was seen: the
// bucket's name-only lineage ends past the new partition's high watermark,
// so it is another incarnation, superseded rather than adopted, and the
// new ID starts its own lineage.
func TestLineageUpgradeForeign(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	oldDir := upOpenDir(t, t.TempDir())
	upTopic(t, oldDir, "orders", 1)
	upSegments(t, upPartition(t, oldDir, "orders", 0), 4, 5, 10, 50)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(oldDir, nil), ""}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	oldKeys := lineageKeys(t, mem, "orders", "")
	newDir := upOpenDir(t, t.TempDir())
	upTopic(t, newDir, "orders", 1)
	l := upPartition(t, newDir, "orders", 0)
	upSegments(t, l, 2, 5, 10, 70)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(newDir, nil), lineB}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _, err := remotelog.ReadTopicVersion(ctx, mem, "", "orders")
	if err != nil || st.Current.NameOnlyKeys || st.Current.TopicID != lineB || len(st.Superseded) != 1 || !st.Superseded[0].NameOnlyKeys {
		t.Fatalf("topic object %+v, %v", st, err)
	}
	upCheckRemote(t, mem, l, "orders", 0, 100)
	if got := lineageKeys(t, mem, "orders", ""); len(got) != len(oldKeys) {
		t.Fatalf("the name-only lineage changed: %d keys, was %d", len(got), len(oldKeys))
	}
	if lr, err := RemoveExpiredLineages(ctx, mem, "", 0, upNow, nil); err != nil || lr.Lineages != 1 || len(lineageKeys(t, mem, "orders", "")) != 0 {
		t.Fatalf("removal of the name-only lineage: %+v, %v", lr, err)
	}
	upCheckRemote(t, mem, l, "orders", 0, 100)
}

// The broker's deletions reach the bucket on the next pass: the deleted
// ID stops being served, a deletion of an older ID changes nothing, and
// the stale partition directory of the deleted ID is not uploaded again.
func TestUploaderDeletedTopics(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	upSegments(t, upPartition(t, d, "orders", 0), 2, 5, 10, 50)
	var deleted []DeletedTopic
	asked := 0
	u := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, Options{
		DeletedTopics: func(context.Context) ([]DeletedTopic, error) { asked++; return deleted, nil }})
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	deleted = []DeletedTopic{{Name: "orders", TopicID: lineB}} // another incarnation
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := remotelog.ResolveTopic(ctx, mem, "", "orders"); err != nil {
		t.Fatalf("a deletion of another id deleted the topic: %v", err)
	}
	deleted = append(deleted, DeletedTopic{Name: "orders", TopicID: lineA})
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.RefusedPartitions != 1 {
		t.Fatalf("pass after the deletion: %+v, %v", rep, err)
	}
	// Retention 0 (Options zero value with RemoveLineages): removed on the
	// next pass, counted.
	u.opts.RemoveLineages = true
	if rep, err := u.RunOnce(ctx); err != nil || rep.RemovedLineages != 1 || testutil.ToFloat64(u.lineageMetrics.removed) != 1 {
		t.Fatalf("removal pass: %+v, %v", rep, err)
	}
	if left := lineageKeys(t, mem, "orders", lineA); len(left) != 0 {
		t.Fatalf("left after the removal pass: %v", left)
	}
	if _, _, err := remotelog.ResolveTopic(ctx, mem, "", "orders"); !errors.Is(err, remotelog.ErrTopicDeleted) {
		t.Fatalf("deleted topic still served: %v", err)
	}
	if asked != 4 {
		t.Fatalf("deletions asked %d times in 4 passes", asked)
	}
}

func TestServedLineage(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	if k, ok, err := ServedLineage(ctx, mem, "", "orders"); k != "" || !ok || err != nil {
		t.Fatalf("no topic object: %q %v %v", k, ok, err)
	}
	if _, err := UpdateTopicState(ctx, mem, "", "orders", func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
		n, _, w, err := manifest.ObserveTopic("", "orders", s, manifest.Observation{TopicID: lineA, Partitions: 1, NowMs: 1})
		return n, w, err
	}); err != nil {
		t.Fatal(err)
	}
	if k, ok, err := ServedLineage(ctx, mem, "", "orders"); k != lineA || !ok || err != nil {
		t.Fatalf("current lineage: %q %v %v", k, ok, err)
	}
	if err := MarkTopicDeleted(ctx, mem, "", "orders", 1, upNow); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ServedLineage(ctx, mem, "", "orders"); ok || err != nil {
		t.Fatalf("deleted: %v %v", ok, err)
	}
}

// Several sidecars removing the same expired lineage at once: it is
// removed once, completely, and nothing of the current lineage goes.
func TestRemoveLineageConcurrent(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	for i, id := range []string{lineA, lineB} {
		d := upOpenDir(t, t.TempDir())
		upTopic(t, d, "orders", 2)
		for p := int32(0); p < 2; p++ {
			upSegments(t, upPartition(t, d, "orders", p), 2+i, 5, 10, 50)
		}
		if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), id}, Options{}).RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	keepB := len(lineageKeys(t, mem, "orders", lineB))
	var wg sync.WaitGroup
	reps := make([]LineageReport, 3)
	errs := make([]error, 3)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = RemoveExpiredLineages(ctx, mem, "", 0, upNow, nil)
		}()
	}
	wg.Wait()
	removed := 0
	for i := range reps {
		if errs[i] != nil {
			t.Fatalf("remover %d: %v", i, errs[i])
		}
		removed += reps[i].Lineages
	}
	if removed != 1 {
		t.Fatalf("lineage removed %d times", removed)
	}
	if left := lineageKeys(t, mem, "orders", lineA); len(left) != 0 {
		t.Fatalf("left of lineage A: %v", left)
	}
	if got := len(lineageKeys(t, mem, "orders", lineB)); got != keepB {
		t.Fatalf("lineage B has %d keys, had %d", got, keepB)
	}
}

// Garbage collection and bucket verify treat each lineage as its own
// partition: with two lineages of orders (re-created) nothing referenced
// is collected, the bucket verifies clean, the topic object is not
// foreign; an orphan in the new lineage's directory is found and
// collected there.
func TestLineagesGCAndVerify(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	for i, id := range []string{lineA, lineB} {
		d := upOpenDir(t, t.TempDir())
		upTopic(t, d, "orders", 1)
		upSegments(t, upPartition(t, d, "orders", 0), 2+i, 5, 10, 50)
		if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), id}, Options{}).RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	orphan, err := manifest.DataKeysID("", "orders", lineB, 0, 999, manifest.NewAttemptID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Put(ctx, orphan.Log, strings.NewReader("x"), 1, objstore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	late := func() time.Time { return time.Now().Add(48 * time.Hour) }
	rep, err := VerifyBucket(ctx, mem, VerifyOptions{Grace: time.Hour, Now: late})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || rep.ForeignCount != 0 || len(rep.Partitions) != 2 || len(rep.Orphans) != 1 || rep.Orphans[0].Key != orphan.Log {
		t.Fatalf("verify: problems %v, foreign %v, partitions %+v, orphans %+v", rep.Problems, rep.Foreign, rep.Partitions, rep.Orphans)
	}
	ids := map[string]bool{}
	for _, p := range rep.Partitions {
		ids[p.TopicID] = p.HasRoot && p.Segments > 0
	}
	if !ids[lineA] || !ids[lineB] {
		t.Fatalf("verified lineages %v", ids)
	}
	before := map[string]bool{}
	for _, k := range upKeys(t, mem) {
		before[k] = true
	}
	gc, err := GC(ctx, mem, GCOptions{Grace: time.Hour, Now: late})
	if err != nil || len(gc.Deleted) != 1 || gc.Deleted[0].Key != orphan.Log || len(gc.Skipped) != 0 {
		t.Fatalf("gc: %+v, %v", gc, err)
	}
	for _, k := range upKeys(t, mem) {
		if !before[k] {
			t.Fatalf("gc added %s", k)
		}
	}
	if got := len(upKeys(t, mem)); got != len(before)-1 {
		t.Fatalf("gc deleted %d objects, want 1", len(before)-got)
	}
}
