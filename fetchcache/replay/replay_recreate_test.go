package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

const (
	recreateOldID = "o3Bx6y0QQxyxS2FrDcDiOw"
	recreateNewID = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// uploadTopicID creates replayTopic (two partitions) in a new local env
// with records tagged tag and uploads it to mem under topicID: a second
// call with another ID is the topic deleted and re-created, its offsets
// starting again at 0.
func uploadTopicID(t *testing.T, mem objstore.Bucket, topicID, tag string, n int) {
	t.Helper()
	e := fetchkit.NewEnv(t)
	e.Topic(replayTopic, 2, map[string]string{"remote.storage.enable": "true"})
	for p := int32(0); p < 2; p++ {
		l := e.Log(replayTopic, p)
		e.Produce(l, fetchkit.ProduceOpts{Per: 7}, fetchkit.GenRecs(n, ts0, fmt.Sprintf("%s-p%d", tag, p)))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	fetchkit.UploadAllID(t, e, mem, topicID)
}

// sourcesOver are both replay sources over a new catalog of mem, as a new
// replay process opens them.
func sourcesOver(t *testing.T, mem objstore.BucketReader) map[string]ReplaySource {
	t.Helper()
	_, cat := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 4096, MemoryBytes: 1 << 20}, fetchcache.RemoteCatalogOptions{})
	return bothSources(t, cat)
}

// TestReplayResumeRecreatedTopic: the checkpoint records the topic ID the
// replay started on (through --fetch as through --bucket), and a resume
// after the topic was deleted and re-created under the same name is
// refused, naming both IDs, with the output left as it was. Before, the
// resume carried on at the checkpoint's offsets in the new topic, mixing
// two topics' records in one output. A checkpoint without an ID (written
// before IDs were recorded) cannot be checked: it resumes, and takes the
// source's ID.
func TestReplayResumeRecreatedTopic(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recreate  bool
		stripID   bool   // the checkpoint as an older release wrote it
		wantErr   bool   // refused as re-created
		wantCPID  string // the checkpoint's topic ID after the resume
		wantWhole bool   // the output is the old topic's range, whole
	}{
		{name: "same_topic", wantCPID: recreateOldID, wantWhole: true},
		{name: "recreated", recreate: true, wantErr: true, wantCPID: recreateOldID},
		{name: "checkpoint_without_id", recreate: true, stripID: true, wantCPID: recreateNewID},
	} {
		for _, srcName := range []string{"bucket", "fetch"} {
			t.Run(tc.name+"/"+srcName, func(t *testing.T) {
				mem := objstore.NewMemory()
				uploadTopicID(t, mem, recreateOldID, "old", 120)
				src := sourcesOver(t, mem)[srcName]
				dir := t.TempDir()
				opts := ReplayOptions{Topic: replayTopic, Partition: ReplayAllPartitions, From: 0, To: ts0 + 1_000_000,
					FetchBytes: 300, FlushBytes: 1}
				whole := filepath.Join(dir, "whole")
				o := opts
				o.Source, o.OutPath = src, whole
				if _, err := Replay(context.Background(), o); err != nil {
					t.Fatal(err)
				}

				out := filepath.Join(dir, "out")
				cpPath := out + ReplayCheckpointSuffix
				ctx, cancel := context.WithCancel(context.Background())
				o = opts
				o.Source, o.OutPath = &cancellingSource{ReplaySource: src, n: 3, cancel: cancel}, out
				cp, err := Replay(ctx, o)
				cancel()
				if !errors.Is(err, ErrReplayInterrupted) {
					t.Fatalf("first run: %v", err)
				}
				if cp.TopicID != recreateOldID {
					t.Fatalf("the checkpoint records topic ID %q, want %q", cp.TopicID, recreateOldID)
				}
				if tc.stripID {
					fetchkit.EditJSONFile(t, cpPath, func(m map[string]any) { delete(m, "topic_id") })
				}
				before, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if tc.recreate {
					uploadTopicID(t, mem, recreateNewID, "new", 150)
				}

				o = opts
				o.Source, o.OutPath, o.Resume = sourcesOver(t, mem)[srcName], out, true
				_, err = Replay(context.Background(), o)
				if tc.wantErr {
					msg := fmt.Sprint(err)
					if !errors.Is(err, ErrTopicRecreated) || !strings.Contains(msg, recreateOldID) || !strings.Contains(msg, recreateNewID) ||
						!strings.Contains(msg, "re-created") || !strings.Contains(msg, "without --resume") {
						t.Fatalf("resume on the re-created topic: %v; want ErrTopicRecreated naming both IDs", err)
					}
					if after, _ := os.ReadFile(out); string(after) != string(before) {
						t.Fatalf("the refused resume changed the output: %d bytes, then %d", len(before), len(after))
					}
				} else if err != nil {
					t.Fatalf("resume: %v", err)
				}
				saved, err := ReadReplayCheckpoint(cpPath)
				if err != nil || saved.TopicID != tc.wantCPID {
					t.Fatalf("checkpoint after the resume: %+v, %v; want topic ID %q", saved, err, tc.wantCPID)
				}
				if tc.wantWhole {
					got, _ := os.ReadFile(out)
					want, _ := os.ReadFile(whole)
					if string(got) != string(want) {
						t.Fatalf("resumed output: %d bytes, want %d", len(got), len(want))
					}
				}
			})
		}
	}
}
