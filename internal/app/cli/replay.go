package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/replay"
)

// replayProgressEvery spaces the plain progress lines when stderr is not a
// terminal.
const replayProgressEvery = 5 * time.Second

// replayCacheBytes is the chunk cache of replay --bucket: a sequential
// reader needs little more than its read-ahead.
const replayCacheBytes = 64 << 20

var replayCmd = &command{
	name:    "replay",
	summary: "read a time range of a topic at a bounded rate, resumably",
	help: `usage: tiered replay (--fetch URL | --bucket URL) --topic T [--partition P]
                     --from TIME --to TIME [--rate BYTES/s] [--out FILE] [--format jsonl|raw]
                     [--checkpoint FILE] [--resume]

Reads the records of a time range from the remote tier, through a fetch service (--fetch)
or straight from the bucket (--bucket; no broker and no fetch service involved).

Range: for each partition, [offset for --from, offset for --to), both by Kafka's
ListOffsets rule: the first offset whose record timestamp is >= the time, or the log end
if every record is older. The offsets are fixed when the replay starts (and kept in the
checkpoint). Partitions are read one after the other, ascending, each in offset order.

Output (--out FILE, or stdout):
  jsonl  one JSON object per record, the shape consume prints:
         {"partition": 0, "offset": 5, "timestamp": ms, "key": ..., "value": ..., "headers": [...]}
         Records of the edge batches outside the range and control records are left out.
  raw    the record batches overlapping the range, whole and byte for byte as stored (CRC
         intact, control batches included): the first and last batch may hold records
         outside the range. One partition only (batches do not name their partition).

--rate bounds the record-batch bytes delivered per second (every batch overlapping the
range counts whole, in both formats); 0 means no bound.

Progress goes to stderr: a progress bar on a terminal (records, bytes, ETA), otherwise a
line every 5 seconds, and a summary at the end.

Checkpoint and resume: every 250 ms (or 64 MiB of output), the output is flushed and
fsynced, then the checkpoint (--checkpoint, default FILE.checkpoint) is replaced atomically
with each partition's next offset and the output size they correspond to. --resume
truncates the output to that size and continues from those offsets: after a crash, kill -9
or Ctrl-C, no record is lost or written twice. The flags must be the same as the run that
wrote the checkpoint (--rate may change). A finished replay marks its checkpoint complete:
resuming it does nothing. Writing to stdout, --checkpoint is needed to resume, and what was
printed after the last checkpoint (at most 250 ms' worth) is printed again; stdout redirected
to a file is fsynced before each checkpoint as --out is (a pipe or a terminal cannot be).
The checkpoint records the topic's ID: if the topic was deleted and re-created since (a new
ID, offsets starting again at 0), --resume refuses, naming both IDs; start a new replay
without --resume. A checkpoint without an ID (older releases) cannot be checked. Format:
docs/format/replay-checkpoint.md.

SIGINT/SIGTERM stop at a batch boundary, flush, write the checkpoint and exit 0 with a line
on stderr saying how to resume. Exit status 1 on errors (unknown topic, unreachable
service, deleted offsets), 2 on bad flags.

Flags:
  --fetch URL         fetch service base URL, e.g. http://127.0.0.1:8080
  --bucket URL        bucket: file:///dir, mem://name[/prefix] or
                      s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --topic T           topic (required)
  --partition P       one partition (default: every partition of the topic)
  --from TIME         start of the range (required): RFC 3339, e.g. 2024-05-01T00:00:00Z,
                      or epoch milliseconds
  --to TIME           end of the range, exclusive (required; after --from)
  --rate BYTES/s      e.g. 1048576, 512k, 10M (default 0: unbounded)
  --out FILE          output file (default stdout); replaced unless --resume
  --format F          jsonl (default) or raw
  --checkpoint FILE   checkpoint file (default FILE.checkpoint with --out)
  --resume            continue from the checkpoint

Example:
  tiered replay --fetch http://127.0.0.1:8080 --topic orders --from 2024-05-01T00:00:00Z \
                --to 2024-05-02T00:00:00Z --rate 10M --out orders.jsonl
`,
	run: runReplay,
}

// parseReplayTime reads --from/--to: RFC 3339 or epoch milliseconds.
func parseReplayTime(flagName, s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, usagef("--%s %s: negative timestamp", flagName, s)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, usagef("--%s %q is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z) or epoch milliseconds", flagName, s)
	}
	if t.Before(time.Unix(0, 0)) {
		return 0, usagef("--%s %s is before 1970", flagName, s)
	}
	// Record timestamps are whole milliseconds: a time between two is
	// rounded up, so [from, to) holds exactly the records whose timestamps
	// fall in it (truncating would take in a record before --from and
	// leave out one before --to).
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms, nil
}

func runReplay(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("replay")
	fetchURL := fs.String("fetch", "", "")
	bucketURL := fs.String("bucket", "", "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	fromS := fs.String("from", "", "")
	toS := fs.String("to", "", "")
	rateS := fs.String("rate", "0", "")
	out := fs.String("out", "", "")
	format := fs.String("format", string(replay.ReplayJSONL), "")
	cpPath := fs.String("checkpoint", "", "")
	resume := fs.Bool("resume", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	set := setFlags(fs)
	switch {
	case set["fetch"] && set["bucket"]:
		return usagef("--fetch and --bucket cannot be used together")
	case !set["fetch"] && !set["bucket"]:
		return usagef("give --fetch URL or --bucket URL")
	}
	if err := requireTopic(*topic); err != nil {
		return err
	}
	if set["partition"] && (*partition < 0 || *partition > math.MaxInt32) {
		return usagef("--partition %d is out of range", *partition)
	}
	for _, f := range []string{"from", "to"} {
		if !set[f] {
			return usagef("missing required flag --%s", f)
		}
	}
	from, err := parseReplayTime("from", *fromS)
	if err != nil {
		return err
	}
	to, err := parseReplayTime("to", *toS)
	if err != nil {
		return err
	}
	if to <= from {
		return usagef("--to %s must be after --from %s", *toS, *fromS)
	}
	rate, err := parseByteRate(*rateS)
	if err != nil {
		return usagef("--rate: %v", err)
	}
	f := replay.ReplayFormat(*format)
	if f != replay.ReplayJSONL && f != replay.ReplayRaw {
		return usagef("--format %q: want jsonl or raw", *format)
	}
	if set["out"] && *out == "" {
		return usagef("--out needs a file name")
	}
	if *resume && *out == "" && *cpPath == "" {
		return usagef("--resume with output to stdout needs --checkpoint FILE (the checkpoint the interrupted run wrote)")
	}

	o := replay.ReplayOptions{Topic: *topic, Partition: replay.ReplayAllPartitions, From: from, To: to, Rate: rate,
		Format: f, OutPath: *out, Stdout: r.Stdout, CheckpointPath: *cpPath, Resume: *resume}
	if set["partition"] {
		o.Partition = int32(*partition)
	}
	where := ""
	if set["fetch"] {
		hc := newHTTPClient()
		defer hc.CloseIdleConnections()
		c, err := httpapi.NewClient(*fetchURL, hc)
		if err != nil {
			return usagef("--fetch: %v", err)
		}
		o.Source, where = c, c.String()
	} else {
		b, err := openReadBucket(ctx, *bucketURL)
		if err != nil {
			return err
		}
		defer b.Close()
		cb, err := chunkcache.NewCachingBucket(b, chunkcache.CacheOptions{MemoryBytes: replayCacheBytes})
		if err != nil {
			return fmt.Errorf("chunk cache: %w", err)
		}
		defer cb.Close()
		cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
		if err != nil {
			return err
		}
		o.Source, where = replay.NewCatalogReplaySource(cat), shownURL(*bucketURL)
	}

	prog := newReplayProgress(r.Stderr, *topic, r.now)
	o.Progress = prog.update
	start := r.now()
	cp, err := replay.Replay(ctx, o)
	prog.finish()
	checkpointFile := *cpPath
	if checkpointFile == "" && *out != "" {
		checkpointFile = *out + replay.ReplayCheckpointSuffix
	}
	switch {
	case errors.Is(err, replay.ErrReplayInterrupted):
		if checkpointFile == "" {
			fmt.Fprintf(r.Stderr, "tiered replay: interrupted after %d records (no checkpoint: give --out or --checkpoint to be able to resume)\n", cp.Records)
		} else {
			fmt.Fprintf(r.Stderr, "tiered replay: interrupted after %d records; checkpoint %s; run the same command with --resume to continue\n", cp.Records, checkpointFile)
		}
		return nil
	case errors.Is(err, replay.ErrNoReplayCheckpoint):
		return fmt.Errorf("%w: nothing to resume (run without --resume to start the replay)", err)
	case err != nil:
		if cp == nil && ctx.Err() != nil {
			fmt.Fprintln(r.Stderr, "tiered replay: interrupted before the first record")
			return nil
		}
		return fmt.Errorf("replay %s from %s: %w", *topic, where, err)
	}
	secs := max(r.now().Sub(start).Seconds(), 1e-3)
	thisRun := cp.BatchBytes - prog.last.BatchBytesAtStart
	fmt.Fprintf(r.Stderr, "tiered replay: done: %d records, %s of record batches (this run %s at %s/s), %s written\n",
		cp.Records, humanBytes(cp.BatchBytes), humanBytes(thisRun), humanBytes(int64(float64(thisRun)/secs)), humanBytes(cp.OutputBytes))
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// replayProgress shows progress on stderr: a bar on a terminal, plain
// lines otherwise.
type replayProgress struct {
	w     io.Writer
	topic string
	now   func() time.Time
	tty   bool

	bar       *progressbar.ProgressBar
	started   time.Time
	lastLine  time.Time
	lastDesc  time.Time
	last      replay.ReplayProgress
	haveFirst bool
}

func newReplayProgress(w io.Writer, topic string, now func() time.Time) *replayProgress {
	p := &replayProgress{w: w, topic: topic, now: now}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *replayProgress) update(s replay.ReplayProgress) {
	now := p.now()
	if !p.haveFirst {
		p.haveFirst, p.started, p.lastLine = true, now, now
		if p.tty && s.OffsetsTotal > s.OffsetsAtStart {
			p.bar = progressbar.NewOptions64(s.OffsetsTotal-s.OffsetsAtStart,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription("replay "+p.topic),
				progressbar.OptionSetWidth(30),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionSetElapsedTime(true),
				progressbar.OptionThrottle(200*time.Millisecond),
			)
		}
	}
	p.last = s
	if p.bar != nil {
		if now.Sub(p.lastDesc) >= 200*time.Millisecond || s.Done {
			p.lastDesc = now
			p.bar.Describe(fmt.Sprintf("replay %s-%d: %d records, %s", p.topic, s.Partition, s.Records, humanBytes(s.BatchBytes)))
		}
		_ = p.bar.Set64(s.OffsetsDone - s.OffsetsAtStart)
		return
	}
	if !p.tty && now.Sub(p.lastLine) >= replayProgressEvery && !s.Done {
		p.lastLine = now
		fmt.Fprintln(p.w, p.line(s, now))
	}
}

// line is a plain progress line: offsets done, records, bytes, rate, ETA.
func (p *replayProgress) line(s replay.ReplayProgress, now time.Time) string {
	pct := 100.0
	if s.OffsetsTotal > 0 {
		pct = 100 * float64(s.OffsetsDone) / float64(s.OffsetsTotal)
	}
	secs := now.Sub(p.started).Seconds()
	eta := "?"
	if done := s.OffsetsDone - s.OffsetsAtStart; done > 0 && secs > 0 {
		left := time.Duration(float64(s.OffsetsTotal-s.OffsetsDone) / (float64(done) / secs) * float64(time.Second))
		eta = left.Round(time.Second).String()
	}
	return fmt.Sprintf("tiered replay: %s-%d: %d/%d offsets (%.1f%%), %d records, %s of batches, ETA %s",
		p.topic, s.Partition, s.OffsetsDone, s.OffsetsTotal, pct, s.Records, humanBytes(s.BatchBytes), eta)
}

func (p *replayProgress) finish() {
	if p.bar != nil {
		if !p.bar.IsFinished() {
			_ = p.bar.Exit()
		}
		fmt.Fprintln(p.w) // the bar leaves the cursor on its line
	}
}
