package fetchcache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestRemoteCatalogRemembersMissingPartitions: partitions without a
// manifest are remembered in a bounded LRU, not a map cleared when it grows
// past a size: 30,000 missing partitions asked for again cost no bucket
// reads, and past the bound only the least recently asked-for are
// forgotten.
func TestRemoteCatalogRemembersMissingPartitions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		entries int // UnknownEntries; 0: the default
		missing int // distinct missing partitions asked for
		// extra missing partitions asked for next, which push the `extra`
		// oldest out of a full LRU (none when it has room)
		extra int
	}{
		{name: "30000_default_bound", missing: 30000},
		{name: "past_the_bound_forgets_the_oldest_only", entries: 100, missing: 100, extra: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &objtesting.ReadCounter{BucketReader: objstore.NewMemory()}
			cat, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{UnknownEntries: tt.entries})
			if err != nil {
				t.Fatal(err)
			}
			ask := func(from, to int) int64 {
				t.Helper()
				before := b.Reads()
				for p := from; p < to; p++ {
					var ue *fetchcache.UnknownTopicOrPartitionError
					if _, err := cat.Partition(ctx, "missing", int32(p)); !errors.As(err, &ue) {
						t.Fatalf("partition %d: %v, want unknown", p, err)
					}
				}
				return b.Reads() - before
			}
			first := ask(0, tt.missing)
			if first < int64(tt.missing) {
				t.Fatalf("first pass made %d reads for %d missing partitions", first, tt.missing)
			}
			perMiss := first / int64(tt.missing)
			ask(tt.missing, tt.missing+tt.extra)
			// The partitions still within the bound cost nothing again ...
			if got := ask(tt.extra, tt.missing); got != 0 {
				t.Fatalf("%d missing partitions asked for again made %d bucket reads, want 0", tt.missing-tt.extra, got)
			}
			// ... and only the `extra` oldest were forgotten.
			if got, want := ask(0, tt.extra), int64(tt.extra)*perMiss; got != want {
				t.Fatalf("the %d oldest asked for again made %d reads, want %d", tt.extra, got, want)
			}
		})
	}
}
