package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/remotelog"
)

var inspectManifestCmd = &command{
	name:    "inspect manifest",
	summary: "print a partition's remote-tier manifest",
	help: `usage: tiered inspect manifest --bucket URL --topic T --partition P [--all] [--json]

Prints the root manifest of one partition of the remote tier (docs/format/manifest.md):
its key, generation, log start offset, next offset, the sealed sub-manifests it
references (key, size, checksum, offsets, timestamps, segment count, log bytes), its
inline segments (offsets, record count, timestamps, size, compacted, leader epochs,
upload time, uploader, attempt, then each object's key, size and checksum; an index that
is a section of the segment's .indexes object also shows "at OFFSET") and its gaps: offsets
the source deleted before they were uploaded (lost; reads there are OFFSET_OUT_OF_RANGE). Reads the
manifest only (no LIST). The manifest is decoded and validated; a corrupt one is an error.

Flags:
  --bucket URL      file:///dir, mem://name[/prefix] or
                    s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --topic T         topic (required)
  --partition P     partition (required)
  --all             also load every sealed sub-manifest (checked against its reference)
                    and print its segments
  --json            print one JSON object: {"key", "topic", "partition", "generation",
                    "log_start_offset", "next_offset", "segment_count", "log_bytes",
                    "sealed": [...], "segments": [...], "gaps": [...],
                    "sub_manifests": [...] (with --all)}
`,
	run: runInspectManifest,
}

type subManifestJSON struct {
	Key      string             `json:"key"`
	Segments []manifest.Segment `json:"segments"`
}

type manifestJSON struct {
	Key            string             `json:"key"`
	Topic          string             `json:"topic"`
	Partition      int32              `json:"partition"`
	TopicID        string             `json:"topic_id,omitempty"` // the lineage served (the topic object's)
	Generation     int64              `json:"generation"`
	LogStartOffset int64              `json:"log_start_offset"`
	NextOffset     int64              `json:"next_offset"`
	SegmentCount   int                `json:"segment_count"`
	LogBytes       int64              `json:"log_bytes"`
	Sealed         []manifest.SubRef  `json:"sealed"`
	Segments       []manifest.Segment `json:"segments"`
	Gaps           []manifest.Gap     `json:"gaps"`
	SubManifests   []subManifestJSON  `json:"sub_manifests,omitempty"`
}

func runInspectManifest(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("inspect manifest")
	bucketURL := fs.String("bucket", "", "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	all := fs.Bool("all", false, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := requireTopicPartition(fs, *topic, *partition); err != nil {
		return err
	}
	b, err := openReadBucket(ctx, *bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	l, err := remotelog.OpenRemoteLog(ctx, b, "", *topic, int32(*partition), remotelog.ReaderOptions{})
	if err != nil {
		return err
	}
	m := l.Manifest()
	var subs []subManifestJSON
	if *all {
		for i, ref := range m.Sealed {
			sub, err := m.LoadSub(ctx, l.Resolver(), i)
			if err != nil {
				return fmt.Errorf("sub-manifest %s: %w", ref.Key, err)
			}
			subs = append(subs, subManifestJSON{Key: ref.Key, Segments: sub.Segments})
		}
	}
	if *asJSON {
		out := manifestJSON{Key: m.Key(), Topic: m.Topic, Partition: m.Partition, TopicID: l.TopicID(), Generation: m.Generation,
			LogStartOffset: m.LogStartOffset, NextOffset: m.NextOffset(), SegmentCount: m.SegmentCount(), LogBytes: m.LogBytes(),
			Sealed: nonNil(m.Sealed), Segments: nonNil(m.Segments), Gaps: nonNil(m.Gaps), SubManifests: subs}
		data, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode manifest: %w", err)
		}
		fmt.Fprintf(r.Stdout, "%s\n", data)
		return nil
	}
	w := r.Stdout
	fmt.Fprintf(w, "manifest %s\n", m.Key())
	if id := l.TopicID(); id != "" {
		fmt.Fprintf(w, "topic id %s (the lineage served)\n", id)
	}
	fmt.Fprintf(w, "topic %s partition %d generation %d logStartOffset %d nextOffset %d segments %d (sealed %d in %d sub-manifests, inline %d) logBytes %d\n",
		m.Topic, m.Partition, m.Generation, m.LogStartOffset, m.NextOffset(), m.SegmentCount(),
		m.SegmentCount()-len(m.Segments), len(m.Sealed), len(m.Segments), m.LogBytes())
	for i, ref := range m.Sealed {
		fmt.Fprintf(w, "sealed %s size %d checksum %s offsets %d-%d segments %d timestamps %s logBytes %d\n",
			ref.Key, ref.Size, ref.Checksum, ref.BaseOffset, ref.LastOffset, ref.Segments, tsRange(ref.MinTimestamp, ref.MaxTimestamp), ref.LogBytes)
		if *all {
			for _, s := range subs[i].Segments {
				printSegment(w, "  ", s)
			}
		}
	}
	for _, s := range m.Segments {
		printSegment(w, "", s)
	}
	for _, g := range m.Gaps {
		fmt.Fprintf(w, "gap baseOffset %d lastOffset %d offsets %d detected %s (lost: deleted at the source before upload)\n",
			g.BaseOffset, g.LastOffset, g.LastOffset-g.BaseOffset+1, time.UnixMilli(g.DetectedMs).UTC().Format(time.RFC3339))
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func tsRange(lo, hi int64) string {
	f := func(ms int64) string {
		if ms < 0 {
			return "none"
		}
		return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
	}
	return f(lo) + " .. " + f(hi)
}

func printSegment(w io.Writer, indent string, s manifest.Segment) {
	epochs := ""
	for _, e := range s.LeaderEpochs {
		epochs += fmt.Sprintf(" %d@%d", e.Epoch, e.StartOffset)
	}
	if epochs == "" {
		epochs = " none"
	}
	fmt.Fprintf(w, "%ssegment baseOffset %d lastOffset %d records %d timestamps %s size %d compacted %v leaderEpochs%s uploaded %s by %q attempt %s\n",
		indent, s.BaseOffset, s.LastOffset, s.RecordCount, tsRange(s.MinTimestamp, s.MaxTimestamp), s.Log.Size, s.Compacted, epochs,
		time.UnixMilli(s.UploadTimeMs).UTC().Format(time.RFC3339), s.Uploader, s.AttemptID)
	names := []string{"log", "index", "timeindex", "txnindex"}
	for i, o := range s.Objects() {
		at := ""
		if o.Section() {
			at = fmt.Sprintf(" at %d", o.Offset)
		}
		fmt.Fprintf(w, "%s  %-9s %s%s size %d checksum %s\n", indent, names[i], o.Key, at, o.Size, o.Checksum)
	}
}
