package cli

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestConsumeFollowTopicRecreated: `consume --follow` over the bucket or a
// fetch service stops with an error naming both topic IDs when the topic
// is deleted and re-created under the same name while it follows, and
// prints none of the new topic's records. Before, it went on at the offset
// it had reached and printed the new topic's records there as if they
// followed the old one's, skipping the new topic's first records.
func TestConsumeFollowTopicRecreated(t *testing.T) {
	const oldID, newID = "o3Bx6y0QQxyxS2FrDcDiOw", "Vtqh-_aLSpGn3jK4dGnv8A"
	for _, srcFlag := range []string{"--bucket", "--fetch"} {
		t.Run(srcFlag[2:], func(t *testing.T) {
			rd := newReplayDataID(t, 60, oldID)
			old := rd.lines[0]
			src := rd.bucketURL
			if srcFlag == "--fetch" {
				src = serveFetchWith(t, rd.bucketURL, fetchcache.RemoteCatalogOptions{ManifestTTL: 20 * time.Millisecond, MinRefresh: time.Millisecond})
			}
			var out, errb syncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &Runner{Stdout: &out, Stderr: &errb, PollInterval: 5 * time.Millisecond}
			done := make(chan int, 1)
			go func() {
				done <- r.Run(ctx, []string{"consume", srcFlag, src, "--topic", "events", "--partition", "0", "--follow"})
			}()
			deadline := time.Now().Add(10 * time.Second)
			for len(lines(out.String())) < len(old) {
				if time.Now().After(deadline) {
					t.Fatalf("%d lines, want %d; stderr %q", len(lines(out.String())), len(old), errb.String())
				}
				time.Sleep(5 * time.Millisecond)
			}

			recreate(t, rd, 80, newID) // longer than the old topic: offsets 60.. exist
			var code int
			select {
			case code = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("consume --follow still runs after the re-creation; it printed %d lines (the old topic has %d)", len(lines(out.String())), len(old))
			}
			if code != ExitError {
				t.Fatalf("exit %d, stderr %q; want %d", code, errb.String(), ExitError)
			}
			for _, want := range []string{oldID, newID, "re-created", "from 60"} {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr %q does not say %q", errb.String(), want)
				}
			}
			if out.String() != strings.Join(old, "") {
				t.Fatalf("printed %d lines, want the old topic's %d and nothing of the new one's", len(lines(out.String())), len(old))
			}
		})
	}
}

// recreate deletes and re-creates topic events of rd's bucket under
// topicID with records records a partition, all at once for a reader: the
// new lineage is uploaded to another bucket, its objects copied in, then
// its topic object (naming it current) moved over the old one. An upload
// into the bucket itself would show readers the topic object before the
// new lineage's manifests (an unknown partition for a moment), which is
// not what this tests.
func recreate(t *testing.T, rd *replayData, records int, topicID string) {
	t.Helper()
	stage := &replayData{bucketURL: fileURL(filepath.Join(t.TempDir(), "stage"))}
	stage.upload(t, records, topicID, "recreated")
	dirOf := func(u string) string {
		loc, err := objstore.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		return loc.Dir
	}
	from, to := dirOf(stage.bucketURL), dirOf(rd.bucketURL)
	topicObj := filepath.Join("topics", "events.json")
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if rel == topicObj || strings.HasPrefix(rel, ".tiered-") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(from, topicObj))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(to, "topics", "events.json.new")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(to, topicObj)); err != nil {
		t.Fatal(err)
	}
	rd.lines, rd.ts = stage.lines, stage.ts
}
