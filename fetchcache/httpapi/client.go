package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/localtier/record"
)

// Client defaults.
const (
	// DefaultClientThrottleBudget is how long one Client call may spend in
	// total sleeping on 429 THROTTLED answers before it gives up with the
	// *ThrottledError.
	DefaultClientThrottleBudget = 30 * time.Second
	// DefaultClientMaxResponseBytes bounds the body of one records
	// response: the service returns at least one whole batch even past
	// max_bytes, but never one larger than this.
	DefaultClientMaxResponseBytes = 256 << 20
	// maxErrorBody bounds the JSON error bodies and other small answers read.
	maxSmallBody = 4 << 20
)

// APIError is an error answer of the fetch service that has no more
// specific type: its HTTP status and the JSON body's code and message.
type APIError struct {
	Status  int    // HTTP status code
	Code    string // "INVALID_REQUEST", "INTERNAL", ...; "" when the body was not JSON
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("fetch service: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("fetch service: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// ThrottledError is the fetch service's 429 THROTTLED answer, returned by
// a Client call once its throttle budget is spent. errors.Is(err,
// gate.ErrOverloaded) holds.
type ThrottledError struct {
	RetryAfter time.Duration // the service's last Retry-After
	Message    string
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("fetch service throttled the request (retry after %v): %s", e.RetryAfter, e.Message)
}

// Is makes errors.Is(err, gate.ErrOverloaded) true.
func (e *ThrottledError) Is(target error) bool { return target == gate.ErrOverloaded }

// Client reads a fetch service through its HTTP API (GET /v1/...), raw
// record batches for programs. Unknown topics and partitions are
// *fetchcache.UnknownTopicOrPartitionError, reads outside the log
// *fetchcache.OffsetOutOfRangeError, overload answers are retried after their
// Retry-After within ThrottleBudget and then returned as *ThrottledError;
// other error answers are *APIError. A Client is safe for concurrent use;
// set its fields before the first call.
type Client struct {
	base *url.URL
	hc   *http.Client

	// ThrottleBudget is the total time one call may sleep on throttles
	// (default DefaultClientThrottleBudget; negative: no retry).
	ThrottleBudget time.Duration
	// MaxResponseBytes bounds a records response body (default
	// DefaultClientMaxResponseBytes).
	MaxResponseBytes int64

	sleep func(ctx context.Context, d time.Duration) error // tests
}

// NewClient returns a client of the fetch service at baseURL
// (http://host:port, optionally with a path prefix under which /v1 is
// served). A nil hc uses http.DefaultClient.
func NewClient(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("fetch service URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fetch service URL %q: want http://host:port or https://host:port", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("fetch service URL %q: user info, query and fragment are not accepted", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, hc: hc, ThrottleBudget: DefaultClientThrottleBudget, MaxResponseBytes: DefaultClientMaxResponseBytes, sleep: ctxsleep.Sleep}, nil
}

// String is the service's base URL.
func (c *Client) String() string { return c.base.String() }

// endpoint builds base + /v1/topics[/{topic}/partitions/{p}[/records]].
func (c *Client) endpoint(topic string, partition int32, records bool, q url.Values) string {
	u := *c.base
	p := c.base.Path + "/v1/topics"
	raw := p
	if topic != "" {
		p += "/" + topic + "/partitions/" + strconv.FormatInt(int64(partition), 10)
		raw += "/" + url.PathEscape(topic) + "/partitions/" + strconv.FormatInt(int64(partition), 10)
		if records {
			p += "/records"
			raw += "/records"
		}
	}
	u.Path, u.RawPath = p, raw
	u.RawQuery = q.Encode()
	return u.String()
}

// do sends a GET, retrying throttles within the budget. On 200 it returns
// the response (the caller closes the body); any other status is turned
// into a typed error.
func (c *Client) do(ctx context.Context, target, accept, topic string, partition int32, offset int64) (*http.Response, error) {
	budget := c.ThrottleBudget
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, fmt.Errorf("build request: %w", err)
		}
		req.Header.Set("Accept", accept)
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetch service: %w", err)
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		apiErr := readAPIError(resp)
		switch resp.StatusCode {
		case http.StatusNotFound:
			if apiErr.Code == fetchcache.CodeUnknownTopicOrPartition {
				return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
			}
		case http.StatusRequestedRangeNotSatisfiable:
			if apiErr.Code == fetchcache.CodeOffsetOutOfRange {
				oe := &fetchcache.OffsetOutOfRangeError{Offset: offset, LogStart: -1, LogEnd: -1}
				// The service's message is "offset N is out of range [S, E]".
				var o, s, e int64
				if n, _ := fmt.Sscanf(apiErr.Message, "offset %d is out of range [%d, %d]", &o, &s, &e); n == 3 {
					oe.LogStart, oe.LogEnd = s, e
					return nil, oe
				}
				// Another reason (offsets lost at the source, inside
				// the log): the service's words, not a range of -1s.
				return nil, &outOfRangeAnswer{msg: apiErr.Message, oe: oe}
			}
		case http.StatusTooManyRequests:
			wait := parseRetryAfter(resp.Header.Get("Retry-After"))
			if budget <= 0 || wait > budget {
				return nil, &ThrottledError{RetryAfter: wait, Message: apiErr.Message}
			}
			budget -= wait
			if err := c.sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		return nil, apiErr
	}
}

// outOfRangeAnswer is a 416 OFFSET_OUT_OF_RANGE answer whose message names
// no log range (a read of offsets the manifest records as lost): its text
// is the service's, and errors.As still finds the
// *fetchcache.OffsetOutOfRangeError (LogStart and LogEnd -1: unknown).
type outOfRangeAnswer struct {
	msg string
	oe  *fetchcache.OffsetOutOfRangeError
}

func (e *outOfRangeAnswer) Error() string { return e.msg }
func (e *outOfRangeAnswer) Unwrap() error { return e.oe }

// parseRetryAfter reads Retry-After as seconds or an HTTP date; missing or
// malformed means gate.DefaultRetryAfter.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 && s < 1<<31 {
		return max(time.Duration(s)*time.Second, time.Millisecond)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), time.Millisecond)
	}
	return gate.DefaultRetryAfter
}

// readAPIError consumes and closes an error response.
func readAPIError(resp *http.Response) *APIError {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxSmallBody))
	e := &APIError{Status: resp.StatusCode}
	var he ErrorBody
	if err := json.Unmarshal(body, &he); err == nil && he.Code != "" {
		e.Code, e.Message = he.Code, he.Message
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "..."
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// getJSON GETs target and decodes a JSON body into v.
func (c *Client) getJSON(ctx context.Context, target, topic string, partition int32, v any) error {
	resp, err := c.do(ctx, target, "application/json", topic, partition, -1)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSmallBody)).Decode(v); err != nil {
		return fmt.Errorf("decode answer of %s: %w", target, err)
	}
	return nil
}

// Topics lists the topics the service serves, sorted by name.
func (c *Client) Topics(ctx context.Context) ([]fetchcache.TopicInfo, error) {
	var out struct {
		Topics []TopicJSON `json:"topics"`
	}
	if err := c.getJSON(ctx, c.endpoint("", 0, false, nil), "", -1, &out); err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	ts := make([]fetchcache.TopicInfo, len(out.Topics))
	for i, t := range out.Topics {
		ts[i] = fetchcache.TopicInfo{Name: t.Topic, ID: t.TopicID, Partitions: t.Partitions}
	}
	return ts, nil
}

// PartitionDetails is GET /v1/topics/{t}/partitions/{p}.
type PartitionDetails struct {
	Topic     string
	Partition int32
	fetchcache.Offsets
	// TopicID is the topic ID of the lineage the partition serves, ""
	// when the topic has none or the service does not say.
	TopicID string
	// MaxTimestamp is the largest record timestamp, -1 when no record has
	// one or the service does not know it.
	MaxTimestamp int64
	Segments     []fetchcache.SegmentInfo
}

// PartitionInfo returns a partition's offsets and segments.
func (c *Client) PartitionInfo(ctx context.Context, topic string, partition int32) (PartitionDetails, error) {
	if partition < 0 {
		return PartitionDetails{}, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	var pj PartitionJSON
	if err := c.getJSON(ctx, c.endpoint(topic, partition, false, nil), topic, partition, &pj); err != nil {
		return PartitionDetails{}, fmt.Errorf("describe %s-%d: %w", topic, partition, err)
	}
	d := PartitionDetails{Topic: topic, Partition: partition, TopicID: pj.TopicID, MaxTimestamp: -1, Segments: pj.Segments,
		Offsets: fetchcache.Offsets{LogStart: pj.LogStartOffset, LogEnd: pj.LogEndOffset, LastStable: pj.LastStableOffset}}
	if pj.MaxTimestamp != nil {
		d.MaxTimestamp = *pj.MaxTimestamp
	}
	return d, nil
}

// RawRecords is one raw read.
type RawRecords struct {
	// Data holds whole record batches from the one holding the requested
	// offset; empty at the log end.
	Data []byte
	// NextOffset is the offset after the last batch in Data (the requested
	// offset when Data is empty).
	NextOffset int64
	// LogStart and LogEnd are the partition's offsets when it was read.
	LogStart, LogEnd int64
	// TopicID is the topic ID of the lineage Data was read from (the
	// service's X-Tiered-Topic-Id), "" when the topic has none or the
	// source does not tell. A topic deleted and re-created under the same
	// name answers with another ID.
	TopicID string
}

// ReadRaw reads whole record batches of topic-partition from the batch
// holding offset: at least one batch when offset is below the log end, more
// while they fit in maxBytes (<= 0: the service's default).
func (c *Client) ReadRaw(ctx context.Context, topic string, partition int32, offset int64, maxBytes int) (RawRecords, error) {
	if partition < 0 {
		return RawRecords{}, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	if offset < 0 {
		return RawRecords{}, &fetchcache.OffsetOutOfRangeError{Offset: offset, LogStart: -1, LogEnd: -1}
	}
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if maxBytes > 0 {
		q.Set("max_bytes", strconv.Itoa(maxBytes))
	}
	res, err := c.readRaw(ctx, c.endpoint(topic, partition, true, q), topic, partition, offset)
	if err != nil {
		return res, fmt.Errorf("read %s-%d at offset %d: %w", topic, partition, offset, err)
	}
	return res, nil
}

func (c *Client) readRaw(ctx context.Context, target, topic string, partition int32, offset int64) (RawRecords, error) {
	resp, err := c.do(ctx, target, MediaRaw, topic, partition, offset)
	if err != nil {
		return RawRecords{}, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != MediaRaw {
		return RawRecords{}, fmt.Errorf("answer has Content-Type %q, want %s", resp.Header.Get("Content-Type"), MediaRaw)
	}
	var res RawRecords
	for _, h := range []struct {
		name string
		v    *int64
	}{{HeaderNextOffset, &res.NextOffset}, {HeaderLogStartOffset, &res.LogStart}, {HeaderLogEndOffset, &res.LogEnd}} {
		v, err := strconv.ParseInt(resp.Header.Get(h.name), 10, 64)
		if err != nil {
			return RawRecords{}, fmt.Errorf("answer header %s %q is not an offset", h.name, resp.Header.Get(h.name))
		}
		*h.v = v
	}
	res.TopicID = resp.Header.Get(HeaderTopicID)
	limit := c.MaxResponseBytes
	if resp.ContentLength > limit {
		return RawRecords{}, fmt.Errorf("answer of %d bytes is larger than the %d-byte limit", resp.ContentLength, limit)
	}
	if resp.ContentLength >= 0 {
		res.Data = make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(resp.Body, res.Data); err != nil {
			return RawRecords{}, fmt.Errorf("read answer body: %w", err)
		}
		return res, nil
	}
	res.Data, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return RawRecords{}, fmt.Errorf("read answer body: %w", err)
	}
	if int64(len(res.Data)) > limit {
		return RawRecords{}, fmt.Errorf("answer is larger than the %d-byte limit", limit)
	}
	return res, nil
}

// OffsetForTimestamp returns the first offset of topic-partition whose
// record timestamp is >= ts (Kafka's ListOffsets rule); found is false
// when every record is older (the log end is then the offset a reader
// starts at). The service is asked for records?timestamp=ts and the
// offset is read from the first batch it answers.
func (c *Client) OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (offset int64, found bool, err error) {
	if partition < 0 {
		return 0, false, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	if ts < 0 {
		return 0, false, fmt.Errorf("find timestamp %d in %s-%d: negative timestamp", ts, topic, partition)
	}
	q := url.Values{"timestamp": {strconv.FormatInt(ts, 10)}, "max_bytes": {"1"}}
	res, err := c.readRaw(ctx, c.endpoint(topic, partition, true, q), topic, partition, -1)
	if err != nil {
		return 0, false, fmt.Errorf("find timestamp %d in %s-%d: %w", ts, topic, partition, err)
	}
	// The first batch may straddle the log start: its records below it are
	// not the log's, whatever their timestamps (out of order, one may be
	// later than a record after the log start).
	off, found, err := firstAtOrAfter(res.Data, ts, res.LogStart)
	if err != nil {
		return 0, false, fmt.Errorf("find timestamp %d in %s-%d: %w", ts, topic, partition, err)
	}
	return off, found, nil
}

// firstAtOrAfter is the offset of the first record in data's batches at or
// after offset from with a timestamp >= ts.
func firstAtOrAfter(data []byte, ts, from int64) (int64, bool, error) {
	it := record.NewIter(data)
	it.Verify = true
	var dec record.Decoder
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		if b.MaxTimestamp() < ts && !b.LogAppendTime() {
			continue
		}
		recs, err := dec.Records(b)
		if err != nil {
			return 0, false, fmt.Errorf("decode batch at offset %d: %w", b.BaseOffset(), err)
		}
		for i := range recs {
			if recs[i].Offset >= from && recs[i].Timestamp >= ts {
				return recs[i].Offset, true, nil
			}
		}
	}
	if err := it.Err(); err != nil {
		return 0, false, err
	}
	return 0, false, nil
}

// RetryAfter reports the retry delay of a throttle answer (*ThrottledError)
// or of any overload error gate.RetryAfter knows.
func RetryAfter(err error) (time.Duration, bool) {
	var te *ThrottledError
	if errors.As(err, &te) {
		return max(te.RetryAfter, time.Millisecond), true
	}
	return gate.RetryAfter(err)
}

// Partitions lists the topic's partitions (a replay.ReplaySource).
func (c *Client) Partitions(ctx context.Context, topic string) ([]int32, error) {
	t, err := c.topic(ctx, topic)
	return t.Partitions, err
}

// TopicID is the topic ID the service's partition of topic serves now, ""
// when the topic has none (a replay.ReplaySource). It asks the partition
// (GET /v1/topics/{t}/partitions/{p}, answered after a manifest re-read
// when due), not GET /v1/topics: the service reuses its topic listing for
// up to its TopicsTTL (30 s), and a topic re-created within that time would
// still be listed under the old ID. A service that does not say a
// partition's ID (a release before topic_id there) is asked for the
// listing's.
func (c *Client) TopicID(ctx context.Context, topic string, partition int32) (string, error) {
	d, err := c.PartitionInfo(ctx, topic, partition)
	if err != nil || d.TopicID != "" {
		return d.TopicID, err
	}
	t, err := c.topic(ctx, topic)
	return t.ID, err
}

// topic finds topic in GET /v1/topics.
func (c *Client) topic(ctx context.Context, topic string) (fetchcache.TopicInfo, error) {
	ts, err := c.Topics(ctx)
	if err != nil {
		return fetchcache.TopicInfo{}, err
	}
	for _, t := range ts {
		if t.Name == topic {
			return t, nil
		}
	}
	return fetchcache.TopicInfo{}, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
}

// fetchcache.Offsets returns the partition's offsets (a replay.ReplaySource).
func (c *Client) Offsets(ctx context.Context, topic string, partition int32) (fetchcache.Offsets, error) {
	d, err := c.PartitionInfo(ctx, topic, partition)
	return d.Offsets, err
}
