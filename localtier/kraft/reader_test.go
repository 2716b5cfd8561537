package kraft_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestReaderFollows: a Reader following a growing metadata log gives, after every change,
// the image a fresh ReadDir gives, replaying from the snapshot only when appending does not
// explain the change (a new snapshot, a truncated segment).
func TestReaderFollows(t *testing.T) {
	logDir := t.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	r := kraft.NewReader(vfs.Default, l.Dir)
	check := func(step string, replays int) {
		t.Helper()
		want, err := kraft.ReadDir(vfs.Default, l.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Read(func(got *kraft.Image) error {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the followed image differs from a fresh read:\n got %+v\nwant %+v", step, got, want)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if r.Replays() != replays {
			t.Errorf("%s: %d replays, want %d", step, r.Replays(), replays)
		}
	}
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check("empty", 1)
	must(l.Append(kraftlog.Topic("a", tid(1)), kraftlog.Partition(tid(1), 0, 1, 0, 1)))
	check("first records", 1)
	must(l.Append(kraftlog.TopicConfig("a", "retention.ms", kraftlog.Value("5"))))
	must(l.AppendControl())
	check("appended", 1)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	must(l.Append(kraftlog.BeginTxn(), kraftlog.Topic("b", tid(2))))
	check("new segment, transaction open", 1)
	must(l.Append(kraftlog.EndTxn(), kraftlog.LeaderChange(tid(1), 0, 2)))
	check("transaction ended", 1)
	check("nothing new", 1)

	// A torn batch at the end, completed later.
	seg := filepath.Join(l.Dir, "00000000000000000004.log")
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	must(l.Append(kraftlog.RemoveTopic(tid(1))))
	full, _ := os.ReadFile(seg)
	if err := os.WriteFile(seg, full[:len(whole)+10], 0o644); err != nil {
		t.Fatal(err)
	}
	check("torn tail", 1)
	if err := os.WriteFile(seg, full, 0o644); err != nil {
		t.Fatal(err)
	}
	check("tail completed", 1)

	// A new snapshot, the segments before it deleted: replay.
	im, err := kraft.ReadDir(vfs.Default, l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot(kraftlog.ImageRecords(im)); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteSegmentsBefore(l.Next()); err != nil {
		t.Fatal(err)
	}
	must(l.Append(kraftlog.Topic("c", tid(3))))
	check("new snapshot", 2)

	// The last segment truncated (a new quorum leader cut uncommitted records): replay.
	last := filepath.Join(l.Dir, "00000000000000000009.log")
	before, _ := os.ReadFile(last)
	must(l.Append(kraftlog.Topic("d", tid(4))))
	check("before truncation", 2)
	if err := os.WriteFile(last, before, 0o644); err != nil {
		t.Fatal(err)
	}
	check("truncated", 3)

	// Truncated and written again past the position read before the next Read: the last
	// batch read is not there any more, so this is not an append either.
	before, _ = os.ReadFile(last)
	must(l.Append(kraftlog.Topic("e", tid(5))))
	check("before the rewrite", 3)
	if err := os.WriteFile(last, before, 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := *l // the log as it was before "e", written on with other records
	must(l2.Append(kraftlog.Topic("f", tid(6)), kraftlog.Topic("g", tid(7)), kraftlog.Topic("h", tid(8))))
	check("rewritten", 4)
}
