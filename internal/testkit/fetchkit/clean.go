package fetchkit

import (
	"testing"

	"github.com/tiered/tiered/localtier"
)

// EmptySegments replaces l's rolled segments from the one based at from to
// the one ending at to (at least two) by a segment the cleaner emptied
// whole: ReplaceSegments leaves in it only the sentinel batch at to-1, a
// batch without records.
func EmptySegments(t testing.TB, l *localtier.Log, from, to int64) {
	t.Helper()
	var old []localtier.CleanerSegment
	for _, s := range l.CleanerView().Segments {
		if s.BaseOffset >= from && s.BaseOffset < to {
			old = append(old, s)
		}
	}
	if len(old) < 2 || old[0].BaseOffset != from || old[len(old)-1].NextOffset != to {
		t.Fatalf("no rolled segments from %d to %d: %+v", from, to, l.CleanerView().Segments)
	}
	c, err := l.NewCleanedSegment(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReplaceSegments(c, old); err != nil {
		t.Fatal(err)
	}
}
