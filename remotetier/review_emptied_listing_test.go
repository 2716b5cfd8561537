package remotetier

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestEmptiedRangeSegmentGoneMidListing: a broker segment that is away
// for a moment while the sidecar lists (the cleaner's swap renames the old
// .log to .deleted before the cleaned .swap takes its name; retention
// renames segments to .deleted) is left out of the listing, and the empty
// segment before it must not then be taken to answer for that segment's
// range as well: its records are live, and the remote tier must keep
// serving them. Without the check the pass removed the committed copy of
// [0, 2] (K's tombstone and X=x1) for good.
func TestEmptiedRangeSegmentGoneMidListing(t *testing.T) {
	seg1 := filepath.Base(localtier.SegmentPath("", 1, localtier.LogSuffix))
	for _, tc := range []struct {
		name string
		// away makes segment 1 missing for one pass; back undoes it.
		away func(t *testing.T, dir string, gone *atomic.Bool)
		back func(t *testing.T, dir string, gone *atomic.Bool)
	}{
		{"gone when described", func(_ *testing.T, _ string, g *atomic.Bool) { g.Store(true) },
			func(_ *testing.T, _ string, g *atomic.Bool) { g.Store(false) }},
		{"renamed to .deleted", renameSeg(seg1, seg1+localtier.DeletedSuffix), renameSeg(seg1+localtier.DeletedSuffix, seg1)},
		{"swapped (.swap not renamed yet)", renameSeg(seg1, seg1+localtier.SwapSuffix), renameSeg(seg1+localtier.SwapSuffix, seg1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, l := ecLog(t)
			var gone atomic.Bool
			fsys := vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op) error {
				if gone.Load() && op.Kind == vfs.OpOpen && filepath.Base(op.Path) == seg1 {
					return fmt.Errorf("%w: %w", vfs.ErrInjected, fs.ErrNotExist)
				}
				return nil
			}))
			view, err := localtier.OpenBrokerView(fsys, d.Dir())
			if err != nil {
				t.Fatal(err)
			}
			mem := objstore.NewMemory()
			u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
			pass := func(what string) {
				t.Helper()
				upBrokerHWs(t, d)
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			pass("first pass")
			ecClean(t, d, upNow)
			if segs := l.Segments(); segs[0].Size != 0 || len(segs) != 3 {
				t.Fatalf("segments after cleaning %+v; the test needs [0, 1) empty, [1, 3) and the active one", segs)
			}
			pass("pass after cleaning")
			if _, table := ecConsume(t, mem, "c"); table["X"] != "x1" {
				t.Fatalf("after cleaning the remote table is %v, want X=x1", table)
			}
			// The active segment [3, 4) rolls: the next pass appends it, so
			// the committed end moves past any range it removes.
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			ecAppend(t, l, "Z", []byte("z1"))
			upBrokerHWs(t, d)
			tc.away(t, filepath.Join(d.Dir(), "c-0"), &gone)
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatalf("pass with segment 1 away: %v", err)
			}
			tc.back(t, filepath.Join(d.Dir(), "c-0"), &gone)
			if recs, table := ecConsume(t, mem, "c"); table["X"] != "x1" {
				t.Fatalf("segment [1, 3) missed one listing and the remote tier lost X=x1 (records %v): the empty segment [0, 1) was taken to answer for [0, 3)", recs)
			}
			pass("pass with segment 1 back")
			if recs, table := ecConsume(t, mem, "c"); table["X"] != "x1" || table["Y"] != "y1" {
				t.Fatalf("after segment 1 is listed again the remote tier serves %v, want X=x1 and Y=y1 (Z is in the active segment)", recs)
			}
			upCheckConsistent(t, mem, "c", 0)
		})
	}
}

func renameSeg(from, to string) func(*testing.T, string, *atomic.Bool) {
	return func(t *testing.T, dir string, _ *atomic.Bool) {
		t.Helper()
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
}
