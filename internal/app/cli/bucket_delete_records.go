package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/retention"
)

var bucketDeleteRecordsCmd = &command{
	name:    "bucket delete-records",
	summary: "delete a partition's records below an offset from the bucket (Kafka's DeleteRecords)",
	help: `usage: tiered bucket delete-records --bucket URL --topic T --partition P --before OFFSET [--dry-run] [--json]

Kafka's DeleteRecords on the remote tier of one partition, in the lineage the topic's topic
object serves: the remote log start offset moves to OFFSET in one conditional manifest write,
so from then on no reader (fetch, serve, consume --bucket, replay) is served an offset below
it, and the segments wholly below it are deleted from the bucket after (the one holding OFFSET
stays, its offsets below OFFSET never served). A running sidecar, serve or upload is not
disturbed: its next manifest write finds the new one and goes on from it.

A broker's DeleteRecords (kafka-delete-records.sh, AdminClient.deleteRecords) is not applied
to the bucket by the sidecar: in a broker's log dir it cannot be told apart from the log start
a follower takes from its leader's retention, which the bucket must outlive. Run this after
it, with the same offset, to delete the records from the bucket too. The command changes the
bucket only: records still on serve's local disk are served until its retention deletes them.

An OFFSET at or below the remote log start changes nothing; one past the remote log end is
refused (exit 1, naming the remote log's offsets); so is a partition with no manifest.

Flags:
  --bucket URL       file:///dir, mem://name[/prefix] or
                     s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --topic T          the topic
  --partition P      the partition
  --before OFFSET    the new log start offset: every offset below it is deleted
  --dry-run          print what would be deleted and change nothing
  --json             print the result as one JSON object
`,
	run: runBucketDeleteRecords,
}

func runBucketDeleteRecords(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("bucket delete-records")
	bucketURL := fs.String("bucket", "", "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	before := fs.Int64("before", -1, "")
	dryRun := fs.Bool("dry-run", false, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := requireTopicPartition(fs, *topic, *partition); err != nil {
		return err
	}
	if !setFlags(fs)["before"] {
		return usagef("missing required flag --before")
	}
	if *before < 0 {
		return usagef("--before %d is negative", *before)
	}
	b, err := openWriteBucket(ctx, *bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	pr, segs, err := remotetier.DeleteRecords(ctx, b, remotetier.DeleteRecordsOptions{Topic: *topic, Partition: int32(*partition),
		Before: *before, DryRun: *dryRun, Now: r.now})
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			DryRun bool `json:"dry_run"`
			remotetier.RemotePartitionRetention
			SegmentsDeleted []retention.SegmentReport `json:"segments"`
		}{*dryRun, pr, nonNil(segs)}
		data, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		fmt.Fprintf(r.Stdout, "%s\n", data)
		return nil
	}
	verb := "deleted"
	if *dryRun {
		verb = "would delete"
	}
	for _, s := range segs {
		fmt.Fprintf(r.Stdout, "%s segment %d-%d of %s-%d: %d bytes\n", verb, s.BaseOffset, s.LastOffset, pr.Topic, pr.Partition, s.SizeBytes)
	}
	if pr.NewLogStartOffset == pr.LogStartOffset {
		fmt.Fprintf(r.Stdout, "%s-%d: log start offset %d is at or past %d already; nothing changed\n", pr.Topic, pr.Partition, pr.LogStartOffset, *before)
		return nil
	}
	moved := "moved"
	if *dryRun {
		moved = "would move"
	}
	fmt.Fprintf(r.Stdout, "%s-%d: log start offset %s from %d to %d; %d segments (%d bytes) %s\n", pr.Topic, pr.Partition, moved,
		pr.LogStartOffset, pr.NewLogStartOffset, pr.Segments, pr.Bytes, verb)
	return nil
}
