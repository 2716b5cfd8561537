package remotetier

import (
	"context"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Two sidecars of one history whose views differ (one broker's metadata log
// lags: a topic x created, a topic y deleted since its offset; both among
// the first witness candidates) rewrite the topic object on every pass,
// each replacing the other's witnesses: the lagging view does not hold x,
// the current one no longer holds y. docs/format/topic-object.md says a
// topic object is written only when a witness topic is deleted.
func TestReviewWitnessesTwoViewsChurn(t *testing.T) {
	mem := objstore.NewMemory()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "orders", 1)
	upSegments(t, upPartition(t, d, "orders", 0), 2, 5, 10, 50)
	const x, y = "AAAAAAAAAAAAAAAAAAAAAw", "AAAAAAAAAAAAAAAAAAAABA" // small IDs: first after the internal topics
	current := rcView(rcCluster, 100, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets, "x": x, "b": lineB})
	lagging := rcView(rcCluster, 90, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets, "y": y, "b": lineB})
	var view *LiveTopics
	o := Options{LiveTopics: func(context.Context) (*LiveTopics, error) { return view, nil }}
	pass := func(v *LiveTopics) string {
		t.Helper()
		view = v
		if _, err := upUploader(t, mem, idSource{NewLocalSource(d, nil), lineA}, o).RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, etag, err := remotelog.ReadTopicVersion(context.Background(), mem, "", "orders")
		if err != nil {
			t.Fatal(err)
		}
		return etag
	}
	pass(current)
	pass(lagging)
	writes := 0
	last := pass(current)
	for i := range 6 {
		v := lagging
		if i%2 == 1 {
			v = current
		}
		if e := pass(v); e != last {
			writes++
			last = e
		}
	}
	if writes != 0 {
		t.Fatalf("the topic object was rewritten on %d of 6 passes with no topic created or deleted", writes)
	}
}
