package remotetier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// recreateFoo does to foo-0 of a broker log dir what a broker does when
// the topic is deleted and re-created at once: the live directory is
// renamed to foo-0.<uuid>-delete and a new foo-0 appears with a new topic
// ID. The new directory here holds segments of the same base offsets and
// sizes (fixed-size records rolled by segment.bytes give that).
func recreateFoo(t testing.TB, dir string, newID localtier.TopicID) {
	t.Helper()
	live := filepath.Join(dir, "foo-0")
	gone := filepath.Join(dir, "foo-0.3b1c0e3f9a4b4c2d8e1f0a2b3c4d5e6f-delete")
	if err := os.Rename(live, gone); err != nil {
		t.Fatal(err)
	}
	brokerdir.CopyTree(t, gone, live)
	if err := localtier.WritePartitionMetadata(vfs.Default, live, newID); err != nil {
		t.Fatal(err)
	}
}

// A topic deleted and re-created (same name, new topic ID) between the
// sidecar's listing and its reads must never have the new incarnation's
// segments uploaded into the old topic ID's lineage.
func TestBrokerSourceRecreatedTopic(t *testing.T) {
	ctx := context.Background()
	newID, err := localtier.ParseTopicID(lineB)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("between listing and open", func(t *testing.T) {
		dir := t.TempDir()
		brokerdir.CopyTree(t, kraftFixture, dir)
		upRollBroker(t, dir)
		view, err := localtier.OpenBrokerView(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		src := NewBrokerSource(view, nil)
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := findPart(t, parts, "foo", 0)
		if p.TopicID == "" || p.TopicID == lineB || len(p.Segments) == 0 {
			t.Fatalf("fixture partition %+v", p)
		}
		recreateFoo(t, dir, newID)
		r, err := src.Open(ctx, p, p.Segments[0])
		if err == nil {
			r.Close()
			t.Fatalf("a segment of topic id %s opened for the lineage of %s", lineB, p.TopicID)
		}
		if !errors.Is(err, ErrSegmentGone) {
			t.Fatalf("open: %v, want ErrSegmentGone", err)
		}
	})
	t.Run("inside one listing", func(t *testing.T) {
		dir := t.TempDir()
		brokerdir.CopyTree(t, kraftFixture, dir)
		upRollBroker(t, dir)
		oldID, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(dir, "foo-0"))
		if err != nil {
			t.Fatal(err)
		}
		fsys := &idSwapFS{FS: vfs.Default, swap: func() { recreateFoo(t, dir, newID) }}
		view, err := localtier.OpenBrokerView(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		mem := objstore.NewMemory()
		u := upUploader(t, mem, NewBrokerSource(view, fsys), Options{})
		if _, err := u.RunOnce(ctx); err != nil && !errors.Is(err, ErrSegmentGone) {
			t.Fatal(err)
		}
		if !fsys.done.Load() {
			t.Fatal("the topic was not re-created during the listing")
		}
		if keys := lineageKeys(t, mem, "foo", oldID.String()); len(keys) != 0 {
			t.Fatalf("the re-created topic's segments were written to the old lineage %s: %v", oldID, keys)
		}
		// The next pass uploads them to the new lineage.
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if upKeyID(t, mem, "foo") != lineB || upLoad(t, mem, "foo", 0).SegmentCount() != 1 {
			t.Fatalf("the new lineage was not uploaded: %v", upKeys(t, mem))
		}
	})
}

// idSwapFS runs swap once, right after foo-0's partition.metadata was
// first read whole.
type idSwapFS struct {
	vfs.FS
	swap func()
	done atomic.Bool
}

func (f *idSwapFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil || filepath.Base(name) != "partition.metadata" || filepath.Base(filepath.Dir(name)) != "foo-0" || f.done.Load() {
		return file, err
	}
	return &swapAtEOF{File: file, fs: f}, nil
}

// swapAtEOF re-creates the topic once its partition.metadata was read to
// the end (the ID is known; the segments are not listed yet).
type swapAtEOF struct {
	vfs.File
	fs *idSwapFS
}

func (s *swapAtEOF) Close() error {
	err := s.File.Close()
	if !s.fs.done.Swap(true) {
		s.fs.swap()
	}
	return err
}

func findPart(t testing.TB, parts []Partition, topic string, p int32) Partition {
	t.Helper()
	for _, x := range parts {
		if x.Topic == topic && x.Partition == p {
			return x
		}
	}
	t.Fatalf("partition %s-%d not listed", topic, p)
	return Partition{}
}

// TestBrokerSourceStrayDirectory: a partition directory whose
// partition.metadata names another topic ID than the broker's metadata
// gives the topic (a stray of a deleted incarnation, left until the
// broker cleans it up) is not listed, so nothing of it goes into the old
// ID's lineage; the same ID, or a topic the metadata does not name with
// an ID, is listed as before.
func TestBrokerSourceStrayDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	brokerdir.CopyTree(t, kraftFixture, dir)
	upRollBroker(t, dir)
	id, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(dir, "foo-0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		meta   func(string) (string, bool)
		listed bool
	}{
		{"no metadata", nil, true},
		{"same id", func(string) (string, bool) { return id.String(), true }, true},
		{"topic unknown", func(string) (string, bool) { return "", false }, true},
		{"another id", func(topic string) (string, bool) {
			if topic == "foo" {
				return lineB, true
			}
			return "", false
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view, err := localtier.OpenBrokerView(vfs.Default, dir)
			if err != nil {
				t.Fatal(err)
			}
			src := NewBrokerSource(view, nil)
			src.TopicID = tc.meta
			parts, err := src.Partitions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, p := range parts {
				if p.Topic == "foo" && p.Partition == 0 {
					listed = true
				}
			}
			if listed != tc.listed || len(parts) == 0 && tc.listed {
				t.Fatalf("foo-0 listed %v (of %d partitions), want %v", listed, len(parts), tc.listed)
			}
		})
	}
}
