package remotetier

import (
	"context"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestRemoveForeignNameOnlyLineageAllPartitions: a topic uploaded before
// topic IDs with 2 partitions, re-created with 1 partition before its ID
// was first seen: the name-only lineage is superseded as foreign, and its
// removal must remove both of its partitions, not only the new topic's.
func TestRemoveForeignNameOnlyLineageAllPartitions(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	oldDir := upOpenDir(t, t.TempDir())
	upTopic(t, oldDir, "orders", 2)
	for p := int32(0); p < 2; p++ {
		upSegments(t, upPartition(t, oldDir, "orders", p), 4, 5, 10, 50)
	}
	if _, err := upUploader(t, mem, idSource{NewLocalSource(oldDir, nil), ""}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	newDir := upOpenDir(t, t.TempDir())
	upTopic(t, newDir, "orders", 1)
	upSegments(t, upPartition(t, newDir, "orders", 0), 2, 5, 10, 70)
	if _, err := upUploader(t, mem, idSource{NewLocalSource(newDir, nil), lineB}, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := RemoveExpiredLineages(ctx, mem, "", 0, upNow, nil); err != nil {
		t.Fatal(err)
	}
	if left := lineageKeys(t, mem, "orders", ""); len(left) != 0 {
		t.Fatalf("the removed name-only lineage left %d objects nothing will delete: %v", len(left), left)
	}
}
