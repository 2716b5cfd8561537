package cli

import (
	"context"
	"fmt"

	"github.com/tiered/tiered/compactor"
)

var compactCmd = &command{
	name:    "compact",
	summary: "run one log-cleaning pass over compacted topics",
	help: `usage: tiered compact [--topic T] [--now] [--data-dir DIR] [--json]

Runs one pass of the log cleaner over every topic with cleanup.policy=compact (or
compact,delete), or only --topic T, with Kafka's semantics: offsets and order never
change; the latest value of every key stays; tombstones are kept delete.retention.ms after
the cleaner first sees them, then dropped; aborted transactions are removed; records
newer than min.compaction.lag.ms and the active segment are never touched. A log is
cleaned when its dirty ratio reaches min.cleanable.dirty.ratio or its dirty part is older
than max.compaction.lag.ms; the filthiest first. Prints one line per log: dirty range,
ratio, MB read and written, records before and after, size reduction.

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --topic T          only this topic
  --now              ignore the ratio and min.compaction.lag.ms and clean every compacted
                     log, even with nothing dirty, so tombstones and transaction markers
                     whose delete horizon has passed are dropped (the horizon still applies)
  --json             print the report as JSON

Example:
  tiered compact --topic users --now
`,
	run: runCompact,
}

func runCompact(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("compact")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	topic := fs.String("topic", "", "")
	now := fs.Bool("now", false, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	d, err := r.openDataDirAs(*dataDir, true, viaNone)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg := compactor.DefaultConfig()
	cfg.Now = r.Now
	rep, err := compactor.RunOnce(ctx, d, compactor.PassOptions{Topic: *topic, Force: *now, Config: cfg})
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
