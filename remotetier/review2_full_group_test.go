package remotetier

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestFullGroupNeedingAppend: a run of exactly MaxCommitSegments cleaned
// segments crossing the old leader's (rolled every 10, the new leader's at
// 5, 15, ..., 75), the last ending below the committed end (its cleaner
// dropped 78 and 79): the group commits with the append after it, never
// stalls; with MaxCommitSegments one less the run keeps its committed
// segments while the append goes on.
func TestFullGroupNeedingAppend(t *testing.T) {
	for _, tc := range []struct {
		max       int
		wantGroup bool
	}{{9, true}, {8, false}} {
		t.Run(fmt.Sprint("max=", tc.max), func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			old := ccUniformLog(t, 80, "o")
			if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			lead := &memSource{p: cleanedPartition(), logs: map[int64][]byte{}}
			lead.p.CleanedUpTo = 90
			rolls := []int64{0, 5, 15, 25, 35, 45, 55, 65, 75, 80}
			for i := 0; i+1 < len(rolls); i++ {
				from, to := rolls[i], rolls[i+1]
				next := to
				if to == 80 {
					next = 78 // the cleaner dropped 78 and 79
				}
				lead.p.Segments = append(lead.p.Segments, lead.segment(from, next, to, ccRecords(t, from, ccSeq("k", int(from), int(next), "n")...)))
			}
			lead.p.Segments = append(lead.p.Segments, lead.segment(80, 90, 90, ccRecords(t, 80, ccSeq("k", 80, 90, "n")...)))
			u := upUploader(t, mem, lead, Options{MaxCommitSegments: tc.max})
			for range 3 {
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			m := upLoad(t, mem, "c", 0)
			bases := upBases(t, mem, m)
			if m.NextOffset() != 90 {
				t.Fatalf("committed end %d, want 90 (segments at %v)", m.NextOffset(), bases)
			}
			want := []int64{0, 10, 20, 30, 40, 50, 60, 70, 80}
			if tc.wantGroup {
				want = rolls[:len(rolls)-1]
				want = append(slices.Clone(want), 80)
			}
			if !slices.Equal(bases, want) {
				t.Fatalf("segments at %v, want %v", bases, want)
			}
			upCheckConsistent(t, mem, "c", 0)
			upCheckNoOrphans(t, mem, manifest.Key{Topic: "c", Partition: 0})
		})
	}
}
