// Package replay owns time-range replay jobs: Replay reads a topic's records
// from one time to another out of a ReplaySource (the fetch service's HTTP
// client, or a catalog such as the bucket's) at a bounded rate, writes them
// as JSON lines or raw record batches, and keeps a ReplayCheckpoint from
// which an interrupted job resumes.
package replay

// Replay: read an offset range of a topic at a bounded rate, with a
// checkpoint to resume from.
//
// The range of each partition is [offset for From, offset for To), both by
// Kafka's ListOffsets rule: the first offset whose record timestamp is >=
// the time, or the log end when every record is older. fetchcache.Offsets are fixed
// when the job starts and kept in the checkpoint, so a resumed job reads the
// same range even after the log has grown. Partitions are read one after
// the other, ascending, each in offset order.
//
// Output. JSON lines (ReplayJSONL): one line per data record with an offset
// in the range, in consume's shape; records of the first and last batch
// outside the range are left out; control records are never written. Raw
// (ReplayRaw): every batch that overlaps the range, whole and unmodified
// (CRC intact), control batches included — so the first and last batch may
// hold records outside the range; filter by offset if that matters. Raw
// batches do not say which partition they come from, so raw output is
// limited to one partition.
//
// Rate. Rate bounds the record-batch bytes of the range delivered per
// second (every batch overlapping the range counts whole, control batches
// included, whatever the output format): a token bucket
// (golang.org/x/time/rate) with a burst of one fetch, started empty so the
// long-run average is the rate. The wait comes before a batch is written.
//
// Checkpoint and resume. Output is buffered; at least every FlushBytes or
// FlushInterval, at batch boundaries, the job writes the buffer, fsyncs the
// output file and then atomically replaces the checkpoint (tmp, fsync,
// rename, fsync dir) with each partition's next offset and the output size
// those offsets correspond to. Resume truncates the output file to that size
// (creating it when that size is 0) and continues from those offsets, so
// after a crash (kill -9 included) no record is lost or written twice. When
// the output is stdout the bytes written after the last checkpoint cannot be
// taken back: a resumed job repeats them (at most one flush's worth). Stdout
// redirected to a regular file is fsynced before each checkpoint as the
// output file is, so a power loss cannot lose bytes a checkpoint counts; a
// pipe or a terminal cannot be synced, and what the reader at its other end
// had not saved before a power loss is not repeated. On
// cancellation (SIGINT) the job stops at a batch boundary, flushes,
// checkpoints, and returns ErrReplayInterrupted. A finished job leaves its
// checkpoint marked complete: resuming it again does nothing. Files are
// opened through ReplayOptions.FS (vfs).
//
// Topic identity. The checkpoint records the topic ID the replay started on
// (when the source knows one). A topic deleted and re-created under the same
// name has a new ID and its offsets start again at 0: a resume whose source
// now reports another ID is refused (ErrTopicRecreated) instead of appending
// the new topic's records at the old topic's offsets. A checkpoint without
// an ID (a topic without one, or written before IDs were recorded) cannot be
// checked: it resumes, and takes the source's ID from then on. A source that
// reports no ID (a fetch service without IDs) is not checked either.
// During a run each read reports the ID of the lineage it was read from
// (httpapi.RawRecords.TopicID, at no cost of its own): an answer from
// another lineage than the checkpoint's stops the run (ErrTopicRecreated)
// before any of it is written, so output and checkpoint end with the old
// topic's last record.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// ReplayFormat is the output format of a replay.
type ReplayFormat string

// Replay output formats.
const (
	ReplayJSONL ReplayFormat = "jsonl" // JSON lines in consume's shape
	ReplayRaw   ReplayFormat = "raw"   // whole record batches, unmodified
)

// Replay defaults.
const (
	// DefaultReplayFetchBytes is max_bytes of each read (a rate below it
	// lowers it to the rate, so one fetch is about a second's worth).
	DefaultReplayFetchBytes = 1 << 20
	// DefaultReplayFlushBytes and DefaultReplayFlushInterval space the
	// flush + checkpoint points.
	// A flush is an fsync of the output and one of the checkpoint (and its
	// directory), not a memory buffer: the bound is on how much a resumed
	// replay to stdout repeats, and on fsyncs per second.
	DefaultReplayFlushBytes    = 64 << 20
	DefaultReplayFlushInterval = 250 * time.Millisecond
	// DefaultReplayThrottleBudget bounds the time one read of the bucket
	// source sleeps on overload answers.
	DefaultReplayThrottleBudget = 30 * time.Second
	// ReplayCheckpointSuffix is appended to the output path to name the
	// default checkpoint.
	ReplayCheckpointSuffix = ".checkpoint"
	// ReplayAllPartitions selects every partition of the topic.
	ReplayAllPartitions int32 = -1

	replayCheckpointVersion = 1
)

// ErrReplayInterrupted is returned when the context ended the replay: the
// output was flushed and the checkpoint written, so it can be resumed.
var ErrReplayInterrupted = errors.New("replay interrupted")

// ErrNoReplayCheckpoint is returned by a resume that finds no checkpoint.
var ErrNoReplayCheckpoint = errors.New("no replay checkpoint")

// ErrTopicRecreated is returned by a resume whose topic now has another
// topic ID than the checkpoint records, and by a run whose source answers
// a read from a lineage with another ID than the one the replay started
// on: the topic was deleted and re-created.
var ErrTopicRecreated = errors.New("topic re-created")

// ReplayOptions configures Replay.
type ReplayOptions struct {
	Source ReplaySource // required
	Topic  string       // required
	// fetchcache.Partition is the one partition to read, or ReplayAllPartitions.
	Partition int32
	// From and To are the time range, epoch milliseconds, From < To.
	From, To int64
	// Rate bounds the record-batch bytes delivered per second; 0: no bound.
	Rate   int64
	Format ReplayFormat // default ReplayJSONL

	// OutPath is the output file; empty writes to Stdout.
	OutPath string
	Stdout  io.Writer
	// CheckpointPath defaults to OutPath + ".checkpoint"; with Stdout and
	// no CheckpointPath no checkpoint is written.
	CheckpointPath string
	// Resume continues from the checkpoint (which must exist); the other
	// options must describe the same job (topic, partition, times, format).
	Resume bool
	// FS holds the output file and the checkpoint; default vfs.Default.
	FS vfs.FS

	FetchBytes    int           // default: DefaultReplayFetchBytes, or Rate if lower
	FlushBytes    int           // default DefaultReplayFlushBytes
	FlushInterval time.Duration // default DefaultReplayFlushInterval

	// Progress is called after every batch and once at the end (Done).
	Progress func(ReplayProgress)

	// Now and Sleep are the clock (defaults time.Now and a timer); the
	// rate limiter and the flush interval use them.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// ReplayProgress is a replay's position. Counts include work done before a
// resume.
type ReplayProgress struct {
	Partition    int32 // the partition being read
	Records      int64 // records written (raw: records of the batches written)
	BatchBytes   int64 // record-batch bytes delivered (what Rate counts)
	OutputBytes  int64 // bytes written to the output
	OffsetsDone  int64 // offsets of the range passed
	OffsetsTotal int64 // offsets in the range
	// OffsetsAtStart and BatchBytesAtStart are OffsetsDone and BatchBytes
	// when this run began (non-zero on resume).
	OffsetsAtStart    int64
	BatchBytesAtStart int64
	Done              bool
}

// statSyncer is an *os.File as Stdout: what it is, and its fsync.
type statSyncer interface {
	Stat() (os.FileInfo, error)
	Sync() error
}

// replayJob is one run of Replay.
type replayJob struct {
	o      ReplayOptions
	cp     ReplayCheckpoint
	cpPath string

	f         vfs.File // the output file, nil for Stdout
	bw        *bufio.Writer
	outErr    error // the output's failed write or sync: no flush after it
	unflushed int
	lastFlush time.Time
	// stdoutFile is Stdout when it is a regular file, synced as f is.
	stdoutFile statSyncer

	lim   *rate.Limiter
	burst int
	fetch int

	dec  record.Decoder
	line []byte

	total, doneAtStart, bytesAtStart int64
}

// Replay runs a replay job to its end, to cancellation of ctx
// (ErrReplayInterrupted), or to an error. The checkpoint it returns
// describes how far it got (nil when it failed before resolving the range).
func Replay(ctx context.Context, o ReplayOptions) (*ReplayCheckpoint, error) {
	j, err := newReplayJob(o)
	if err != nil {
		return nil, err
	}
	if err := j.setup(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if j.f != nil { // not closed below: the run failed
			_ = j.f.Close()
		}
	}()
	runErr := j.run(ctx)
	// Only the context's own error is an interruption: a failure that
	// coincides with a cancel (an output sync, say) is reported as itself.
	interrupted := runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err())
	if runErr == nil {
		j.cp.Complete = true
	}
	// Whatever happened, what was written is consistent at a batch
	// boundary: save it, so a resume continues from here.
	if err := j.flush(); err != nil {
		if err == runErr { // the run ended on this very failure
			return &j.cp, runErr
		}
		return &j.cp, errors.Join(runErr, err)
	}
	j.report(true)
	if j.f != nil {
		if err := j.f.Close(); err != nil {
			return &j.cp, errors.Join(runErr, fmt.Errorf("close output: %w", err))
		}
		j.f = nil
	}
	switch {
	case interrupted:
		return &j.cp, ErrReplayInterrupted
	case runErr != nil:
		return &j.cp, runErr
	}
	return &j.cp, nil
}

func newReplayJob(o ReplayOptions) (*replayJob, error) {
	switch {
	case o.Source == nil:
		return nil, errors.New("replay: no source")
	case o.Topic == "":
		return nil, errors.New("replay: no topic")
	case o.From < 0 || o.To <= o.From:
		return nil, fmt.Errorf("replay: time range [%d, %d) is empty or negative", o.From, o.To)
	case o.Rate < 0:
		return nil, fmt.Errorf("replay: negative rate %d", o.Rate)
	case o.Partition < ReplayAllPartitions:
		return nil, fmt.Errorf("replay: partition %d", o.Partition)
	}
	switch o.Format {
	case "":
		o.Format = ReplayJSONL
	case ReplayJSONL, ReplayRaw:
	default:
		return nil, fmt.Errorf("replay: unknown format %q (want jsonl or raw)", o.Format)
	}
	if o.OutPath == "" && o.Stdout == nil {
		return nil, errors.New("replay: neither an output file nor stdout")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = ctxsleep.Sleep
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.FlushBytes <= 0 {
		o.FlushBytes = DefaultReplayFlushBytes
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultReplayFlushInterval
	}
	j := &replayJob{o: o, cpPath: o.CheckpointPath}
	if j.cpPath == "" && o.OutPath != "" {
		j.cpPath = o.OutPath + ReplayCheckpointSuffix
	}
	if o.OutPath != "" && j.cpPath != "" && (samePath(j.cpPath, o.OutPath) || samePath(j.cpPath+".tmp", o.OutPath)) {
		// Each checkpoint would replace (or its temporary truncate) the output.
		return nil, fmt.Errorf("replay: checkpoint %s would overwrite the output %s: give another checkpoint file", j.cpPath, o.OutPath)
	}
	if o.Resume && j.cpPath == "" {
		return nil, fmt.Errorf("%w: resuming a replay to stdout needs the checkpoint file it wrote (--checkpoint FILE)", ErrNoReplayCheckpoint)
	}
	j.fetch = o.FetchBytes
	if j.fetch <= 0 {
		j.fetch = DefaultReplayFetchBytes
		if o.Rate > 0 && o.Rate < int64(j.fetch) {
			j.fetch = int(o.Rate)
		}
	}
	if o.Rate > 0 {
		j.burst = j.fetch
		j.lim = rate.NewLimiter(rate.Limit(o.Rate), j.burst)
		j.lim.AllowN(o.Now(), j.burst) // start empty: the average is the rate
	}
	return j, nil
}

// setup resolves the ranges (or loads them from the checkpoint) and opens
// the output.
func (j *replayJob) setup(ctx context.Context) error {
	o := j.o
	if o.Resume {
		cp, err := ReadReplayCheckpointFS(o.FS, j.cpPath)
		if err != nil {
			return err
		}
		var diffs []string
		if cp.Topic != o.Topic {
			diffs = append(diffs, fmt.Sprintf("topic %q", cp.Topic))
		}
		if cp.Partition != o.Partition {
			if cp.Partition < 0 {
				diffs = append(diffs, "all partitions")
			} else {
				diffs = append(diffs, fmt.Sprintf("partition %d", cp.Partition))
			}
		}
		if cp.From != o.From || cp.To != o.To {
			diffs = append(diffs, fmt.Sprintf("time range [%s, %s)", fmtMillis(cp.From), fmtMillis(cp.To)))
		}
		if cp.Format != o.Format {
			diffs = append(diffs, fmt.Sprintf("format %s", cp.Format))
		}
		if len(diffs) > 0 {
			return fmt.Errorf("checkpoint %s belongs to another replay (%v); give the same flags or start without --resume", j.cpPath, diffs)
		}
		j.cp = *cp
		if err := j.checkTopicID(ctx); err != nil {
			return err
		}
		if err := j.openResumed(); err != nil {
			return err
		}
	} else {
		ranges, topicID, err := j.resolve(ctx)
		if err != nil {
			return err
		}
		j.cp = ReplayCheckpoint{Version: replayCheckpointVersion, Topic: o.Topic, TopicID: topicID, Partition: o.Partition,
			From: o.From, To: o.To, Format: o.Format, Ranges: ranges}
		// The new checkpoint goes first: a crash before the output is
		// truncated leaves a checkpoint that truncates it on resume.
		if err := j.checkpoint(); err != nil {
			return err
		}
		if o.OutPath != "" {
			f, err := j.openOutput(os.O_WRONLY | os.O_CREATE | os.O_TRUNC)
			if err != nil {
				return fmt.Errorf("open output: %w", err)
			}
			j.f = f
		}
	}
	var w io.Writer = o.Stdout
	if j.f != nil {
		w = j.f
	} else if sf, ok := o.Stdout.(statSyncer); ok {
		// Stdout redirected to a file: sync it before each checkpoint,
		// or a power loss could lose output bytes a checkpoint counts,
		// leaving a hole where a resume is documented to repeat.
		if fi, err := sf.Stat(); err == nil && fi.Mode().IsRegular() {
			j.stdoutFile = sf
		}
	}
	j.bw = bufio.NewWriterSize(w, 64<<10)
	j.lastFlush = o.Now()
	for _, r := range j.cp.Ranges {
		j.total += r.End - r.Start
		j.doneAtStart += r.Next - r.Start
	}
	j.bytesAtStart = j.cp.BatchBytes
	return nil
}

// samePath reports whether a and b name the same path (cleaned, made
// absolute where the working directory is known).
func samePath(a, b string) bool {
	abs := func(p string) string {
		if q, err := filepath.Abs(p); err == nil {
			return q
		}
		return filepath.Clean(p)
	}
	return abs(a) == abs(b)
}

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// checkTopicID refuses to resume on a re-created topic: the checkpoint's
// offsets are the old topic's, the new one's start again at 0, and carrying
// on would add another topic's records to the output. A checkpoint without
// an ID takes the source's, so that later resumes are checked. A complete
// checkpoint reads nothing and is not checked.
func (j *replayJob) checkTopicID(ctx context.Context) error {
	if j.cp.Complete || len(j.cp.Ranges) == 0 {
		return nil
	}
	p := j.cp.Ranges[0].Partition
	for _, r := range j.cp.Ranges {
		if r.Next < r.End {
			p = r.Partition
			break
		}
	}
	id, err := j.o.Source.TopicID(ctx, j.o.Topic, p)
	if err != nil {
		return err
	}
	switch {
	case id == "" || id == j.cp.TopicID:
		return nil // the same topic, or no way to tell
	case j.cp.TopicID == "":
		j.cp.TopicID = id
		return nil
	}
	what := "start a new replay without --resume"
	if j.o.OutPath != "" {
		what += " (it replaces " + j.o.OutPath + "; give another --out to keep what was written)"
	}
	return fmt.Errorf("%w: checkpoint %s was written for topic %q with topic ID %s, but %q now has topic ID %s: the topic was deleted and re-created, and its offsets are no longer the ones the checkpoint counts; %s",
		ErrTopicRecreated, j.cpPath, j.o.Topic, j.cp.TopicID, j.o.Topic, id, what)
}

// checkReadTopicID stops the run when a read was answered from another
// lineage than the one the replay started on: the topic was deleted and
// re-created during the run, and the answer holds the new topic's records
// at offsets the old one's range counts. Nothing of the answer is written,
// so the output and the checkpoint end with the old topic's last record
// written. Each answer carries its ID (no request of its own); an answer
// or a checkpoint without one cannot be checked.
func (j *replayJob) checkReadTopicID(r *ReplayRange, id string) error {
	if id == "" || j.cp.TopicID == "" || id == j.cp.TopicID {
		return nil
	}
	return fmt.Errorf("%w during the replay: %s-%d now serves topic ID %s, but the replay started on topic ID %s: the topic was deleted and re-created, and its offsets are no longer the ones being replayed; the output stops before offset %d of %s-%d, after the old topic's last record written (checkpoint%s); replay the new topic with a new replay without --resume",
		ErrTopicRecreated, j.o.Topic, r.Partition, id, j.cp.TopicID, r.Next, j.o.Topic, r.Partition, j.cpNote())
}

// cpNote names the checkpoint file for a message, or says there is none.
func (j *replayJob) cpNote() string {
	if j.cpPath == "" {
		return ": none, the output is stdout"
	}
	return " " + j.cpPath
}

// resolve turns the time range into offset ranges, partition by partition,
// and reads the topic ID they belong to.
func (j *replayJob) resolve(ctx context.Context) ([]ReplayRange, string, error) {
	o := j.o
	parts := []int32{o.Partition}
	if o.Partition == ReplayAllPartitions {
		ps, err := o.Source.Partitions(ctx, o.Topic)
		if err != nil {
			return nil, "", err
		}
		parts = slices.Clone(ps)
		slices.Sort(parts)
		if len(parts) == 0 {
			return nil, "", fmt.Errorf("topic %q has no partitions", o.Topic)
		}
	}
	if o.Format == ReplayRaw && len(parts) > 1 {
		return nil, "", fmt.Errorf("raw output holds one partition (batches do not say which partition they come from) and topic %q has %d: choose one", o.Topic, len(parts))
	}
	// The ID is read before the offsets: should the topic be re-created in
	// between, the checkpoint names the old ID with the new topic's
	// offsets, and a resume refuses, rather than the other way round.
	topicID, err := o.Source.TopicID(ctx, o.Topic, parts[0])
	if err != nil {
		return nil, "", err
	}
	out := make([]ReplayRange, 0, len(parts))
	for _, p := range parts {
		offs, err := o.Source.Offsets(ctx, o.Topic, p)
		if err != nil {
			return nil, "", err
		}
		at := func(ts int64) (int64, error) {
			off, found, err := o.Source.OffsetForTimestamp(ctx, o.Topic, p, ts)
			if err != nil {
				return 0, err
			}
			if !found {
				return offs.LogEnd, nil
			}
			return min(max(off, offs.LogStart), offs.LogEnd), nil
		}
		start, err := at(o.From)
		if err != nil {
			return nil, "", err
		}
		end, err := at(o.To)
		if err != nil {
			return nil, "", err
		}
		end = max(end, start)
		out = append(out, ReplayRange{Partition: p, Start: start, End: end, Next: start})
	}
	return out, topicID, nil
}

func (j *replayJob) run(ctx context.Context) error {
	for i := range j.cp.Ranges {
		if err := j.partition(ctx, &j.cp.Ranges[i]); err != nil {
			return err
		}
	}
	return nil
}

// partition delivers r from r.Next to r.End.
func (j *replayJob) partition(ctx context.Context, r *ReplayRange) error {
	topic := j.o.Topic
	for r.Next < r.End {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := j.o.Source.ReadRaw(ctx, topic, r.Partition, r.Next, j.fetch)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var oe *fetchcache.OffsetOutOfRangeError
			if errors.As(err, &oe) && oe.LogStart > r.Next {
				return fmt.Errorf("offsets %d-%d of %s-%d were deleted (log start offset now %d) before they were replayed: %w", r.Next, min(oe.LogStart, r.End)-1, topic, r.Partition, oe.LogStart, err)
			}
			return err
		}
		if err := j.checkReadTopicID(r, res.TopicID); err != nil {
			return err
		}
		if len(res.Data) == 0 {
			return fmt.Errorf("%s-%d ends at offset %d, before the range end %d: the log was truncated", topic, r.Partition, r.Next, r.End)
		}
		it := record.NewIter(res.Data)
		it.Verify = true
		progressed := false
		for r.Next < r.End {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.NextOffset() <= r.Next {
				continue
			}
			progressed = true
			past, err := j.startsAt(b, r.End)
			if err != nil {
				return fmt.Errorf("decode batch at offset %d of %s-%d: %w", b.BaseOffset(), topic, r.Partition, err)
			}
			if past { // a gap (compaction) reaches past the end
				r.Next = r.End
				break
			}
			if err := j.wait(ctx, len(b)); err != nil {
				return err
			}
			if err := j.deliver(r, b); err != nil {
				return err
			}
			r.Next = min(b.NextOffset(), r.End)
			j.cp.BatchBytes += int64(len(b))
			j.report(false)
			if j.unflushed >= j.o.FlushBytes || j.o.Now().Sub(j.lastFlush) >= j.o.FlushInterval {
				if err := j.flush(); err != nil {
					return err
				}
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("read %s-%d at offset %d: %w", topic, r.Partition, r.Next, err)
		}
		if !progressed {
			return fmt.Errorf("read %s-%d at offset %d: no whole batch in the answer", topic, r.Partition, r.Next)
		}
	}
	return nil
}

// startsAt reports whether b's first offset is end or past it. A
// compressed magic 0/1 wrapper's offset field is its last inner offset, so
// when that is past end its first is read from its records (only then: a
// wrapper whose last offset is below end starts below it); any other
// batch's first is its base offset.
func (j *replayJob) startsAt(b record.Batch, end int64) (bool, error) {
	if b.BaseOffset() < end || !b.IsLegacy() || b.Codec() == codec.None {
		return b.BaseOffset() >= end, nil
	}
	recs, err := j.dec.Records(b)
	if err != nil {
		return false, err
	}
	return recs[0].Offset >= end, nil
}

// wait takes n bytes from the rate limiter, sleeping as needed. A batch
// larger than the burst is taken in burst-sized parts.
func (j *replayJob) wait(ctx context.Context, n int) error {
	if j.lim == nil {
		return nil
	}
	for n > 0 {
		k := min(n, j.burst)
		now := j.o.Now()
		res := j.lim.ReserveN(now, k)
		if !res.OK() {
			return fmt.Errorf("rate limiter refused %d bytes", k)
		}
		if d := res.DelayFrom(now); d > 0 {
			if err := j.o.Sleep(ctx, d); err != nil {
				res.CancelAt(j.o.Now())
				return err
			}
		}
		n -= k
	}
	return nil
}

// deliver writes one batch's part of the range.
func (j *replayJob) deliver(r *ReplayRange, b record.Batch) error {
	if j.o.Format == ReplayRaw {
		n := int64(b.RecordCount())
		if b.IsLegacy() && b.Codec() != codec.None {
			// A compressed magic 0/1 wrapper's count is known only
			// from its records.
			recs, err := j.dec.Records(b)
			if err != nil {
				return fmt.Errorf("decode batch at offset %d of %s-%d: %w", b.BaseOffset(), j.o.Topic, r.Partition, err)
			}
			n = int64(len(recs))
		}
		j.cp.Records += n
		return j.write(b)
	}
	if b.IsControl() {
		return nil
	}
	recs, err := j.dec.Records(b)
	if err != nil {
		return fmt.Errorf("decode batch at offset %d of %s-%d: %w", b.BaseOffset(), j.o.Topic, r.Partition, err)
	}
	for i := range recs {
		if recs[i].Offset < r.Next || recs[i].Offset >= r.End {
			continue
		}
		j.line = recordjson.AppendLine(j.line[:0], r.Partition, &recs[i])
		if err := j.write(j.line); err != nil {
			return err
		}
		j.cp.Records++
	}
	return nil
}

func (j *replayJob) write(p []byte) error {
	if _, err := j.bw.Write(p); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	j.unflushed += len(p)
	j.cp.OutputBytes += int64(len(p))
	return nil
}

func (j *replayJob) report(done bool) {
	if j.o.Progress == nil {
		return
	}
	p := ReplayProgress{Records: j.cp.Records, BatchBytes: j.cp.BatchBytes, OutputBytes: j.cp.OutputBytes,
		OffsetsTotal: j.total, OffsetsAtStart: j.doneAtStart, BatchBytesAtStart: j.bytesAtStart, Done: done, Partition: -1}
	for _, r := range j.cp.Ranges {
		p.OffsetsDone += r.Next - r.Start
		if p.Partition < 0 && r.Next < r.End {
			p.Partition = r.Partition
		}
	}
	if p.Partition < 0 && len(j.cp.Ranges) > 0 {
		p.Partition = j.cp.Ranges[len(j.cp.Ranges)-1].Partition
	}
	j.o.Progress(p)
}
