package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// consumeFetchBytes is how much of the log one read returns (at least one
// whole batch), like a consumer's max.partition.fetch.bytes.
const consumeFetchBytes = 1 << 20

var consumeCmd = &command{
	name:    "consume",
	summary: "print a partition's records as JSON lines",
	help: `usage: tiered consume (--data-dir DIR | --bucket URL | --fetch URL) --topic T --partition P
                      [--from-offset N | --from-time TIME] [--max-records N] [--follow]

Prints the records of one partition to stdout, one JSON object per line:
  {"partition": 0, "offset": 5, "timestamp": ms, "key": "text" | null, "value": "text" | null,
   "headers": [{"key": "k", "value": "v" | null}]}
Bytes that are not UTF-8 are printed base64 in "key_b64"/"value_b64" instead. A null
value is a tombstone. timestamp is the record's CreateTime (the broker's time for
LogAppendTime topics).

Starts at the log start offset and exits at the log end. Control records (transaction
markers, KRaft control records) are never printed. Records of aborted transactions ARE
printed: consume reads like a READ_UNCOMMITTED consumer.

Every batch is checked before its records are printed: its CRC, and its offsets against
its segment and the batch before it. A batch that fails stops consume after the records
before it, with exit status 1 and an error naming the file or object and byte position.

Reads the local data dir (the default), or with --bucket the segments committed to the
remote tier, through the partition's manifest (no LIST), or with --fetch through the HTTP
API of a fetch service ('tiered fetch', or 'tiered serve', which serves the local and the
remote tier together); the output is the same. The data dir is opened read-only: recovery
runs in memory and no file changes (the .lock aside); a damaged segment's bad tail is
skipped and reading continues at the next segment, with a line on stderr saying so.

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --bucket URL       read the remote tier instead: file:///dir, mem://name[/prefix] or
                     s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --fetch URL        read through a fetch service's HTTP API (e.g. http://127.0.0.1:8080)
  --topic T          topic (required)
  --partition P      partition (required)
  --from-offset N    start at offset N (between the log start and end offsets)
  --from-time TIME   start at the first record with timestamp >= TIME (RFC 3339, e.g.
                     2024-05-01T12:00:00Z, or milliseconds since the epoch); if every
                     record is older, start at the log end
  --max-records N    stop after N records
  --follow           at the log end, keep polling for new records until interrupted
                     (SIGINT/SIGTERM exit 0). Between polls the data dir is released so
                     that produce can write to it; with --bucket the manifest is re-read.
                     A topic deleted and re-created under the same name meanwhile (another
                     topic ID, or in the data dir a new partition directory) stops consume
                     with exit status 1, before any of the new topic's records.

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

// consumeSource is where consume reads one partition: the local data dir
// or the bucket's committed segments.
type consumeSource interface {
	// read returns whole batches (possibly ending with a partial one) from
	// the one holding offset; nothing at the log end.
	read(ctx context.Context, offset int64) ([]byte, error)
	// bounds are the log start and end offsets.
	bounds() (start, end int64)
	// offsetForTime is the first offset with a timestamp >= ts.
	offsetForTime(ctx context.Context, ts int64) (offset int64, found bool, err error)
	// deletedBelow reports, for an error of read, that retention removed
	// offsets up to the new log start offset.
	deletedBelow(err error) (logStart int64, ok bool)
	// topicID is the topic ID of the lineage the last read came from, ""
	// when the source cannot tell (a data dir partition without a
	// partition.metadata, a topic without IDs, a fetch service that does
	// not say).
	topicID() string
	// replaced says how the partition read now is another one than the
	// partition first read, when the source can tell without topic IDs
	// (the data dir: its partition directory removed and made again); ""
	// when it is the same one or the source cannot tell.
	replaced() string
	// wait sleeps until the next poll of --follow and refreshes the view.
	// It returns false when ctx ended.
	wait(ctx context.Context, every time.Duration) (bool, error)
	close() error
	String() string // where the records come from, for errors
}

// localSource reads a partition of the data dir.
type localSource struct {
	r              *Runner
	dataDir, topic string
	partition      int32
	d              *localtier.LogDir
	l              *localtier.Log
	// The partition's identity, to tell the topic deleted and re-created
	// (its partition directory removed and made again) between the polls
	// of --follow, which open the data dir anew each time: the topic ID
	// of the directory's partition.metadata when it has one (a broker
	// writes it), and the directory first opened, held open so that its
	// inode cannot be freed and given to a directory made under the same
	// name (ext4 gives a removed directory's inode number to the next one
	// made at once, so an inode number alone would not tell them apart).
	firstID string   // the topic ID of the directory first opened, or ""
	id      string   // the topic ID of the directory open now, or ""
	pinned  *os.File // the directory first opened
	first   os.FileInfo
	replace string // what replaced() says; set by each reopen
	warned  bool   // of a damaged partition.metadata
}

func (r *Runner) openLocalSource(dataDir, topic string, partition int32) (*localSource, error) {
	d, err := r.openDataDirForRead(dataDir, viaFetch)
	if err != nil {
		return nil, err
	}
	s := &localSource{r: r, dataDir: dataDir, topic: topic, partition: partition, d: d}
	if err := s.openPartition(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openPartition takes the partition from the data dir just opened and
// compares its identity with the first one's. The data dir's lock is
// held, so no other tiered process makes the directory anew meanwhile.
func (s *localSource) openPartition() error {
	l, err := s.d.Partition(s.topic, s.partition)
	if err != nil {
		return err
	}
	s.l = l
	id, err := localtier.ReadPartitionMetadata(vfs.Default, l.Dir())
	if pme := (*localtier.PartitionMetadataError)(nil); errors.As(err, &pme) {
		// A damaged partition.metadata does not keep the records from
		// being read: the directory still tells a re-created topic.
		if !s.warned {
			fmt.Fprintf(s.r.Stderr, "tiered consume: warning: %v; consume tells a re-created topic by its partition directory instead\n", err)
			s.warned = true
		}
		id, err = localtier.TopicID{}, nil
	}
	if err != nil {
		return fmt.Errorf("read topic ID of %s-%d: %w", s.topic, s.partition, err)
	}
	s.id = id.StringOrEmpty()
	if s.pinned == nil {
		f, err := os.Open(l.Dir())
		if err != nil {
			return fmt.Errorf("open partition directory: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("stat partition directory: %w", err)
		}
		s.pinned, s.first, s.firstID = f, fi, s.id
		return nil
	}
	// Two topic IDs decide alone: a broker may remove a replica's
	// directory and fetch it again from the leader (a reassignment away
	// and back), the same topic's records in a new directory. Without
	// them the directory does.
	s.replace = ""
	if s.firstID != "" && s.id != "" {
		return nil
	}
	fi, err := os.Stat(l.Dir())
	if err != nil {
		return fmt.Errorf("stat partition directory: %w", err)
	}
	if !os.SameFile(s.first, fi) {
		s.replace = fmt.Sprintf("its partition directory %s was removed and made again since consume first opened it", l.Dir())
	}
	return nil
}

func (s *localSource) read(_ context.Context, offset int64) ([]byte, error) {
	res, err := s.l.Read(offset, consumeFetchBytes, true)
	return res.Data, err
}

func (s *localSource) bounds() (int64, int64) { return s.l.LogStartOffset(), s.l.LogEndOffset() }

// topicID is the topic ID of the partition.metadata of the partition
// directory open now (a broker's log dir has one; tiered's own data dir
// does not).
func (s *localSource) topicID() string { return s.id }

func (s *localSource) replaced() string { return s.replace }

func (s *localSource) offsetForTime(_ context.Context, ts int64) (int64, bool, error) {
	off, _, found, err := s.l.OffsetForTimestamp(ts)
	return off, found, err
}

func (s *localSource) deletedBelow(err error) (int64, bool) {
	var oor *localtier.OffsetOutOfRangeError
	if errors.As(err, &oor) {
		return oor.LogStartOffset, true
	}
	return 0, false
}

// wait releases the data dir between polls so a producer can append.
func (s *localSource) wait(ctx context.Context, every time.Duration) (bool, error) {
	if err := s.release(); err != nil {
		return false, fmt.Errorf("close data dir: %w", err)
	}
	for s.d == nil {
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(every):
		}
		nd, locked, err := s.r.openDataDirReadOnly(s.dataDir, 0)
		if locked {
			continue // another process is writing; look again later
		}
		if err != nil {
			return false, err
		}
		s.d = nd
	}
	if err := s.openPartition(); err != nil {
		return false, err
	}
	return true, nil
}

// release closes the data dir (and its lock) but keeps the partition
// directory first opened, whose identity later opens are compared with.
func (s *localSource) release() error {
	if s.d == nil {
		return nil
	}
	d := s.d
	s.d, s.l = nil, nil
	return d.Close()
}

func (s *localSource) close() error {
	err := s.release()
	if s.pinned != nil {
		err = errors.Join(err, s.pinned.Close())
		s.pinned = nil
	}
	return err
}

func (s *localSource) String() string {
	if s.l != nil {
		return s.l.Dir()
	}
	return s.dataDir
}

// consumer prints one partition's records from offset on.
type consumer struct {
	out       *bufio.Writer
	partition int32
	offset    int64
	left      int64 // records still to print; < 0: no limit
	dec       record.Decoder
	line      []byte
	topic     string
	topicID   string // of the first read that named one
}

// checkTopicID refuses an answer read from another lineage than the
// first one read: the topic was deleted and re-created under the same
// name while it was read (--follow), and the new topic's records at the
// offsets still to print are not the old one's. Nothing of the answer is
// printed.
func (c *consumer) checkTopicID(src consumeSource) error {
	if how := src.replaced(); how != "" {
		return c.recreated(how)
	}
	id := src.topicID()
	switch {
	case id == "" || id == c.topicID:
		return nil
	case c.topicID == "":
		c.topicID = id
		return nil
	}
	return c.recreated(fmt.Sprintf("it now has topic ID %s, not %s", id, c.topicID))
}

// recreated is checkTopicID's error; how says what shows the topic to be
// another one.
func (c *consumer) recreated(how string) error {
	return fmt.Errorf("%s-%d was deleted and re-created while it was read: %s, and its offsets from %d on are another topic's records; the records printed are the old topic's, up to offset %d; consume the new topic with a new consume",
		c.topic, c.partition, how, c.offset, c.offset-1)
}

// drain prints from c.offset to the log end (or until the limit). It
// reports whether the limit was reached.
func (c *consumer) drain(ctx context.Context, src consumeSource) (done bool, err error) {
	for {
		if ctx.Err() != nil {
			return true, nil
		}
		data, err := src.read(ctx, c.offset)
		// The lineage first: a re-created topic shorter than the offset
		// reached fails the read as out of range, which would hide why.
		if err := c.checkTopicID(src); err != nil {
			return false, err
		}
		if err != nil {
			return false, err
		}
		if len(data) == 0 {
			return false, nil
		}
		// The sources check what they return; consume checks again that
		// the answer's batches follow one another from the one holding
		// c.offset (a fetch service of an older tiered did not), so a
		// batch whose offsets went back is an error, never skipped.
		it := record.NewIter(data)
		chain := record.NewChain(0, math.MaxInt64-1)
		it.Verify, it.Chain = true, &chain
		progressed := false
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.NextOffset() <= c.offset {
				return false, fmt.Errorf("read %s at offset %d: the answer's batch at position %d ends at offset %d, before the offset asked for",
					src, c.offset, it.Pos()-b.Size(), b.LastOffset())
			}
			progressed = true
			if b.IsControl() {
				c.offset = b.NextOffset()
				continue
			}
			recs, err := c.dec.Records(b)
			if err != nil {
				return false, fmt.Errorf("decode batch at offset %d of %s: %w", b.BaseOffset(), src, err)
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
			return false, fmt.Errorf("read %s at offset %d: %w", src, c.offset, err)
		}
		if !progressed {
			return false, fmt.Errorf("read %s at offset %d: no whole batch in the log's answer", src, c.offset)
		}
	}
}

func runConsume(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("consume")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	bucketURL := fs.String("bucket", "", "")
	fetchURL := fs.String("fetch", "", "")
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
	if err := requireTopicPartition(fs, *topic, *partition); err != nil {
		return err
	}
	set := setFlags(fs)
	if n := btoi(set["data-dir"]) + btoi(set["bucket"]) + btoi(set["fetch"]); n > 1 {
		return usagef("give only one of --data-dir, --bucket and --fetch")
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
	c := &consumer{out: bufio.NewWriterSize(r.Stdout, 64<<10), topic: *topic, partition: int32(*partition), left: -1}
	if set["max-records"] {
		c.left = *maxRecords
	}
	defer c.out.Flush()

	var src consumeSource
	switch {
	case set["fetch"]:
		src, err = openFetchSource(ctx, *fetchURL, *topic, int32(*partition))
	case set["bucket"]:
		src, err = openBucketSource(ctx, *bucketURL, *topic, int32(*partition))
	default:
		src, err = r.openLocalSource(*dataDir, *topic, int32(*partition))
	}
	if err != nil {
		return err
	}
	defer src.close()
	switch {
	case set["from-offset"]:
		c.offset = *fromOffset
		if start, end := src.bounds(); c.offset < start || c.offset > end {
			return fmt.Errorf("offset %d is out of range for %s-%d (log start offset %d, log end offset %d)", c.offset, *topic, *partition, start, end)
		}
	case set["from-time"]:
		off, found, err := src.offsetForTime(ctx, ts)
		if err != nil {
			return fmt.Errorf("find offset for time %s: %w", *fromTime, err)
		}
		_, c.offset = src.bounds()
		if found {
			c.offset = off
		}
	default:
		c.offset, _ = src.bounds()
	}
	for {
		done, err := c.drain(ctx, src)
		if err != nil {
			if start, ok := src.deletedBelow(err); *follow && ok && c.offset < start {
				// Retention removed what we had not read yet: go on from the start.
				fmt.Fprintf(r.Stderr, "tiered consume: offsets %d-%d of %s-%d were deleted before they were read; continuing at %d\n",
					c.offset, start-1, *topic, *partition, start)
				c.offset = start
				continue
			}
			return err
		}
		if err := c.out.Flush(); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
		if done || !*follow {
			return src.close()
		}
		ok, err := src.wait(ctx, r.pollInterval())
		if err != nil || !ok {
			return err
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fetchSource reads a partition through a fetch service's HTTP API: raw
// batches from /v1/topics/T/partitions/P/records, offsets from the
// partition endpoint and the answers' headers.
type fetchSource struct {
	base      string // without a trailing slash
	topic     string
	partition int32
	path      string // /v1/topics/T/partitions/P
	start     int64
	end       int64
	id        string // the last records answer's topic ID
	hc        *http.Client
}

// fetchOutOfRange is a 416 OFFSET_OUT_OF_RANGE answer.
type fetchOutOfRange struct {
	msg        string
	start, end int64
}

func (e *fetchOutOfRange) Error() string { return e.msg }

func openFetchSource(ctx context.Context, raw, topic string, partition int32) (*fetchSource, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--fetch %q is not an http:// or https:// URL", raw)
	}
	s := &fetchSource{base: u.String(), topic: topic, partition: partition,
		path: fmt.Sprintf("/v1/topics/%s/partitions/%d", url.PathEscape(topic), partition), hc: newHTTPClient()}
	if err := s.refresh(ctx); err != nil {
		s.hc.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// get sends one GET and returns the answer, turning an error answer into
// an error with the service's message.
func (s *fetchSource) get(ctx context.Context, pathQuery, accept string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+pathQuery, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("fetch request: %w", err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for attempt := 0; ; attempt++ {
		resp, err := s.hc.Do(req)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot reach fetch service %s: %w", s.base, err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
		resp.Body.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("read answer of fetch service %s: %w", s.base, err)
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < 5 {
			// Overloaded: wait as told, a few times.
			wait := time.Second
			if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
				wait = time.Duration(secs) * time.Second
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if resp.StatusCode/100 == 2 {
			return resp, data, nil
		}
		var e struct{ Code, Message string }
		msg := resp.Status
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			start, _ := strconv.ParseInt(resp.Header.Get(httpapi.HeaderLogStartOffset), 10, 64)
			end, _ := strconv.ParseInt(resp.Header.Get(httpapi.HeaderLogEndOffset), 10, 64)
			if resp.Header.Get(httpapi.HeaderLogStartOffset) == "" {
				// The error answer carries no offsets: ask.
				if rerr := s.refresh(ctx); rerr == nil {
					start, end = s.start, s.end
				}
			}
			return nil, nil, &fetchOutOfRange{msg: msg, start: start, end: end}
		}
		return nil, nil, &fetchServiceError{msg: fmt.Sprintf("fetch service %s: %s (%s)%s", s.base, msg, e.Code, statusHint(resp.StatusCode)), code: e.Code}
	}
}

// fetchServiceError is an error answer of a fetch service; a
// CORRUPT_MESSAGE matches kafkaerr.ErrCorrupt, so the CLI's hint for
// corrupt data follows it.
type fetchServiceError struct{ msg, code string }

func (e *fetchServiceError) Error() string { return e.msg }

func (e *fetchServiceError) Is(target error) bool {
	return e.code == fetchcache.CodeCorruptMessage && target == kafkaerr.ErrCorrupt
}

// refresh reads the partition's offsets.
func (s *fetchSource) refresh(ctx context.Context) error {
	_, data, err := s.get(ctx, s.path, "")
	if err != nil {
		return err
	}
	var p struct {
		Start int64 `json:"log_start_offset"`
		End   int64 `json:"log_end_offset"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("decode partition of fetch service %s: %w", s.base, err)
	}
	s.start, s.end = p.Start, p.End
	return nil
}

func (s *fetchSource) read(ctx context.Context, offset int64) ([]byte, error) {
	resp, data, err := s.get(ctx, fmt.Sprintf("%s/records?offset=%d&max_bytes=%d", s.path, offset, consumeFetchBytes), httpapi.MediaRaw)
	if err != nil {
		return nil, err
	}
	if v, err := strconv.ParseInt(resp.Header.Get(httpapi.HeaderLogStartOffset), 10, 64); err == nil {
		s.start = v
	}
	if v, err := strconv.ParseInt(resp.Header.Get(httpapi.HeaderLogEndOffset), 10, 64); err == nil {
		s.end = v
	}
	s.id = resp.Header.Get(httpapi.HeaderTopicID)
	return data, nil
}

func (s *fetchSource) topicID() string { return s.id }

// replaced: a fetch service tells another topic by its topic ID alone.
func (s *fetchSource) replaced() string { return "" }

func (s *fetchSource) bounds() (int64, int64) { return s.start, s.end }

// offsetForTime asks for the records from ts and takes the first one's
// offset.
func (s *fetchSource) offsetForTime(ctx context.Context, ts int64) (int64, bool, error) {
	_, data, err := s.get(ctx, fmt.Sprintf("%s/records?timestamp=%d&max_bytes=1", s.path, ts), httpapi.MediaNDJSON)
	if err != nil {
		return 0, false, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	if len(bytes.TrimSpace(line)) == 0 {
		return 0, false, nil
	}
	var first struct {
		Offset int64 `json:"offset"`
	}
	if err := json.Unmarshal(line, &first); err != nil {
		return 0, false, fmt.Errorf("decode records of fetch service %s: %w", s.base, err)
	}
	return first.Offset, true, nil
}

func (s *fetchSource) deletedBelow(err error) (int64, bool) {
	var oe *fetchOutOfRange
	if errors.As(err, &oe) {
		return oe.start, true
	}
	return 0, false
}

func (s *fetchSource) wait(ctx context.Context, every time.Duration) (bool, error) {
	select {
	case <-ctx.Done():
		return false, nil
	case <-time.After(every):
	}
	return true, s.refresh(ctx)
}

func (s *fetchSource) close() error {
	s.hc.CloseIdleConnections()
	return nil
}

func (s *fetchSource) String() string {
	return fmt.Sprintf("%s-%d at %s", s.topic, s.partition, s.base)
}
