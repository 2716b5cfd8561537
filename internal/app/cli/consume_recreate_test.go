package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
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
			f := startFollow(t, srcFlag, src)
			out, errb := &f.out, &f.errb
			deadline := time.Now().Add(10 * time.Second)
			for len(lines(out.String())) < len(old) {
				if time.Now().After(deadline) {
					t.Fatalf("%d lines, want %d; stderr %q", len(lines(out.String())), len(old), errb.String())
				}
				time.Sleep(5 * time.Millisecond)
			}

			recreate(t, rd, 80, newID) // longer than the old topic: offsets 60.. exist
			if code := f.exit(t); code != ExitError {
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

// follower is a `consume --topic events --partition 0 --follow` running
// in the background, polling every 5 ms.
type follower struct {
	out, errb syncBuffer
	cancel    context.CancelFunc // stops it as SIGINT does
	done      chan int           // its exit code
}

// startFollow starts a follower reading from src (e.g. "--bucket", URL);
// the test's end stops it.
func startFollow(t *testing.T, src ...string) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &follower{cancel: cancel, done: make(chan int, 1)}
	r := &Runner{Stdout: &f.out, Stderr: &f.errb, PollInterval: 5 * time.Millisecond}
	args := append([]string{"consume"}, src...)
	args = append(args, "--topic", "events", "--partition", "0", "--follow")
	go func() { f.done <- r.Run(ctx, args) }()
	return f
}

// exit waits for the follower's exit code; a follower that goes on after
// the re-creation fails the test.
func (f *follower) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-f.done:
		return code
	case <-time.After(15 * time.Second):
		t.Fatalf("consume --follow still runs after the re-creation; it printed %d lines", len(lines(f.out.String())))
		return 0
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

// TestConsumeFollowTopicRecreatedDataDir: `consume --follow --data-dir`
// stops as over the bucket when the topic is deleted and re-created while
// it follows: its partition directory removed and made again, told by the
// topic IDs of the directories' partition.metadata when both have one,
// else by the directory itself (even when the new one is shorter than the
// offset reached, which the read alone answers as out of range). A new
// directory with the same topic ID (a broker fetching a replica again) is
// the same topic; a topic only deleted ends the follow as before, with the
// unknown partition. Before, a re-created topic's records were printed
// from the offset reached on, after the old one's.
func TestConsumeFollowTopicRecreatedDataDir(t *testing.T) {
	const oldID, newID = "o3Bx6y0QQxyxS2FrDcDiOw", "Vtqh-_aLSpGn3jK4dGnv8A"
	cases := []struct {
		name    string
		ids     [2]string // partition.metadata topic IDs of the old and new directory ("" = none)
		records int       // of the new topic; 0 = not re-created
		same    bool      // the new directory holds the old topic's records, then more
		wantErr []string  // in stderr; none = the follow goes on
	}{
		{name: "new directory", records: 80, wantErr: []string{"re-created", "partition directory", "from 60", "up to offset 59"}},
		{name: "new directory shorter", records: 20, wantErr: []string{"re-created", "partition directory", "from 60"}},
		{name: "topic IDs", ids: [2]string{oldID, newID}, records: 80, wantErr: []string{"re-created", oldID, newID, "from 60"}},
		{name: "topic ID only new", ids: [2]string{"", newID}, records: 80, wantErr: []string{"re-created", "partition directory", "from 60"}},
		{name: "same topic ID", ids: [2]string{oldID, oldID}, records: 80, same: true},
		{name: "deleted", wantErr: []string{"unknown topic or partition events-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			produceTagged(t, dir, "old", 0, 60)
			writeTopicID(t, filepath.Join(dir, "events-0"), tc.ids[0])
			old := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "events", "--partition", "0").stdout
			want := old
			stage := ""
			if tc.records > 0 {
				stage = t.TempDir()
				if tc.same {
					produceTagged(t, stage, "old", 0, 60)
					produceTagged(t, stage, "old", 60, tc.records-60)
					want += mustRun(t, "", "consume", "--data-dir", stage, "--topic", "events", "--partition", "0", "--from-offset", "60").stdout
				} else {
					produceTagged(t, stage, "new", 0, tc.records)
				}
				writeTopicID(t, filepath.Join(stage, "events-0"), tc.ids[1])
			}

			f := startFollow(t, "--data-dir", dir)
			out, errb := &f.out, &f.errb
			waitFor(t, func() bool { return out.String() == old })
			replacePartitionDir(t, dir, stage)
			wantCode := ExitError
			if len(tc.wantErr) == 0 {
				waitFor(t, func() bool { return len(out.String()) >= len(want) })
				f.cancel()
				wantCode = 0
			}
			if code := f.exit(t); code != wantCode {
				t.Fatalf("exit %d, stderr %q; want %d", code, errb.String(), wantCode)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q does not say %q", errb.String(), w)
				}
			}
			if out.String() != want {
				t.Fatalf("printed %d lines, want %d: %q", len(lines(out.String())), len(lines(want)), out.String())
			}
		})
	}
}

// produceTagged appends records from..from+n-1 of topic events, values
// tagged tag, to partition 0 of the data dir dir.
func produceTagged(t *testing.T, dir, tag string, from, n int) {
	t.Helper()
	var in strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&in, "{\"key\":\"k%d\",\"value\":\"%s %d\",\"timestamp\":%d}\n", i, tag, i, (i+1)*1000)
	}
	mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", "events", "--partition", "0")
}

// writeTopicID writes a broker's partition.metadata naming id into the
// partition directory pdir ("" = none: the file tiered's own topic create
// wrote is removed, as a topic created before tiered wrote topic IDs).
func writeTopicID(t *testing.T, pdir, id string) {
	t.Helper()
	if id == "" {
		if err := os.Remove(filepath.Join(pdir, localtier.PartitionMetadataFile)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	tid, err := localtier.ParseTopicID(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := localtier.WritePartitionMetadata(vfs.Default, pdir, tid); err != nil {
		t.Fatal(err)
	}
}

// replacePartitionDir deletes topic events from the data dir dir and,
// unless stage is "", re-creates it as the data dir stage holds it, all
// under dir's lock, so a reader sees the old topic or the new one, never
// none (tiered has no topic delete: an operator removes the partition
// directory and the config file; the re-created topic's directory is made
// anew, as topic create or produce makes it, by mkdir).
func replacePartitionDir(t *testing.T, dir, stage string) {
	t.Helper()
	var lk io.Closer
	waitFor(t, func() bool {
		var err error
		lk, err = vfs.Default.Lock(filepath.Join(dir, ".lock"))
		if err != nil && !errors.Is(err, vfs.ErrLocked) {
			t.Fatal(err)
		}
		return err == nil
	})
	defer lk.Close()
	config := filepath.Join(".tiered", "topics", "events.json")
	for _, p := range []string{"events-0", config} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	if stage == "" {
		return
	}
	// Made right after the removal, as topic create makes it: ext4 gives it
	// the removed directory's inode number unless a reader still holds
	// that one.
	if err := os.Mkdir(filepath.Join(dir, "events-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(filepath.Join(stage, "events-0"))
	if err != nil {
		t.Fatal(err)
	}
	copied := []string{config, localtier.RecoveryPointCheckpoint, localtier.LogStartOffsetCheckpoint}
	for _, f := range files {
		copied = append(copied, filepath.Join("events-0", f.Name()))
	}
	for _, p := range copied {
		data, err := os.ReadFile(filepath.Join(stage, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsumeDataDirDamagedTopicID: a partition.metadata consume cannot
// parse does not keep it from printing the records; it says so on stderr.
func TestConsumeDataDirDamagedTopicID(t *testing.T) {
	dir := t.TempDir()
	produceTagged(t, dir, "old", 0, 3)
	if err := os.WriteFile(filepath.Join(dir, "events-0", localtier.PartitionMetadataFile), []byte("version: 7\ntopic_id: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "events", "--partition", "0")
	if got := values(t, res.stdout); got != "old 0,old 1,old 2" {
		t.Fatalf("printed %q", got)
	}
	if !strings.Contains(res.stderr, "partition.metadata: line 1") || !strings.Contains(res.stderr, "by its partition directory instead") {
		t.Fatalf("stderr %q does not name the damaged file", res.stderr)
	}
}
