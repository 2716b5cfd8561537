package remotetier

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// A pass of lineage A is uploading when another sidecar sees the topic
// re-created (lineage B) and, the deleted-topic retention being 0, removes
// A at once. The pass's commit must not bring A's manifest back: a removed
// lineage is never removed again, so its objects would stay for ever.
func TestRemovedLineageNotResurrectedByPassInFlight(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	dir := upOpenDir(t, t.TempDir())
	upTopic(t, dir, "orders", 1)
	upSegments(t, upPartition(t, dir, "orders", 0), 2, 5, 10, 50)
	removed := false
	var remove func()
	var once sync.Once
	hook := func() { once.Do(remove) }
	remove = func() {
		_, err := UpdateTopicState(ctx, mem, "", "orders", func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
			next, _, write, err := manifest.ObserveTopic("", "orders", s, manifest.Observation{TopicID: lineB, Partitions: 1, NowMs: upNow.UnixMilli()})
			return next, write, err
		})
		if err != nil {
			t.Error(err)
			return
		}
		lr, err := RemoveExpiredLineages(ctx, mem, "", 0, upNow.Add(time.Minute), nil)
		if err != nil || lr.Lineages != 1 {
			t.Errorf("removal of lineage A: %+v, %v", lr, err)
		}
		removed = true
	}
	u := upUploader(t, mem, hookSource{idSource{NewLocalSource(dir, nil), lineA}, hook}, Options{})
	_, _ = u.RunOnce(ctx)
	if !removed {
		t.Fatal("lineage A was not removed during the pass")
	}
	if _, err := RemoveExpiredLineages(ctx, mem, "", 0, upNow.Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := GC(ctx, mem, GCOptions{Grace: time.Nanosecond, Now: func() time.Time { return time.Now().Add(time.Hour) }}); err != nil {
		t.Fatal(err)
	}
	if keys := lineageKeys(t, mem, "orders", lineA); len(keys) != 0 {
		t.Fatalf("the removed lineage A is in the bucket again, for good: %v", keys)
	}
}
