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
	for _, tc := range awayCases(1) {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, l := ecLog(t)
			mem, u, gone, pass := awayUploader(t, d, 1)
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
			tc.away(t, filepath.Join(d.Dir(), "c-0"), gone)
			if _, err := u.RunOnce(ctx); err != nil {
				t.Fatalf("pass with segment 1 away: %v", err)
			}
			tc.back(t, filepath.Join(d.Dir(), "c-0"), gone)
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

// awayCase makes a broker segment file missing for one pass (away) and
// undoes it (back).
type awayCase struct {
	name string
	away func(t *testing.T, dir string, gone *atomic.Bool)
	back func(t *testing.T, dir string, gone *atomic.Bool)
}

// awayCases are the ways the segment at base is missed by a listing: gone
// when described (awayUploader's gone), renamed to .deleted, swapped.
func awayCases(base int64) []awayCase {
	seg := filepath.Base(localtier.SegmentPath("", base, localtier.LogSuffix))
	return []awayCase{
		{"gone when described", func(_ *testing.T, _ string, g *atomic.Bool) { g.Store(true) },
			func(_ *testing.T, _ string, g *atomic.Bool) { g.Store(false) }},
		{"renamed to .deleted", renameSeg(seg, seg+localtier.DeletedSuffix), renameSeg(seg+localtier.DeletedSuffix, seg)},
		{"swapped (.swap not renamed yet)", renameSeg(seg, seg+localtier.SwapSuffix), renameSeg(seg+localtier.SwapSuffix, seg)},
	}
}

// awayUploader is an uploader over d read as a broker's log dir whose
// segment at base cannot be opened while gone is set, and pass, which
// publishes the high watermarks and runs a pass that must not fail.
func awayUploader(t *testing.T, d *localtier.LogDir, base int64) (objstore.Bucket, *Uploader, *atomic.Bool, func(string)) {
	t.Helper()
	seg := filepath.Base(localtier.SegmentPath("", base, localtier.LogSuffix))
	gone := new(atomic.Bool)
	fsys := vfs.NewErrorFS(vfs.Default, vfs.InjectorFunc(func(op vfs.Op) error {
		if gone.Load() && op.Kind == vfs.OpOpen && filepath.Base(op.Path) == seg {
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
	return mem, u, gone, func(what string) {
		t.Helper()
		upBrokerHWs(t, d)
		if _, err := u.RunOnce(context.Background()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
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

// TestCleanedSegmentBeforeGoneSegment: the same for a cleaned segment
// that is not empty: the sidecar's listing misses the segment after it
// ([2, 3), B=b2, away for a moment), so the next segment listed is the
// one after that. The cleaned [0, 1] must replace only the committed
// offsets up to its last batch, not [0, 2]: that removed the committed
// copy of B=b2, and once [2, 3) was listed again nothing was committed in
// its range for it to replace, so the remote tier lost B=b2 for good.
func TestCleanedSegmentBeforeGoneSegment(t *testing.T) {
	for _, tc := range awayCases(2) {
		t.Run(tc.name, func(t *testing.T) {
			d, l := ecTopic(t)
			ecAppend(t, l, "A", ecPad("a1", 'a'))
			ecAppend(t, l, "B", []byte("b1"))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			ecAppend(t, l, "B", ecPad("b2", 'b'))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			ecAppend(t, l, "Y", []byte("y1"))
			mem, _, gone, pass := awayUploader(t, d, 2)
			pass("first pass")
			ecClean(t, d, upNow)
			if segs := l.Segments(); len(segs) != 3 || segs[0].NextOffset != 1 || segs[1].BaseOffset != 2 {
				t.Fatalf("segments after cleaning %+v; the test needs [0, 2) cleaned to A, [2, 3) and the active one", segs)
			}
			// The active segment rolls: the next pass appends it, so the
			// committed end moves past any range it replaces.
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			ecAppend(t, l, "Z", []byte("z1"))
			tc.away(t, filepath.Join(d.Dir(), "c-0"), gone)
			pass("pass with segment 2 away")
			tc.back(t, filepath.Join(d.Dir(), "c-0"), gone)
			pass("pass with segment 2 back")
			if recs, table := ecConsume(t, mem, "c"); table["B"] != "b2" || table["A"] != "a1" || table["Y"] != "y1" {
				t.Fatalf("the remote tier serves %v, want A=a1, B=b2 and Y=y1 (Z is in the active segment)", recs)
			}
			upCheckConsistent(t, mem, "c", 0)
		})
	}
}
