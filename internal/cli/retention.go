package cli

import (
	"context"
	"fmt"

	"github.com/tiered/tiered/retention"
)

var retentionCmd = &command{
	name:    "retention",
	summary: "run one retention pass (delete segments by age and size)",
	help: `usage: tiered retention [--topic T] [--dry-run] [--data-dir DIR] [--json]

Runs one retention pass now over every topic (or --topic T) and prints each deleted
segment — or, with --dry-run, each deletable one — with its reason: retention.ms,
retention.bytes, local.retention.ms, local.retention.bytes or log-start-offset.
Kafka's rules: whole segments only, oldest first, never the active segment;
retention.ms is measured from a segment's largest timestamp; retention.bytes trims
while the partition is over the cap; -1 means unlimited; cleanup.policy=compact deletes
nothing by age or size, compact,delete applies both. A topic with
remote.storage.enable=true keeps its local segments until the remote tier holds them
(remote retention arrives with the remote tier), and the report says so.
When size, not time, deleted data younger than retention.ms, the line is marked
"size beat time".

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --topic T          only this topic
  --dry-run          report what would be deleted; change nothing
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
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	d, _, err := r.openDataDir(*dataDir, true, r.lockWait())
	if err != nil {
		return err
	}
	defer d.Close()
	rep, err := retention.RunOnce(ctx, d, retention.PassOptions{Topic: *topic, DryRun: *dryRun, Now: r.Now})
	if cerr := d.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close data dir: %w", cerr)
	}
	if *asJSON {
		if jerr := writeJSON(r.Stdout, rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		fmt.Fprint(r.Stdout, rep.String())
	}
	return err
}
