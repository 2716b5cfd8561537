package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"unicode"
	"unicode/utf8"

	"github.com/tiered/tiered/internal/app/producer"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Producer defaults that produce follows (see package producer).
const (
	BatchSize      = producer.BatchSize
	MaxAppendBytes = producer.MaxAppendBytes
)

var produceCmd = &command{
	name:    "produce",
	summary: "append records read as JSON lines from stdin",
	help: `usage: tiered produce (--data-dir DIR | --server URL) --topic T [--partition P] [--no-auto-create] < records.jsonl

Reads records from stdin, one JSON object per line, and appends them to the topic:
  {"key": "text" | null, "value": "text" | null, "timestamp": ms, "headers": [{"key": "k", "value": "v" | null}]}
Bytes that are not UTF-8 go in "key_b64"/"value_b64" (base64) instead of "key"/"value"
(also in headers). A null or missing value is a tombstone; a missing key is null. A
missing timestamp means now (CreateTime). "offset" and "partition" fields, as consume
prints them, are accepted and ignored. Blank lines are skipped.

All of stdin is read and every line validated before anything is written: a bad line
anywhere (invalid JSON, unknown field, a keyless record for a compacted topic, a timestamp
outside the topic's message.timestamp.before.max.ms / after.max.ms of now, a batch over
max.message.bytes) fails the command naming the line, and nothing is appended.

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

With --server URL the records go to a running 'tiered serve' over its HTTP API (POST
/v1/topics/T/records, or .../partitions/P/records with --partition) instead of opening
the data dir, which serve holds; the server applies the same validation, partitioning
and batching, and answers once the records are as durable as the topic's flush settings
promise.

Flags:
  --data-dir DIR       data directory (default ./data; created if missing)
  --server URL         a serve process's HTTP address (e.g. http://127.0.0.1:8080);
                       excludes --data-dir
  --topic T            topic (required)
  --partition P        write every record to partition P
  --no-auto-create     fail instead of creating a missing topic

Example:
  printf '%s\n' '{"key":"k1","value":"hello"}' '{"key":"k1","value":null}' | tiered produce --topic orders
`,
	run: runProduce,
}

func runProduce(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("produce")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	server := fs.String("server", "", "")
	topic := fs.String("topic", "", "")
	partition := fs.Int("partition", -1, "")
	noAuto := fs.Bool("no-auto-create", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := requireTopic(*topic); err != nil {
		return err
	}
	set := setFlags(fs)
	if err := dataDirOrServer(set, *server); err != nil {
		return err
	}
	if set["partition"] && (*partition < 0 || *partition > math.MaxInt32) {
		return usagef("--partition %d is out of range", *partition)
	}
	if err := topicconfig.ValidateTopicName(*topic); err != nil {
		return err
	}
	if *server != "" {
		return r.produceHTTP(ctx, *server, *topic, *partition, *noAuto)
	}
	now := r.now().UnixMilli()
	// Produce parses stdin as it encodes it; only whether it holds a
	// record at all is known first, so that an empty stdin leaves the data
	// dir unopened.
	in := bufio.NewReaderSize(r.Stdin, 64<<10)
	if empty, err := blankInput(in); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	} else if empty {
		fmt.Fprintf(r.Stderr, "produced 0 records to %s (stdin had no records)\n", *topic)
		return nil
	}
	d, err := r.openDataDirForWrite(*dataDir, false)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := producer.Produce(d, *topic, producer.Lines(in, now, "stdin"), producer.Options{Partition: *partition, AutoCreate: !*noAuto, Now: r.now})
	if err != nil {
		return err
	}
	if res.Records == 0 { // only white space the check above does not know (U+00A0)
		fmt.Fprintf(r.Stderr, "produced 0 records to %s (stdin had no records)\n", *topic)
		return d.Close()
	}
	if err := d.Flush(); err != nil {
		return fmt.Errorf("flush data dir: %w", err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close data dir: %w", err)
	}
	fmt.Fprintln(r.Stderr, res.Summary("produced "))
	return nil
}

// produceHTTP sends stdin to a serve process: the whole input in one
// request, so the server validates every line before it writes any.
func (r *Runner) produceHTTP(ctx context.Context, server, topic string, partition int, noAuto bool) error {
	body, err := io.ReadAll(r.Stdin)
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		fmt.Fprintf(r.Stderr, "produced 0 records to %s (stdin had no records)\n", topic)
		return nil
	}
	path := "/v1/topics/" + url.PathEscape(topic) + "/records"
	if partition >= 0 {
		path = fmt.Sprintf("/v1/topics/%s/partitions/%d/records", url.PathEscape(topic), partition)
	}
	if noAuto {
		path += "?auto_create=false"
	}
	var res producer.Result
	if err := serverCall(ctx, server, http.MethodPost, path, "application/x-ndjson", body, &res); err != nil {
		return err
	}
	fmt.Fprintln(r.Stderr, res.Summary("produced "))
	return nil
}

// blankInput reports whether in holds nothing but white space (what the
// JSON-lines reader skips), consuming only that white space.
func blankInput(in *bufio.Reader) (bool, error) {
	for {
		c, err := in.ReadByte()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if c >= utf8.RuneSelf || !unicode.IsSpace(rune(c)) {
			return false, in.UnreadByte()
		}
	}
}
