// Package producer owns how tiered appends records to a local-tier log dir
// the way Kafka's Java producer would send them: the JSON-lines input,
// partitioning (murmur2 for keyed records, sticky for keyless ones), batches
// of at most batch.size (16 KiB) uncompressed bytes per partition compressed
// with the topic's compression.type, validation of every record before
// anything is written, auto-creation of a missing topic, and appends grouped
// up to a produce request's size. `tiered produce --data-dir` and serve's
// HTTP records endpoint both go through Produce, so both write the same
// batches.
package producer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Producer defaults.
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

// Input is one parsed input line.
type Input struct {
	Line   int // 1-based line number, for error messages
	Record record.Record
}

// Source yields the records to produce, in input order: it calls add
// for each with its 1-based input line and stops at add's first error,
// which it returns. add does not keep the record or its slices past the
// call. Produce takes every record from its Source before it
// writes any, encoding each into its partition's pending batch as it
// comes, so what Produce holds is the encoded records (about their JSON
// size), never the parsed input.
type Source func(add func(line int, r *record.Record) error) error

// Lines is the non-blank JSON lines of in (recordjson's shape), parsed as
// Produce takes them. now stamps records without a timestamp. what names
// the input in read errors ("stdin", "request body").
func Lines(in io.Reader, now int64, what string) Source {
	return func(add func(int, *record.Record) error) error {
		br := bufio.NewReaderSize(in, 64<<10)
		var r record.Record
		for n := 1; ; n++ {
			line, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A line longer than the buffer: gather it whole.
				long := append([]byte(nil), line...)
				for errors.Is(err, bufio.ErrBufferFull) {
					line, err = br.ReadSlice('\n')
					long = append(long, line...)
				}
				line = long
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read %s: %w", what, err)
			}
			if t := bytes.TrimSpace(line); len(t) > 0 {
				l, derr := recordjson.Decode(t)
				if derr != nil {
					return &InputError{Line: n, Err: derr}
				}
				ts := now
				if l.HasTimestamp {
					ts = l.Timestamp
				}
				r = record.Record{Timestamp: ts, Key: l.Key, Value: l.Value, Headers: l.Headers}
				if aerr := add(n, &r); aerr != nil {
					return aerr
				}
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
		}
	}
}

// Inputs is records already parsed, as a Source.
func Inputs(in []Input) Source {
	return func(add func(int, *record.Record) error) error {
		for i := range in {
			r := in[i].Record
			if err := add(in[i].Line, &r); err != nil {
				return err
			}
		}
		return nil
	}
}

// InputError is a record that cannot be produced: bad JSON, a keyless
// record for a compacted topic, a batch over max.message.bytes. Nothing was
// written.
type InputError struct {
	Line int
	Err  error
}

func (e *InputError) Error() string {
	return fmt.Sprintf("line %d: %v; nothing was written", e.Line, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// Options say where Produce puts records.
type Options struct {
	// Partition sends every record to that partition; negative means the
	// default partitioner.
	Partition int
	// AutoCreate creates a missing topic (auto.create.topics.enable) with
	// AutoCreatePartitions partitions (num.partitions; 0 means 1) and the
	// default config.
	AutoCreate           bool
	AutoCreatePartitions int
	// Now is the clock record timestamps are checked against (the topic's
	// message.timestamp.before.max.ms / after.max.ms) before anything is
	// written; nil means time.Now. The log checks again on append.
	Now func() time.Time
	// Hold, when set, is told of the memory Produce takes for what it
	// holds until it appends, n bytes more at a time: each record as it
	// is encoded into its batch, and each batch's header (and any growth
	// from its codec) when it closes; in all, the encoded batches, which
	// can be larger than the input (small records carry more framing than
	// their JSON). serve's HTTP produce counts it against its budget. An
	// error from Hold ends Produce with that error, nothing written.
	Hold func(n int64) error
}

// PartitionResult is what was appended to one partition.
type PartitionResult struct {
	Partition   int32 `json:"partition"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	Records     int   `json:"records"`
	Batches     int   `json:"batches"`
	// Durable is set when every append was fsynced before it returned
	// (the topic's flush.messages / flush.ms were due).
	Durable bool `json:"-"`
}

// Result is what Produce appended.
type Result struct {
	Topic      string            `json:"topic"`
	Created    bool              `json:"created,omitempty"`
	Records    int               `json:"records"`
	Batches    int               `json:"batches"`
	Partitions []PartitionResult `json:"partitions"`
}

// Summary is the one line `tiered produce` prints, prefixed ("produced ").
func (r Result) Summary(prefix string) string {
	var parts []string
	for _, p := range r.Partitions {
		parts = append(parts, fmt.Sprintf("%d: offsets %d-%d", p.Partition, p.FirstOffset, p.LastOffset))
	}
	return fmt.Sprintf("%s%d records in %d batches to %d partition(s) of %s (%s)", prefix, r.Records, r.Batches, len(r.Partitions), r.Topic, strings.Join(parts, ", "))
}

// AppendError is a failed append after validation; Result holds what was
// already written before it.
type AppendError struct {
	Topic     string
	Partition int32
	Line      int
	Written   Result
	Err       error
}

func (e *AppendError) Error() string {
	return fmt.Sprintf("append to %s-%d (input line %d onwards; %s): %v", e.Topic, e.Partition, e.Line, e.Written.Summary("already written: "), e.Err)
}

// Is makes errors.Is(err, kafkaerr.ErrStorage) true.
func (e *AppendError) Is(target error) bool { return target == kafkaerr.ErrStorage }

func (e *AppendError) Unwrap() error { return e.Err }

// Produce validates every record of src against the topic, encoding each
// into its partition's pending batch as it comes (so what it holds until
// it appends is the encoded batches, about the input's size, not its
// parsed form), then creates the topic when missing and o.AutoCreate, and
// appends the batches.
// A bad record fails with an *InputError before anything is written; an
// unknown topic or partition is a *localtier.UnknownTopicOrPartitionError.
// It does not flush; callers flush as their durability promise needs.
func Produce(d *localtier.LogDir, topic string, src Source, o Options) (Result, error) {
	res := Result{Topic: topic, Partitions: []PartitionResult{}}
	if err := topicconfig.ValidateTopicName(topic); err != nil {
		return res, err
	}
	t, exists := d.Topic(topic)
	nparts := 1
	if o.AutoCreatePartitions > 0 {
		nparts = o.AutoCreatePartitions
	}
	var cfg topicconfig.Config
	if exists {
		nparts = len(t.Partitions)
		cfg = t.Partitions[0].Config()
	} else {
		if !o.AutoCreate {
			return res, &localtier.UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
		}
		if o.Partition >= nparts {
			return res, fmt.Errorf("unknown topic %q: it would be auto-created with %d partition(s), so partition %d does not exist; create it first with 'tiered topic create --partitions N'", topic, nparts, o.Partition)
		}
		c, err := topicconfig.Parse(d.TopicDefaults())
		if err != nil {
			return res, fmt.Errorf("auto-create topic: %w", err)
		}
		cfg = c
	}
	if o.Partition >= nparts {
		return res, &localtier.UnknownTopicOrPartitionError{Topic: topic, Partition: int32(o.Partition)}
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	nowMs := now().UnixMilli()
	sticky := 0
	if exists {
		for p, l := range t.Partitions {
			if l.LogEndOffset()-l.LogStartOffset() < t.Partitions[sticky].LogEndOffset()-t.Partitions[sticky].LogStartOffset() {
				sticky = p
			}
		}
	}
	c, keep, _ := cfg.CompressionCodec()
	if keep {
		c = int8(codec.None)
	}
	bt := newBatcher(nparts, sticky, codec.Codec(c), cfg.MaxMessageBytes)
	bt.hold = o.Hold
	records := 0
	err := src(func(line int, r *record.Record) error {
		if cfg.CleanupPolicy.Compact && r.Key == nil {
			return &InputError{Line: line, Err: fmt.Errorf("topic %s is compacted (cleanup.policy=%s) and cannot accept a record without a key", topic, cfg.CleanupPolicy)}
		}
		if err := localtier.CheckTimestamp(cfg, r.Timestamp, nowMs); err != nil {
			return &InputError{Line: line, Err: err}
		}
		p := -1
		switch {
		case o.Partition >= 0:
			p = o.Partition
		case r.Key != nil:
			p = int(KeyPartition(r.Key, nparts))
		}
		records++
		return bt.add(p, line, r)
	})
	if err != nil {
		return res, err
	}
	if records == 0 {
		return res, nil
	}
	built, err := bt.finish()
	if err != nil {
		return res, err
	}
	if !exists {
		t, err = d.CreateTopic(topic, nparts, nil)
		var te *localtier.TopicExistsError
		if errors.As(err, &te) { // created meanwhile by a concurrent producer
			var ok bool
			if t, ok = d.Topic(topic); !ok || len(t.Partitions) != nparts {
				return res, fmt.Errorf("auto-create topic %s: it was created concurrently with a different partition count; retry", topic)
			}
		} else if err != nil {
			return res, fmt.Errorf("auto-create topic: %w", err)
		} else {
			res.Created = true
		}
	}
	for p, bs := range built {
		if len(bs) == 0 {
			continue
		}
		pr := PartitionResult{Partition: int32(p), FirstOffset: -1, Durable: true}
		for len(bs) > 0 {
			// Group batches into appends of at most MaxAppendBytes.
			n, size := 0, 0
			for n < len(bs) && (n == 0 || size+len(bs[n].data) <= MaxAppendBytes) {
				size += len(bs[n].data)
				n++
			}
			buf := make([]byte, 0, size)
			for i := range bs[:n] {
				buf = append(buf, bs[i].data...)
				bs[i].data = nil // appended below; the rest is all Produce holds
			}
			info, err := t.Partitions[p].Append(buf)
			if err != nil {
				if pr.Records > 0 {
					res.Partitions = append(res.Partitions, pr)
				}
				return res, &AppendError{Topic: topic, Partition: int32(p), Line: bs[0].firstLine, Written: res, Err: err}
			}
			if pr.FirstOffset < 0 {
				pr.FirstOffset = info.FirstOffset
			}
			pr.LastOffset = info.LastOffset
			pr.Records += info.Records
			pr.Batches += info.Batches
			pr.Durable = pr.Durable && info.Durable
			res.Records += info.Records
			res.Batches += info.Batches
			bs = bs[n:]
		}
		res.Partitions = append(res.Partitions, pr)
	}
	return res, nil
}

// pendingBatch is a batch being filled: its records encoded as they come.
type pendingBatch struct {
	recs      []byte // encoded records (record.AppendRecord)
	n         int32  // records
	firstLine int
	size      int   // uncompressed: header plus records
	baseTS    int64 // the first record's timestamp
	maxTS     int64
}

// builtBatch is an encoded batch ready to append.
type builtBatch struct {
	data      []byte
	firstLine int
}

// batcher splits records into per-partition batches like the Java
// producer, encoding each record into its partition's open batch and each
// batch, once closed, with the topic's codec: what it holds is the encoded
// batches, so it follows the input's size.
type batcher struct {
	parts    int
	sticky   int // partition of keyless records
	codec    codec.Codec
	maxBytes int64 // max.message.bytes
	enc      record.Encoder
	scratch  []byte // a compressed batch before it is copied to its size
	open     []pendingBatch
	closed   [][]builtBatch
	hold     func(n int64) error // Options.Hold
}

func newBatcher(parts, sticky int, c codec.Codec, maxBytes int64) *batcher {
	return &batcher{parts: parts, sticky: sticky, codec: c, maxBytes: maxBytes, open: make([]pendingBatch, parts), closed: make([][]builtBatch, parts)}
}

// recordSize is r's encoded size as the next record of b.
func recordSize(b *pendingBatch, r *record.Record) int {
	if b.n == 0 {
		return record.EncodedRecordSize(0, 0, r.Key, r.Value, r.Headers)
	}
	return record.EncodedRecordSize(r.Timestamp-b.baseTS, b.n, r.Key, r.Value, r.Headers)
}

func (bt *batcher) full(p int, r *record.Record) bool {
	b := &bt.open[p]
	return b.n > 0 && b.size+recordSize(b, r) > BatchSize
}

// closeBatch encodes partition p's open batch, refusing it over
// max.message.bytes, and empties it.
func (bt *batcher) closeBatch(p int) error {
	b := &bt.open[p]
	if b.n == 0 {
		return nil
	}
	spec := record.NewBatchSpec(0, bt.codec)
	var data []byte
	var err error
	if bt.codec == codec.None {
		data, err = bt.enc.AppendEncodedBatch(make([]byte, 0, record.HeaderSize+len(b.recs)), spec, b.recs, b.n, b.baseTS, b.maxTS)
	} else {
		bt.scratch, err = bt.enc.AppendEncodedBatch(bt.scratch[:0], spec, b.recs, b.n, b.baseTS, b.maxTS)
		data = bytes.Clone(bt.scratch)
		if cap(bt.scratch) > 4*BatchSize {
			bt.scratch = nil // after a large record: not kept for the next batches
		}
	}
	if err != nil {
		return &InputError{Line: b.firstLine, Err: err}
	}
	if int64(len(data)) > bt.maxBytes {
		return &InputError{Line: b.firstLine, Err: fmt.Errorf("the record batch of %d bytes starting here exceeds max.message.bytes (%d)", len(data), bt.maxBytes)}
	}
	if grow := len(data) - len(b.recs); grow > 0 && bt.hold != nil {
		if err := bt.hold(int64(grow)); err != nil {
			return err
		}
	}
	bt.closed[p] = append(bt.closed[p], builtBatch{data: data, firstLine: b.firstLine})
	recs := b.recs[:0]
	if cap(recs) > 4*BatchSize {
		recs = nil
	}
	*b = pendingBatch{recs: recs}
	return nil
}

// add encodes r into partition p's open batch; p < 0 means keyless, sticky.
func (bt *batcher) add(p int, line int, r *record.Record) error {
	if p < 0 {
		p = bt.sticky
		if bt.full(p, r) {
			if err := bt.closeBatch(p); err != nil {
				return err
			}
			bt.sticky = (bt.sticky + 1) % bt.parts
			p = bt.sticky
		}
	}
	if bt.full(p, r) {
		if err := bt.closeBatch(p); err != nil {
			return err
		}
	}
	b := &bt.open[p]
	if b.n == 0 {
		b.firstLine, b.size, b.baseTS, b.maxTS = line, record.HeaderSize, r.Timestamp, r.Timestamp
	}
	b.size += recordSize(b, r)
	before := len(b.recs)
	b.recs = record.AppendRecord(b.recs, r.Attributes, r.Timestamp-b.baseTS, b.n, r.Key, r.Value, r.Headers)
	b.maxTS = max(b.maxTS, r.Timestamp)
	b.n++
	if bt.hold != nil {
		return bt.hold(int64(len(b.recs) - before))
	}
	return nil
}

// finish closes every open batch and returns the batches per partition.
func (bt *batcher) finish() ([][]builtBatch, error) {
	for p := range bt.open {
		if err := bt.closeBatch(p); err != nil {
			return nil, err
		}
	}
	return bt.closed, nil
}

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2,
// seed 0x9747b28c), which the Java producer's default partitioner applies to
// record keys. The result is the Java int reinterpreted.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition Kafka's default partitioner picks for a
// non-null key: toPositive(murmur2(key)) % numPartitions.
func KeyPartition(key []byte, numPartitions int) int32 {
	return int32((uint32(Murmur2(key)) & 0x7fffffff) % uint32(numPartitions))
}
