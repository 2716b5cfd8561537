package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// openReadBucket opens the bucket URL of a command that only reads the
// remote tier (consume --bucket, bucket verify, inspect manifest, replay):
// read-only, so a file:// bucket needs only read permission and nothing is
// created, locked or removed in it. A malformed URL is a usage error; an
// unreachable store, missing credentials or a missing bucket fail with
// objstore's one-line message.
func openReadBucket(ctx context.Context, raw string) (objstore.Bucket, error) {
	loc, err := parseBucketFlag(raw)
	if err != nil {
		return nil, err
	}
	return loc.OpenReadOnly(ctx)
}

// openWriteBucket is openReadBucket for the commands that write to the
// bucket (upload, retention).
func openWriteBucket(ctx context.Context, raw string) (objstore.Bucket, error) {
	loc, err := parseBucketFlag(raw)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx)
}

func parseBucketFlag(raw string) (objstore.Location, error) {
	if raw == "" {
		return objstore.Location{}, usagef("missing required flag --bucket")
	}
	loc, err := objstore.ParseURL(raw)
	if err != nil {
		return objstore.Location{}, usagef("--bucket: %v", err)
	}
	return loc, nil
}

// shownURL is a bucket URL without its query (endpoint and options), for
// messages.
func shownURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		u.RawQuery = ""
		return u.String()
	}
	return raw
}

// bucketSource reads a partition's committed segments for consume.
type bucketSource struct {
	b   objstore.Bucket
	l   *remotelog.RemoteLog
	url string
}

func openBucketSource(ctx context.Context, raw, topic string, partition int32) (*bucketSource, error) {
	b, err := openReadBucket(ctx, raw)
	if err != nil {
		return nil, err
	}
	l, err := remotelog.OpenRemoteLog(ctx, b, "", topic, partition, remotelog.ReaderOptions{})
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return &bucketSource{b: b, l: l, url: shownURL(raw)}, nil
}

func (s *bucketSource) read(ctx context.Context, offset int64) ([]byte, error) {
	res, err := s.l.Read(ctx, offset, consumeFetchBytes)
	return res.Data, err
}

func (s *bucketSource) bounds() (int64, int64) { return s.l.LogStartOffset(), s.l.LogEndOffset() }

// topicID is the lineage the log reads, after the last read or re-read of
// its manifest.
func (s *bucketSource) topicID() string { return s.l.TopicID() }

// replaced: the bucket tells another topic by its topic ID alone.
func (s *bucketSource) replaced() string { return "" }

func (s *bucketSource) offsetForTime(ctx context.Context, ts int64) (int64, bool, error) {
	off, _, found, err := s.l.OffsetForTimestamp(ctx, ts)
	return off, found, err
}

func (s *bucketSource) deletedBelow(err error) (int64, bool) {
	var oor *manifest.OffsetOutOfRangeError
	if errors.As(err, &oor) && oor.Offset < oor.Start {
		return oor.Start, true
	}
	return 0, false
}

// wait re-reads the manifest after each poll interval until it changed.
func (s *bucketSource) wait(ctx context.Context, every time.Duration) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(every):
		}
		changed, err := s.l.Refresh(ctx)
		if ctx.Err() != nil {
			return false, nil
		}
		if err != nil || changed {
			return err == nil, err
		}
	}
}

func (s *bucketSource) close() error {
	if s.b == nil {
		return nil
	}
	b := s.b
	s.b = nil
	return b.Close()
}

func (s *bucketSource) String() string {
	return fmt.Sprintf("%s-%d in %s", s.l.Topic(), s.l.Partition(), s.url)
}

var bucketVerifyCmd = &command{
	name:    "bucket verify",
	summary: "check a bucket's manifests, objects and checksums; list orphans",
	help: `usage: tiered bucket verify --bucket URL [--grace DURATION] [--json]

Checks everything under the bucket URL's prefix (its scope): every partition's root
manifest and sealed sub-manifests decode and match their references; every object a
manifest references exists, has the recorded size, and matches its checksum (read in
full, streamed through the digest); every segment's .log holds batches that pass their
CRC and offset checks, starting and ending at the offsets the manifest records, with its
record count (log_mismatch otherwise). Objects in a partition's directories that no manifest
references are orphans (uploads in flight, or garbage not yet collected); they are listed
with their age. Keys that are not tiered's are listed as foreign and never fail the check.

Exit status 0 when everything matches; 1 when a referenced object is missing or corrupt, a
manifest is unreadable, or an orphan is older than the grace period.

This is one of the two commands that LIST the bucket (with garbage collection); reads
never do. It opens the bucket read-only: S3 credentials that may only read are enough, and
a file:// directory is not modified (no lock file, no temporary directory).

Flags:
  --bucket URL       file:///dir, mem://name[/prefix] or
                     s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
  --grace DURATION   age from which an orphan fails the check (default 1h, the garbage
                     collector's grace period), e.g. 30m, 2h
  --json             print the report as one JSON object
`,
	run: runBucketVerify,
}

func runBucketVerify(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("bucket verify")
	bucketURL := fs.String("bucket", "", "")
	graceFlag := fs.String("grace", remotetier.DefaultGCGrace.String(), "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	grace, err := time.ParseDuration(*graceFlag)
	if err != nil {
		return usagef("--grace %q is not a duration (e.g. 30m, 2h)", *graceFlag)
	}
	if grace < 0 {
		return usagef("--grace %v is negative", grace)
	}
	b, err := openReadBucket(ctx, *bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	rep, err := remotetier.VerifyBucket(ctx, b, remotetier.VerifyOptions{Grace: grace, Now: r.now})
	if err != nil {
		return fmt.Errorf("verify %s: %w", shownURL(*bucketURL), err)
	}
	past := 0
	for _, o := range rep.Orphans {
		if o.PastGrace {
			past++
		}
	}
	if *asJSON {
		out := struct {
			Bucket       string  `json:"bucket"`
			OK           bool    `json:"ok"`
			GraceSeconds float64 `json:"grace_seconds"`
			*remotetier.VerifyReport
		}{shownURL(*bucketURL), rep.OK(), rep.Grace.Seconds(), rep}
		data, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		fmt.Fprintf(r.Stdout, "%s\n", data)
	} else {
		printVerify(r, rep, past)
	}
	if !rep.OK() {
		var why []string
		if n := len(rep.Problems); n > 0 {
			why = append(why, plural(n, "problem"))
		}
		if past > 0 {
			why = append(why, fmt.Sprintf("%s older than the %v grace period", plural(past, "orphan"), rep.Grace))
		}
		return fmt.Errorf("%s: %s", shownURL(*bucketURL), strings.Join(why, ", "))
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func printVerify(r *Runner, rep *remotetier.VerifyReport, past int) {
	w := r.Stdout
	for _, p := range rep.Partitions {
		state := fmt.Sprintf("generation %d, %d segments, %d sub-manifests", p.Generation, p.Segments, p.SubCount)
		switch {
		case !p.HasRoot:
			state = "no manifest"
		case p.Incomplete:
			state += " (manifest unreadable: orphans not determined)"
		}
		where := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if p.Prefix != "" {
			where = p.Prefix + "/" + where
		}
		fmt.Fprintf(w, "partition %s: %s\n", where, state)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "FAIL %s %s (%s-%d): %s\n", p.Kind, p.Key, p.Topic, p.Partition, p.Detail)
	}
	for _, o := range rep.Orphans {
		verdict := "within the grace period"
		if o.PastGrace {
			verdict = "FAIL: older than the grace period"
		}
		fmt.Fprintf(w, "orphan %s (%s-%d): %d bytes, modified %s, age %v, %s\n", o.Key, o.Topic, o.Partition, o.Size,
			o.LastModified.UTC().Format(time.RFC3339), o.Age.Round(time.Second), verdict)
	}
	for _, k := range rep.Foreign {
		fmt.Fprintf(w, "foreign %s (not a tiered key; ignored)\n", k)
	}
	if extra := rep.ForeignCount - len(rep.Foreign); extra > 0 {
		fmt.Fprintf(w, "foreign: %d more\n", extra)
	}
	verdict := "ok"
	if !rep.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "%s: %s, %d objects checked (%d bytes), %d problems, %d orphans (%d past the %v grace period), %d foreign keys\n",
		verdict, plural(len(rep.Partitions), "partition"), rep.Objects, rep.Bytes, len(rep.Problems), len(rep.Orphans), past, rep.Grace, rep.ForeignCount)
}
