package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tiered/tiered/internal/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
)

// consumeFetchBytes is how much of the log one read returns (at least one
// whole batch), like a consumer's max.partition.fetch.bytes.
const consumeFetchBytes = 1 << 20

var consumeCmd = &command{
	name:    "consume",
	summary: "print a partition's records as JSON lines",
	help: `usage: tiered consume --topic T --partition P [--from-offset N | --from-time TIME] [--max-records N] [--follow] [--data-dir DIR]

Prints the records of one partition to stdout, one JSON object per line:
  {"partition": 0, "offset": 5, "timestamp": ms, "key": "text" | null, "value": "text" | null,
   "headers": [{"key": "k", "value": "v" | null}]}
Bytes that are not UTF-8 are printed base64 in "key_b64"/"value_b64" instead. A null
value is a tombstone. timestamp is the record's CreateTime (the broker's time for
LogAppendTime topics).

Starts at the log start offset and exits at the log end. Control records (transaction
markers, KRaft control records) are never printed. Records of aborted transactions ARE
printed: consume reads like a READ_UNCOMMITTED consumer.

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --topic T          topic (required)
  --partition P      partition (required)
  --from-offset N    start at offset N (between the log start and end offsets)
  --from-time TIME   start at the first record with timestamp >= TIME (RFC 3339, e.g.
                     2024-05-01T12:00:00Z, or milliseconds since the epoch); if every
                     record is older, start at the log end
  --max-records N    stop after N records
  --follow           at the log end, keep polling for new records until interrupted
                     (SIGINT/SIGTERM exit 0). Between polls the data dir is released so
                     that produce can write to it.

Example:
  tiered consume --topic orders --partition 0 --from-time 2024-05-01T00:00:00Z --max-records 10
`,
	run: runConsume,
}

// parseTime reads --from-time: RFC 3339 or epoch milliseconds.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, usagef("--from-time %s: negative timestamp", s)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, usagef("--from-time %q is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z) or epoch milliseconds", s)
	}
	return t.UnixMilli(), nil
}

func (r *Runner) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 500 * time.Millisecond
}

// consumer prints one partition's records from offset on.
type consumer struct {
	out       *bufio.Writer
	partition int32
	offset    int64
	left      int64 // records still to print; < 0: no limit
	dec       record.Decoder
	line      []byte
}

// drain prints from c.offset to the log end (or until the limit). It
// reports whether the limit was reached.
func (c *consumer) drain(ctx context.Context, l *localtier.Log) (done bool, err error) {
	for {
		if ctx.Err() != nil {
			return true, nil
		}
		res, err := l.Read(c.offset, consumeFetchBytes, true)
		if err != nil {
			return false, err
		}
		if len(res.Data) == 0 {
			return false, nil
		}
		it := record.NewIter(res.Data)
		it.Verify = true
		progressed := false
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.NextOffset() <= c.offset {
				continue
			}
			progressed = true
			if b.IsControl() {
				c.offset = b.NextOffset()
				continue
			}
			recs, err := c.dec.Records(b)
			if err != nil {
				return false, fmt.Errorf("decode batch at offset %d of %s: %w", b.BaseOffset(), l.Dir(), err)
			}
			for i := range recs {
				if recs[i].Offset < c.offset {
					continue
				}
				c.line = recordjson.AppendLine(c.line[:0], c.partition, &recs[i])
				if _, err := c.out.Write(c.line); err != nil {
					return false, fmt.Errorf("write stdout: %w", err)
				}
				if c.left > 0 {
					c.left--
					if c.left == 0 {
						return true, nil
					}
				}
			}
			c.offset = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			return false, fmt.Errorf("read %s at offset %d: %w", l.Dir(), c.offset, err)
		}
		if !progressed {
			return false, fmt.Errorf("read %s at offset %d: no whole batch in the log's answer", l.Dir(), c.offset)
		}
	}
}

func runConsume(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("consume")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	fromOffset := fs.Int64("from-offset", -1, "")
	fromTime := fs.String("from-time", "", "")
	maxRecords := fs.Int64("max-records", 0, "")
	follow := fs.Bool("follow", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := requireTopic(*topic); err != nil {
		return err
	}
	set := setFlags(fs)
	if !set["partition"] {
		return usagef("missing required flag --partition")
	}
	if *partition < 0 || *partition > math.MaxInt32 {
		return usagef("--partition %d is out of range", *partition)
	}
	if set["from-offset"] && set["from-time"] {
		return usagef("--from-offset and --from-time cannot be used together")
	}
	if set["from-offset"] && *fromOffset < 0 {
		return usagef("--from-offset %d is negative", *fromOffset)
	}
	if set["max-records"] && *maxRecords <= 0 {
		return usagef("--max-records must be at least 1")
	}
	var ts int64
	if set["from-time"] {
		if ts, err = parseTime(*fromTime); err != nil {
			return err
		}
	}
	c := &consumer{out: bufio.NewWriterSize(r.Stdout, 64<<10), partition: int32(*partition), left: -1}
	if set["max-records"] {
		c.left = *maxRecords
	}
	defer c.out.Flush()

	d, _, err := r.openDataDir(*dataDir, true, r.lockWait())
	if err != nil {
		return err
	}
	defer func() {
		if d != nil {
			d.Close()
		}
	}()
	l, err := d.Partition(*topic, int32(*partition))
	if err != nil {
		return err
	}
	switch {
	case set["from-offset"]:
		c.offset = *fromOffset
		if start, end := l.LogStartOffset(), l.LogEndOffset(); c.offset < start || c.offset > end {
			return fmt.Errorf("offset %d is out of range for %s-%d (log start offset %d, log end offset %d)", c.offset, *topic, *partition, start, end)
		}
	case set["from-time"]:
		off, _, found, err := l.OffsetForTimestamp(ts)
		if err != nil {
			return fmt.Errorf("find offset for time %s: %w", *fromTime, err)
		}
		c.offset = l.LogEndOffset()
		if found {
			c.offset = off
		}
	default:
		c.offset = l.LogStartOffset()
	}
	for {
		done, err := c.drain(ctx, l)
		if err != nil {
			var oor *localtier.OffsetOutOfRangeError
			if *follow && errors.As(err, &oor) && c.offset < oor.LogStartOffset {
				// Retention removed what we had not read yet: go on from the start.
				fmt.Fprintf(r.Stderr, "tiered consume: offsets %d-%d of %s-%d were deleted before they were read; continuing at %d\n",
					c.offset, oor.LogStartOffset-1, *topic, *partition, oor.LogStartOffset)
				c.offset = oor.LogStartOffset
				continue
			}
			return err
		}
		if err := c.out.Flush(); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
		if done || !*follow {
			return d.Close()
		}
		// Release the data dir between polls so a producer can append.
		if err := d.Close(); err != nil {
			return fmt.Errorf("close data dir: %w", err)
		}
		d = nil
		for d == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.pollInterval()):
			}
			nd, locked, err := r.openDataDir(*dataDir, true, 0)
			if locked {
				continue // another process is writing; look again later
			}
			if err != nil {
				return err
			}
			d = nd
		}
		if l, err = d.Partition(*topic, int32(*partition)); err != nil {
			return err
		}
	}
}
