package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tiered/tiered/internal/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Producer defaults that produce follows.
const (
	// BatchSize is the Java producer's batch.size: a batch holds records
	// while its uncompressed size (61-byte header plus encoded records)
	// stays within it; a larger record gets a batch of its own.
	BatchSize = 16384
	// MaxAppendBytes bounds one append to the log, like the producer's
	// max.request.size bounds one produce request. The log checks segment
	// rolling once per append.
	MaxAppendBytes = 1 << 20
)

var produceCmd = &command{
	name:    "produce",
	summary: "append records read as JSON lines from stdin",
	help: `usage: tiered produce --topic T [--partition P] [--data-dir DIR] [--no-auto-create] < records.jsonl

Reads records from stdin, one JSON object per line, and appends them to the topic:
  {"key": "text" | null, "value": "text" | null, "timestamp": ms, "headers": [{"key": "k", "value": "v" | null}]}
Bytes that are not UTF-8 go in "key_b64"/"value_b64" (base64) instead of "key"/"value"
(also in headers). A null or missing value is a tombstone; a missing key is null. A
missing timestamp means now (CreateTime). "offset" and "partition" fields, as consume
prints them, are accepted and ignored. Blank lines are skipped.

All of stdin is read and every line validated before anything is written: a bad line
anywhere (invalid JSON, unknown field, a keyless record for a compacted topic, a batch
over max.message.bytes) fails the command naming the line, and nothing is appended.

Partitioning, as Kafka's Java producer does it: with --partition every record goes there;
otherwise a keyed record goes to murmur2(key) & 0x7fffffff % partitions (the default
partitioner), and keyless records stick to one partition until its batch is full, then
move to the next partition round-robin, starting at the partition with the fewest records.

Batching: records are grouped per partition into batches of at most 16384 bytes of
uncompressed batch (batch.size; a bigger record gets a batch of its own), compressed
with the topic's compression.type ("producer" and "uncompressed" mean none).

A topic that does not exist is created with the default config and 1 partition
(auto.create.topics.enable), unless --no-auto-create is given; --partition above 0 on a
missing topic is an error. At the end the data dir is flushed and one summary line
(records, batches, partitions, offsets) goes to stderr.

Flags:
  --data-dir DIR       data directory (default ./data; created if missing)
  --topic T            topic (required)
  --partition P        write every record to partition P
  --no-auto-create     fail instead of creating a missing topic

Example:
  printf '%s\n' '{"key":"k1","value":"hello"}' '{"key":"k1","value":null}' | tiered produce --topic orders
`,
	run: runProduce,
}

// inputRecord is one parsed stdin line.
type inputRecord struct {
	line int
	rec  record.Record
}

// readRecords parses every non-blank line of in. now stamps records without
// a timestamp.
func readRecords(in io.Reader, now int64) ([]inputRecord, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	var out []inputRecord
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			l, derr := recordjson.Decode(t)
			if derr != nil {
				return nil, fmt.Errorf("line %d: %v; nothing was written", n, derr)
			}
			ts := now
			if l.HasTimestamp {
				ts = l.Timestamp
			}
			out = append(out, inputRecord{line: n, rec: record.Record{Timestamp: ts, Key: l.Key, Value: l.Value, Headers: l.Headers}})
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
	}
}

// pendingBatch is a batch being filled.
type pendingBatch struct {
	recs      []record.Record
	firstLine int
	size      int // uncompressed: header plus records
}

// builtBatch is an encoded batch ready to append.
type builtBatch struct {
	data      []byte
	records   int
	firstLine int
}

// batcher splits records into per-partition batches like the Java producer.
type batcher struct {
	parts  int
	sticky int // partition of keyless records
	open   []*pendingBatch
	closed [][]*pendingBatch
}

func newBatcher(parts, sticky int) *batcher {
	return &batcher{parts: parts, sticky: sticky, open: make([]*pendingBatch, parts), closed: make([][]*pendingBatch, parts)}
}

// recordSize is r's encoded size as the next record of b.
func recordSize(b *pendingBatch, r *record.Record) int {
	if b == nil || len(b.recs) == 0 {
		return record.EncodedRecordSize(0, 0, r.Key, r.Value, r.Headers)
	}
	return record.EncodedRecordSize(r.Timestamp-b.recs[0].Timestamp, int32(len(b.recs)), r.Key, r.Value, r.Headers)
}

func (bt *batcher) full(p int, r *record.Record) bool {
	b := bt.open[p]
	return b != nil && len(b.recs) > 0 && b.size+recordSize(b, r) > BatchSize
}

func (bt *batcher) closeBatch(p int) {
	if b := bt.open[p]; b != nil && len(b.recs) > 0 {
		bt.closed[p] = append(bt.closed[p], b)
	}
	bt.open[p] = nil
}

// add puts r in partition p's open batch; p < 0 means keyless, sticky.
func (bt *batcher) add(p int, line int, r record.Record) {
	if p < 0 {
		p = bt.sticky
		if bt.full(p, &r) {
			bt.closeBatch(p)
			bt.sticky = (bt.sticky + 1) % bt.parts
			p = bt.sticky
		}
	}
	if bt.full(p, &r) {
		bt.closeBatch(p)
	}
	b := bt.open[p]
	if b == nil {
		b = &pendingBatch{firstLine: line, size: record.HeaderSize}
		bt.open[p] = b
	}
	b.size += recordSize(b, &r)
	r.Offset = int64(len(b.recs))
	b.recs = append(b.recs, r)
}

// finish closes every open batch and returns the batches per partition.
func (bt *batcher) finish() [][]*pendingBatch {
	for p := range bt.open {
		bt.closeBatch(p)
	}
	return bt.closed
}

// encodeBatches encodes every pending batch with c, refusing any over
// maxBytes (max.message.bytes).
func encodeBatches(parts [][]*pendingBatch, c codec.Codec, maxBytes int64) ([][]builtBatch, error) {
	var enc record.Encoder
	out := make([][]builtBatch, len(parts))
	for p, bs := range parts {
		for _, b := range bs {
			data, err := enc.AppendBatch(nil, record.NewBatchSpec(0, c), b.recs)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w; nothing was written", b.firstLine, err)
			}
			if int64(len(data)) > maxBytes {
				return nil, fmt.Errorf("line %d: the record batch of %d bytes starting here exceeds max.message.bytes (%d); nothing was written", b.firstLine, len(data), maxBytes)
			}
			out[p] = append(out[p], builtBatch{data: data, records: len(b.recs), firstLine: b.firstLine})
		}
	}
	return out, nil
}

// partResult is what was appended to one partition.
type partResult struct {
	partition   int
	first, last int64
	records     int
	batches     int
}

func runProduce(r *Runner, _ context.Context, args []string) error {
	fs := newFlags("produce")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	noAuto := fs.Bool("no-auto-create", false, "")
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
	if setFlags(fs)["partition"] && (*partition < 0 || *partition > math.MaxInt32) {
		return usagef("--partition %d is out of range", *partition)
	}
	if err := topicconfig.ValidateTopicName(*topic); err != nil {
		return err
	}
	recs, err := readRecords(r.Stdin, r.now().UnixMilli())
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(r.Stderr, "produced 0 records to %s (stdin had no records)\n", *topic)
		return nil
	}

	d, _, err := r.openDataDir(*dataDir, false, r.lockWait())
	if err != nil {
		return err
	}
	defer d.Close()

	// The topic's config and partition count, or the defaults it would get.
	t, exists := d.Topic(*topic)
	cfg := topicconfig.Defaults()
	nparts := 1
	if exists {
		nparts = len(t.Partitions)
		cfg = t.Partitions[0].Config()
	} else {
		if *noAuto {
			return &localtier.UnknownTopicOrPartitionError{Topic: *topic, Partition: -1}
		}
		if *partition > 0 {
			return fmt.Errorf("unknown topic %q: it would be auto-created with 1 partition, so --partition %d does not exist; create it first with 'tiered topic create --partitions N'", *topic, *partition)
		}
	}
	if *partition >= nparts {
		return &localtier.UnknownTopicOrPartitionError{Topic: *topic, Partition: int32(*partition)}
	}

	// Validate every record against the topic before writing anything.
	if cfg.CleanupPolicy.Compact {
		for _, in := range recs {
			if in.rec.Key == nil {
				return fmt.Errorf("line %d: topic %s is compacted (cleanup.policy=%s) and cannot accept a record without a key; nothing was written", in.line, *topic, cfg.CleanupPolicy)
			}
		}
	}
	sticky := 0
	if exists {
		for p, l := range t.Partitions {
			if l.LogEndOffset()-l.LogStartOffset() < t.Partitions[sticky].LogEndOffset()-t.Partitions[sticky].LogStartOffset() {
				sticky = p
			}
		}
	}
	bt := newBatcher(nparts, sticky)
	for _, in := range recs {
		p := -1
		switch {
		case *partition >= 0:
			p = *partition
		case in.rec.Key != nil:
			p = int(KeyPartition(in.rec.Key, nparts))
		}
		bt.add(p, in.line, in.rec)
	}
	c, keep, _ := cfg.CompressionCodec()
	if keep {
		c = int8(codec.None)
	}
	built, err := encodeBatches(bt.finish(), codec.Codec(c), cfg.MaxMessageBytes)
	if err != nil {
		return err
	}

	if !exists {
		if t, err = d.CreateTopic(*topic, 1, nil); err != nil {
			return fmt.Errorf("auto-create topic: %w", err)
		}
	}
	var results []partResult
	total, totalBatches := 0, 0
	for p, bs := range built {
		if len(bs) == 0 {
			continue
		}
		res := partResult{partition: p, first: -1}
		for len(bs) > 0 {
			// Group batches into appends of at most MaxAppendBytes.
			n, size := 0, 0
			for n < len(bs) && (n == 0 || size+len(bs[n].data) <= MaxAppendBytes) {
				size += len(bs[n].data)
				n++
			}
			buf := make([]byte, 0, size)
			for _, b := range bs[:n] {
				buf = append(buf, b.data...)
			}
			info, err := t.Partitions[p].Append(buf)
			if err != nil {
				return fmt.Errorf("append to %s-%d (input line %d onwards; %s): %w", *topic, p, bs[0].firstLine, summary(*topic, results, total, totalBatches, "already written: "), err)
			}
			if res.first < 0 {
				res.first = info.FirstOffset
			}
			res.last = info.LastOffset
			res.records += info.Records
			res.batches += info.Batches
			total += info.Records
			totalBatches += info.Batches
			bs = bs[n:]
		}
		results = append(results, res)
	}
	if err := d.Flush(); err != nil {
		return fmt.Errorf("flush data dir: %w", err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close data dir: %w", err)
	}
	fmt.Fprintln(r.Stderr, summary(*topic, results, total, totalBatches, "produced "))
	return nil
}

func summary(topic string, results []partResult, records, batches int, prefix string) string {
	var parts []string
	for _, p := range results {
		parts = append(parts, fmt.Sprintf("%d: offsets %d-%d", p.partition, p.first, p.last))
	}
	return fmt.Sprintf("%s%d records in %d batches to %d partition(s) of %s (%s)", prefix, records, batches, len(results), topic, strings.Join(parts, ", "))
}
