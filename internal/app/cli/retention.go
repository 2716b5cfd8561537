package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/retention"
)

var retentionCmd = &command{
	name:    "retention",
	summary: "run one retention pass (delete segments by age and size)",
	help: `usage: tiered retention [--topic T] [--dry-run] [--data-dir DIR] [--bucket URL] [--gc-grace D] [--json]

Runs one retention pass now over every topic (or --topic T) and prints each deleted
segment — or, with --dry-run, each deletable one — with its reason: retention.ms,
retention.bytes, local.retention.ms, local.retention.bytes or log-start-offset.
Kafka's rules: whole segments only, oldest first, never the active segment;
retention.ms is measured from a segment's largest timestamp; retention.bytes trims
while the partition is over the cap; -1 means unlimited; cleanup.policy=compact deletes
nothing by age or size, compact,delete applies both. A topic with
remote.storage.enable=true keeps its local segments until the remote tier holds them;
without --bucket nobody can tell, so they are all kept, and the report says so.

With --bucket URL, remote-enabled topics are also trimmed in the bucket first:
retention.ms and retention.bytes over the whole log (remote and local) decide, the removal
is committed to the partition's manifest first, then the objects it no longer references
are deleted, then the local copies below the new log start offset. Local segments then
follow local.retention.ms and local.retention.bytes, each deleted only once the bucket
holds all its offsets. Last, objects no manifest references that are older than
--gc-grace (upload attempts that crashed or lost a race) are garbage-collected.
When size, not time, deleted data younger than retention.ms, the line is marked
"size beat time".

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --topic T          only this topic
  --dry-run          report what would be deleted; change nothing
  --bucket URL       the remote tier: file:///dir, mem://name[/prefix] or
                     s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --gc-grace D       age from which unreferenced objects are deleted (default 1h)
  --json             print the report as JSON

Example:
  tiered retention --topic orders --dry-run
`,
	run: runRetention,
}

func runRetention(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("retention")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	topic := fs.String("topic", "", "")
	dryRun := fs.Bool("dry-run", false, "")
	bucketURL := fs.String("bucket", "", "")
	grace := fs.Duration("gc-grace", remotetier.DefaultGCGrace, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if setFlags(fs)["bucket"] && *bucketURL == "" {
		return usagef("--bucket is empty: give a bucket URL, or leave --bucket out for a local pass")
	}
	if *grace <= 0 {
		return usagef("--gc-grace %v must be positive", *grace)
	}
	if _, set := setFlags(fs)["gc-grace"]; set && *bucketURL == "" {
		return usagef("--gc-grace needs --bucket")
	}
	d, err := r.openDataDirAs(*dataDir, true, viaNone)
	if err != nil {
		return err
	}
	defer d.Close()
	// An unknown --topic is one error, before any pass (each would report it).
	if _, err := d.SelectTopics(*topic); err != nil {
		return err
	}
	opts := retention.PassOptions{Topic: *topic, DryRun: *dryRun, Now: r.Now}
	var remote *remotetier.RetentionReport
	var gc *remotetier.GCReport
	var errs []error
	if *bucketURL != "" {
		b, err := openWriteBucket(ctx, *bucketURL)
		if err != nil {
			return err
		}
		defer b.Close()
		rrep, rerr := remotetier.RemoteRetention(ctx, b, d, remotetier.RetentionOptions{Topic: *topic, DryRun: *dryRun, Now: r.Now})
		remote = &rrep
		if rerr != nil {
			errs = append(errs, rerr)
		}
		if opts.Remote, err = remotetier.RemoteLookup(b, ""); err != nil {
			return err
		}
		rep, err := retention.RunOnce(ctx, d, opts)
		if err != nil {
			errs = append(errs, err)
		}
		grep, gerr := remotetier.GC(ctx, b, remotetier.GCOptions{Grace: *grace, Now: r.Now, DryRun: *dryRun})
		gc = &grep
		if gerr != nil {
			errs = append(errs, gerr)
		}
		return finishRetention(r, d, rep, remote, gc, *asJSON, errs)
	}
	rep, err := retention.RunOnce(ctx, d, opts)
	if err != nil {
		errs = append(errs, err)
	}
	return finishRetention(r, d, rep, nil, nil, *asJSON, errs)
}

func finishRetention(r *Runner, d interface{ Close() error }, rep retention.PassReport, remote *remotetier.RetentionReport,
	gc *remotetier.GCReport, asJSON bool, errs []error) error {
	if cerr := d.Close(); cerr != nil {
		errs = append(errs, fmt.Errorf("close data dir: %w", cerr))
	}
	err := errors.Join(errs...)
	if asJSON {
		out := struct {
			retention.PassReport
			Remote *remotetier.RetentionReport `json:"remote,omitempty"`
			GC     *remotetier.GCReport        `json:"gc,omitempty"`
		}{rep, remote, gc}
		if jerr := writeJSON(r.Stdout, out); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		if remote != nil {
			verb := "deleted"
			if remote.DryRun {
				verb = "deletable"
			}
			fmt.Fprintf(r.Stdout, "remote: %d segments %s, %d bytes\n", remote.DeletedSegments, verb, remote.DeletedBytes)
			for _, s := range remote.Segments {
				fmt.Fprintf(r.Stdout, "remote  %s-%d  offsets %d..%d  %d bytes  %s\n", s.Topic, s.Partition, s.BaseOffset, s.LastOffset, s.SizeBytes, s.Reason)
			}
			for _, p := range remote.Partitions {
				if p.Error != "" {
					fmt.Fprintf(r.Stdout, "remote  %s-%d  error: %s\n", p.Topic, p.Partition, oneLine(p.Error))
				}
			}
		}
		fmt.Fprint(r.Stdout, rep.String())
		if gc != nil {
			fmt.Fprintf(r.Stdout, "garbage collection: %d orphaned objects deleted (%d bytes), %d younger than the grace period kept\n",
				len(gc.Deleted), gc.DeletedBytes, gc.Young)
			for _, s := range gc.Skipped {
				fmt.Fprintf(r.Stdout, "garbage collection skipped %s\n", s)
			}
		}
	}
	return err
}
