package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// recreatingSource re-creates the topic (a new lineage under newID, its
// offsets starting again at 0) just before its n-th read.
type recreatingSource struct {
	ReplaySource
	t     *testing.T
	mem   objstore.Bucket
	n     int
	reads int
}

func (s *recreatingSource) ReadRaw(ctx context.Context, topic string, p int32, off int64, maxBytes int) (httpapi.RawRecords, error) {
	s.reads++
	if s.reads == s.n {
		uploadTopicID(s.t, s.mem, recreateNewID, "new", 150)
	}
	return s.ReplaySource.ReadRaw(ctx, topic, p, off, maxBytes)
}

// TestReplayTopicRecreatedDuringRun: a topic deleted and re-created while
// a replay reads it stops the replay at the first answer from the new
// topic's lineage (the bucket source tells it by the partition's topic ID
// after each read, the fetch service by the X-Tiered-Topic-Id header of
// each records answer), with ErrTopicRecreated naming both IDs; the
// output holds only the old topic's records, and the checkpoint counts
// exactly them, so a resume is refused rather than continuing in the new
// topic. Before, the replay went on reading the same offsets of the new
// topic, wrote both topics' records into one output and succeeded.
func TestReplayTopicRecreatedDuringRun(t *testing.T) {
	for _, srcName := range []string{"bucket", "fetch"} {
		t.Run(srcName, func(t *testing.T) {
			mem := objstore.NewMemory()
			uploadTopicID(t, mem, recreateOldID, "old", 120)
			dir := t.TempDir()
			opts := ReplayOptions{Topic: replayTopic, Partition: ReplayAllPartitions, From: 0, To: ts0 + 1_000_000,
				FetchBytes: 300, FlushBytes: 1}
			whole := filepath.Join(dir, "whole")
			o := opts
			o.Source, o.OutPath = sourcesOver(t, mem)[srcName], whole
			if _, err := Replay(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(whole)
			if err != nil {
				t.Fatal(err)
			}

			// Every read re-reads the manifest, as one does every
			// ManifestTTL: the re-creation is seen at the next read.
			_, cat := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 4096, MemoryBytes: 1 << 20},
				fetchcache.RemoteCatalogOptions{ManifestTTL: time.Nanosecond, MinRefresh: time.Nanosecond})
			src := &recreatingSource{ReplaySource: bothSources(t, cat)[srcName], t: t, mem: mem, n: 4}
			out := filepath.Join(dir, "out")
			o = opts
			o.Source, o.OutPath = src, out
			cp, err := Replay(context.Background(), o)
			msg := fmt.Sprint(err)
			if !errors.Is(err, ErrTopicRecreated) || !strings.Contains(msg, recreateOldID) || !strings.Contains(msg, recreateNewID) ||
				!strings.Contains(msg, "during the replay") {
				t.Fatalf("replay across a re-creation: %v; want ErrTopicRecreated during the replay naming both IDs", err)
			}
			if src.reads != src.n {
				t.Fatalf("the replay read %d times, want it to stop at the first answer of the new topic (read %d)", src.reads, src.n)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || !strings.HasPrefix(string(want), string(got)) || strings.Contains(string(got), "new-p") {
				t.Fatalf("output (%d bytes) is not a non-empty prefix of the old topic's replay (%d bytes):\n%s", len(got), len(want), got)
			}
			saved, err := ReadReplayCheckpoint(out + ReplayCheckpointSuffix)
			if err != nil {
				t.Fatal(err)
			}
			if saved.Complete || saved.OutputBytes != int64(len(got)) || saved.TopicID != recreateOldID || cp == nil || cp.OutputBytes != saved.OutputBytes {
				t.Fatalf("checkpoint %+v (returned %+v), want incomplete at %d bytes on topic ID %s", saved, cp, len(got), recreateOldID)
			}

			o.Source, o.Resume = sourcesOver(t, mem)[srcName], true
			if _, err := Replay(context.Background(), o); !errors.Is(err, ErrTopicRecreated) {
				t.Fatalf("resume after the re-creation: %v, want ErrTopicRecreated", err)
			}
		})
	}
}

// countingSource counts the reads.
type countingSource struct {
	ReplaySource
	reads int
}

func (s *countingSource) ReadRaw(ctx context.Context, topic string, p int32, off int64, maxBytes int) (httpapi.RawRecords, error) {
	s.reads++
	return s.ReplaySource.ReadRaw(ctx, topic, p, off, maxBytes)
}

// TestReplayResumeFetchPastCachedListing: --resume --fetch asks the fetch
// service for the topic ID of the partition it continues (GET
// /v1/topics/{t}/partitions/{p}, answered after the partition's manifest
// re-read when due), not the topic listing, which the service reuses for
// 30 s: a topic re-created within that time is refused at the resume,
// before anything is read or truncated. Before, the resume compared the
// checkpoint's ID with the cached listing's (the old topic's) and went on.
func TestReplayResumeFetchPastCachedListing(t *testing.T) {
	mem := objstore.NewMemory()
	uploadTopicID(t, mem, recreateOldID, "old", 120)
	// One long-lived fetch service: its topic listing is reused for the
	// default 30 s, each partition's manifest is re-read when asked for.
	_, cat := fetchkit.CachedCatalog(t, mem, chunkcache.CacheOptions{ChunkBytes: 4096, MemoryBytes: 1 << 20},
		fetchcache.RemoteCatalogOptions{ManifestTTL: time.Nanosecond, MinRefresh: time.Nanosecond})
	client := bothSources(t, cat)["fetch"].(*httpapi.Client)
	ctx := context.Background()

	out := filepath.Join(t.TempDir(), "out")
	opts := ReplayOptions{Topic: replayTopic, Partition: ReplayAllPartitions, From: 0, To: ts0 + 1_000_000,
		FetchBytes: 300, FlushBytes: 1, OutPath: out}
	runCtx, cancel := context.WithCancel(ctx)
	o := opts
	o.Source = &cancellingSource{ReplaySource: client, n: 3, cancel: cancel}
	cp, err := Replay(runCtx, o)
	cancel()
	if !errors.Is(err, ErrReplayInterrupted) || cp.TopicID != recreateOldID {
		t.Fatalf("first run: %v, checkpoint topic ID %q", err, cp.TopicID)
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}

	uploadTopicID(t, mem, recreateNewID, "new", 150)
	// The scenario: the service's listing still names the old topic.
	if ts, err := client.Topics(ctx); err != nil || len(ts) != 1 || ts[0].ID != recreateOldID {
		t.Fatalf("the cached listing: %+v, %v; want it still on %s", ts, err, recreateOldID)
	}

	src := &countingSource{ReplaySource: client}
	o = opts
	o.Source, o.Resume = src, true
	_, err = Replay(ctx, o)
	msg := fmt.Sprint(err)
	if !errors.Is(err, ErrTopicRecreated) || !strings.Contains(msg, recreateNewID) || !strings.Contains(msg, "without --resume") ||
		strings.Contains(msg, "during the replay") || src.reads != 0 {
		t.Fatalf("resume on the re-created topic: %v after %d reads; want ErrTopicRecreated at the resume, before any read", err, src.reads)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Fatalf("the refused resume changed the output: %d bytes, then %d", len(before), len(after))
	}
}
