package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// The remote tier is built by hand here (the objects and manifest an
// uploader writes), so these tests do not depend on the uploader.

// produceMixed produces n records of every shape consume prints: text,
// binary, null keys, tombstones, headers, and ~1 KiB values so that a
// 1 MiB segment.bytes rolls a few segments.
func produceMixed(t *testing.T, dir, topic string, from, n int) {
	t.Helper()
	var in strings.Builder
	pad := strings.Repeat("x", 1000)
	for i := from; i < from+n; i++ {
		ts := int64(1_600_000_000_000 + i*1000)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&in, `{"key":"k%d","value":"v%d %s","timestamp":%d,"headers":[{"key":"h","value":"x"},{"key":"n","value":null}]}`+"\n", i, i, pad, ts)
		case 1:
			fmt.Fprintf(&in, `{"key":null,"value":"v%d","timestamp":%d}`+"\n", i, ts)
		case 2:
			fmt.Fprintf(&in, `{"key":"k%d","value":null,"timestamp":%d}`+"\n", i, ts)
		case 3:
			fmt.Fprintf(&in, `{"key_b64":"/wA=","value_b64":"gIGC","timestamp":%d}`+"\n", ts-5000) // older than its neighbours
		default:
			fmt.Fprintf(&in, `{"key":"k%d","value":"%s","timestamp":%d}`+"\n", i, pad, ts)
		}
	}
	mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", topic, "--partition", "0")
}

// rollPartition rolls the active segment so every record is in a rolled one.
func rollPartition(t *testing.T, dir, topic string) {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
}

// handUploader commits a data dir partition's rolled segments to a bucket.
type handUploader struct {
	t      *testing.T
	b      objstore.Bucket
	m      *manifest.Manifest
	policy manifest.Policy
	keys   []string // data keys committed, in order
}

func newHandUploader(t *testing.T, bucketURL, topic string, p manifest.Policy) *handUploader {
	t.Helper()
	b, err := objstore.Open(context.Background(), bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := manifest.New("", topic, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &handUploader{t: t, b: b, m: m, policy: p}
}

func (u *handUploader) put(key string, data []byte) manifest.Object {
	u.t.Helper()
	if _, err := u.b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
		u.t.Fatal(err)
	}
	sum, _ := manifest.ChecksumOf(manifest.CRC32C, data)
	return manifest.Object{Key: key, Size: int64(len(data)), Checksum: sum}
}

// upload commits every rolled segment of dir's partition not committed yet.
func (u *handUploader) upload(dir string) {
	t := u.t
	t.Helper()
	pdir := filepath.Join(dir, u.m.Topic+"-0")
	names, err := filepath.Glob(filepath.Join(pdir, "*.log"))
	if err != nil || len(names) < 2 {
		t.Fatalf("segments %v, %v", names, err)
	}
	var segs []manifest.Segment
	for _, name := range names[:len(names)-1] { // the last is active
		base, _, _ := localtier.ParseSegmentName(filepath.Base(name))
		if base < u.m.NextOffset() {
			continue
		}
		read := func(ext string) []byte {
			data, err := os.ReadFile(localtier.SegmentPath(pdir, base, ext))
			if os.IsNotExist(err) {
				return []byte{}
			}
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		log := read(".log")
		attempt := manifest.NewAttemptID()
		keys, _ := manifest.DataKeys("", u.m.Topic, 0, base, attempt)
		seg := manifest.Segment{BaseOffset: base, MinTimestamp: -1, MaxTimestamp: -1, LeaderEpochs: []manifest.EpochEntry{},
			Log: u.put(keys.Log, log), Index: u.put(keys.Index, read(".index")), TimeIndex: u.put(keys.TimeIndex, read(".timeindex")),
			UploadTimeMs: 1_700_000_000_000, Uploader: "test", AttemptID: attempt}
		it := record.NewIter(log)
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			seg.LastOffset = b.LastOffset()
			seg.RecordCount += int64(b.RecordCount())
			if seg.MinTimestamp < 0 || b.MaxTimestamp() < seg.MinTimestamp {
				seg.MinTimestamp = b.MaxTimestamp()
			}
			seg.MaxTimestamp = max(seg.MaxTimestamp, b.MaxTimestamp())
		}
		segs = append(segs, seg)
		u.keys = append(u.keys, keys.Log, keys.Index, keys.TimeIndex)
	}
	var c *manifest.Commit
	if u.m.Generation > 0 && len(segs) > 0 && segs[0].BaseOffset > u.m.NextOffset() {
		// Segments deleted before their upload: a gap, as the uploader records it.
		c, err = manifest.AppendLost(u.m, u.policy, manifest.Gap{BaseOffset: u.m.NextOffset(), LastOffset: segs[0].BaseOffset - 1,
			DetectedMs: 1_700_000_000_000}, segs...)
	} else {
		c, err = manifest.Append(u.m, u.policy, segs...)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Subs {
		u.put(s.Ref.Key, s.Data)
	}
	root, _ := manifest.EncodeRoot(c.Root)
	u.put(c.Root.Key(), root)
	u.m = c.Root
}

// remoteFixture is a data dir whose partition c-0 (3+ rolled segments)
// is committed to a file:// bucket with sealed sub-manifests.
func remoteFixture(t *testing.T) (dir, bucketURL string, u *handUploader) {
	t.Helper()
	dir = t.TempDir()
	bdir := t.TempDir()
	bucketURL = "file://" + bdir
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "c", "--config", "segment.bytes=1048576")
	produceMixed(t, dir, "c", 0, 3000)
	rollPartition(t, dir, "c")
	u = newHandUploader(t, bucketURL, "c", manifest.Policy{InlineMax: 1, SubSegments: 1})
	u.upload(dir)
	if len(u.m.Sealed) == 0 || u.m.NextOffset() != 3000 {
		t.Fatalf("fixture: %d sealed, next offset %d", len(u.m.Sealed), u.m.NextOffset())
	}
	return dir, bucketURL, u
}

func TestConsumeBucketMatchesDataDir(t *testing.T) {
	dir, bucketURL, _ := remoteFixture(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"all", nil},
		{"from_offset", []string{"--from-offset", "1234"}},
		{"from_offset_end", []string{"--from-offset", "3000"}},
		{"from_time", []string{"--from-time", "2020-09-13T12:30:00Z"}},
		{"from_time_millis", []string{"--from-time", "1600001000500"}},
		{"from_time_after_all", []string{"--from-time", "2030-01-01T00:00:00Z"}},
		{"max_records", []string{"--from-offset", "998", "--max-records", "7"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := []string{"consume", "--topic", "c", "--partition", "0"}
			local := mustRun(t, "", append(append(base, "--data-dir", dir), tt.args...)...)
			remote := mustRun(t, "", append(append(base, "--bucket", bucketURL), tt.args...)...)
			if local.stdout != remote.stdout {
				t.Fatalf("--bucket output differs from --data-dir: %d vs %d lines", len(lines(remote.stdout)), len(lines(local.stdout)))
			}
			if tt.name == "all" && len(lines(remote.stdout)) != 3000 {
				t.Fatalf("%d lines", len(lines(remote.stdout)))
			}
		})
	}
}

func TestConsumeBucketFollow(t *testing.T) {
	dir, bucketURL, u := remoteFixture(t)
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{Stdout: &out, Stderr: &errb, PollInterval: 5 * time.Millisecond}
	done := make(chan int)
	go func() {
		done <- r.Run(ctx, []string{"consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0", "--from-offset", "2990", "--follow"})
	}()
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(lines(out.String())) < n {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("%d lines, want %d; stderr %q", len(lines(out.String())), n, errb.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(10)
	produceMixed(t, dir, "c", 3000, 20)
	rollPartition(t, dir, "c")
	u.upload(dir)
	waitFor(30)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	want := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "c", "--partition", "0", "--from-offset", "2990")
	if out.String() != want.stdout {
		t.Fatalf("followed output differs from the data dir's")
	}
}

func TestBucketCommandErrors(t *testing.T) {
	_, bucketURL, _ := remoteFixture(t)
	missing := "file://" + filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"consume_unknown_partition", []string{"consume", "--bucket", bucketURL, "--topic", "c", "--partition", "1"}, ExitError, "unknown topic or partition c-1"},
		{"consume_unknown_topic", []string{"consume", "--bucket", bucketURL, "--topic", "d", "--partition", "0"}, ExitError, "unknown topic or partition d-0"},
		{"consume_offset_out_of_range", []string{"consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0", "--from-offset", "3001"}, ExitError, "offset 3001 is out of range for c-0 (log start offset 0, log end offset 3000)"},
		{"consume_malformed_url", []string{"consume", "--bucket", "ftp://x", "--topic", "c", "--partition", "0"}, ExitUsage, "--bucket: bucket URL"},
		{"consume_missing_bucket", []string{"consume", "--bucket", missing, "--topic", "c", "--partition", "0"}, ExitError, "does not exist"},
		{"inspect_unknown_partition", []string{"inspect", "manifest", "--bucket", bucketURL, "--topic", "c", "--partition", "7"}, ExitError, "unknown topic or partition c-7"},
		{"inspect_no_bucket", []string{"inspect", "manifest", "--topic", "c", "--partition", "0"}, ExitUsage, "missing required flag --bucket"},
		{"inspect_no_partition", []string{"inspect", "manifest", "--bucket", bucketURL, "--topic", "c"}, ExitUsage, "missing required flag --partition"},
		{"verify_no_bucket", []string{"bucket", "verify"}, ExitUsage, "missing required flag --bucket"},
		{"verify_bad_grace", []string{"bucket", "verify", "--bucket", bucketURL, "--grace", "soon"}, ExitUsage, `--grace "soon" is not a duration`},
		{"verify_malformed_url", []string{"bucket", "verify", "--bucket", "s3://"}, ExitUsage, "missing bucket name"},
		{"verify_missing_bucket", []string{"bucket", "verify", "--bucket", missing}, ExitError, "does not exist"},
		{"bucket_without_sub", []string{"bucket"}, ExitUsage, "missing subcommand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, "", tt.args...)
			if res.code != tt.code || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line containing %q", res.code, res.stderr, tt.code, tt.want)
			}
		})
	}
}

func TestInspectManifest(t *testing.T) {
	_, bucketURL, u := remoteFixture(t)
	args := []string{"inspect", "manifest", "--bucket", bucketURL, "--topic", "c", "--partition", "0"}
	res := mustRun(t, "", args...)
	for _, want := range []string{
		"manifest " + u.m.Key(),
		fmt.Sprintf("generation 1 logStartOffset 0 nextOffset 3000 segments %d", u.m.SegmentCount()),
		"sealed " + u.m.Sealed[0].Key,
		"segment baseOffset " + fmt.Sprint(u.m.Segments[0].BaseOffset),
		"  log       " + u.m.Segments[0].Log.Key,
		string(u.m.Segments[0].Log.Checksum),
	} {
		if !strings.Contains(res.stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Count(res.stdout, "segment baseOffset") != len(u.m.Segments) {
		t.Fatalf("without --all only inline segments are printed:\n%s", res.stdout)
	}
	all := mustRun(t, "", append(args, "--all")...)
	if strings.Count(all.stdout, "segment baseOffset") != u.m.SegmentCount() {
		t.Fatalf("--all: want %d segments:\n%s", u.m.SegmentCount(), all.stdout)
	}

	js := mustRun(t, "", append(args, "--json", "--all")...)
	var got manifestJSON
	if err := json.Unmarshal([]byte(js.stdout), &got); err != nil {
		t.Fatal(err)
	}
	n := len(got.Segments)
	for _, s := range got.SubManifests {
		n += len(s.Segments)
	}
	if got.Key != u.m.Key() || got.Generation != 1 || got.NextOffset != 3000 || len(got.Sealed) != len(u.m.Sealed) || n != u.m.SegmentCount() || got.LogBytes != u.m.LogBytes() {
		t.Fatalf("json: %+v", got)
	}

	// A corrupt sub-manifest is reported with --all.
	put := func(key string, data []byte) {
		if _, err := u.b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put(u.m.Sealed[0].Key, []byte("{}"))
	res = run(t, "", append(args, "--all")...)
	if res.code != ExitError || !strings.Contains(res.stderr, "corrupt") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestInspectManifestGaps: inspect manifest prints the gaps (text and
// JSON), and consume --bucket reading into one fails with the out-of-range
// hint rather than skipping it.
func TestInspectManifestGaps(t *testing.T) {
	dir, bucketURL, u := remoteFixture(t)
	produceMixed(t, dir, "c", 3000, 1000)
	rollPartition(t, dir, "c")
	produceMixed(t, dir, "c", 4000, 1000)
	rollPartition(t, dir, "c")
	// The segment at 3000 goes before it is uploaded.
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(localtier.SegmentPath(filepath.Join(dir, "c-0"), 3000, ext)); err != nil {
			t.Fatal(err)
		}
	}
	u.upload(dir)
	if len(u.m.Gaps) != 1 || u.m.Gaps[0].BaseOffset != 3000 || u.m.Gaps[0].LastOffset != 3999 {
		t.Fatalf("fixture: gaps %+v", u.m.Gaps)
	}
	args := []string{"inspect", "manifest", "--bucket", bucketURL, "--topic", "c", "--partition", "0"}
	if res := mustRun(t, "", args...); !strings.Contains(res.stdout, "gap baseOffset 3000 lastOffset 3999 offsets 1000 detected 2023-11-14T22:13:20Z (lost") {
		t.Fatalf("no gap line:\n%s", res.stdout)
	}
	var got manifestJSON
	if err := json.Unmarshal([]byte(mustRun(t, "", append(args, "--json")...).stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Gaps) != 1 || got.Gaps[0] != u.m.Gaps[0] {
		t.Fatalf("json gaps %+v", got.Gaps)
	}
	res := run(t, "", "consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0", "--from-offset", "3500")
	if res.code != ExitError || !strings.Contains(res.stderr, "deleted at the source before they were uploaded") {
		t.Fatalf("consume into the gap: exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestBucketVerify(t *testing.T) {
	ctx := context.Background()
	_, bucketURL, u := remoteFixture(t)
	bdir := strings.TrimPrefix(bucketURL, "file://")
	now := time.UnixMilli(1_700_000_000_000) // the clock run() gives commands
	ok := mustRun(t, "", "bucket", "verify", "--bucket", bucketURL)
	if !strings.Contains(ok.stdout, "ok: 1 partition") || !strings.Contains(ok.stdout, "0 problems") {
		t.Fatalf("stdout %q", ok.stdout)
	}

	// An orphan within the grace period is listed but passes.
	keys, _ := manifest.DataKeys("", "c", 0, 0, manifest.NewAttemptID())
	if _, err := u.b.Put(ctx, keys.Log, strings.NewReader("half"), 4, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	setAge := func(key string, age time.Duration) {
		at := now.Add(-age)
		if err := os.Chtimes(filepath.Join(bdir, key), at, at); err != nil {
			t.Fatal(err)
		}
	}
	setAge(keys.Log, 10*time.Minute)
	res := mustRun(t, "", "bucket", "verify", "--bucket", bucketURL)
	if !strings.Contains(res.stdout, "orphan "+keys.Log) || !strings.Contains(res.stdout, "age 10m0s, within the grace period") {
		t.Fatalf("stdout %q", res.stdout)
	}
	// Older than the grace period: exit 1; a longer --grace passes.
	setAge(keys.Log, 2*time.Hour)
	res = run(t, "", "bucket", "verify", "--bucket", bucketURL)
	if res.code != ExitError || !strings.Contains(res.stderr, "1 orphan older than the 1h0m0s grace period") || len(lines(res.stderr)) != 1 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	mustRun(t, "", "bucket", "verify", "--bucket", bucketURL, "--grace", "3h")

	// A flipped byte in a referenced object: its checksum, and the CRC of
	// the batch holding it.
	seg := u.m.Segments[0]
	path := filepath.Join(bdir, seg.Log.Key)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if _, err := u.b.Put(ctx, seg.Log.Key, bytes.NewReader(data), int64(len(data)), objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	res = run(t, "", "bucket", "verify", "--bucket", bucketURL, "--grace", "3h", "--json")
	if res.code != ExitError || !strings.Contains(res.stderr, "2 problems") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	var rep struct {
		OK       bool `json:"ok"`
		Problems []struct {
			Kind, Key string
		} `json:"problems"`
		Orphans []struct {
			Key        string  `json:"key"`
			AgeSeconds float64 `json:"age_seconds"`
			PastGrace  bool    `json:"past_grace"`
		} `json:"orphans"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	kinds := map[string]bool{}
	for _, p := range rep.Problems {
		kinds[p.Kind] = p.Key == seg.Log.Key
	}
	if rep.OK || len(rep.Problems) != 2 || !kinds["checksum_mismatch"] || !kinds["log_mismatch"] ||
		len(rep.Orphans) != 1 || rep.Orphans[0].AgeSeconds != 7200 || rep.Orphans[0].PastGrace {
		t.Fatalf("report %+v", rep)
	}
}

// TestBucketVerifyClaimedLastOffset rewrites the root manifest so that its
// final segment claims a last offset its bytes do not reach: 2^63-2 (the
// manifest is refused as corrupt) or 2^31-1 past its base (the most a
// segment can span; the walk of its batches finds them ending lower).
// bucket verify exits 1 naming the problem.
func TestBucketVerifyClaimedLastOffset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim func(base int64) int64
		want  string
	}{
		{"absurd", func(int64) int64 { return 1<<63 - 2 }, "corrupt_manifest"},
		{"span_limit", func(base int64) int64 { return base + manifest.MaxSegmentSpan }, "the last batch ends at offset 2999, the manifest says the segment ends at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, bucketURL, u := remoteFixture(t)
			seg := u.m.Segments[len(u.m.Segments)-1]
			root, err := os.ReadFile(filepath.Join(strings.TrimPrefix(bucketURL, "file://"), u.m.Key()))
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Replace(root, []byte(fmt.Sprintf(`"last_offset":%d`, seg.LastOffset)), []byte(fmt.Sprintf(`"last_offset":%d`, tc.claim(seg.BaseOffset))), 1)
			if bytes.Equal(bad, root) {
				t.Fatal("the root manifest does not hold the final segment's last offset")
			}
			u.put(u.m.Key(), bad)
			res := run(t, "", "bucket", "verify", "--bucket", bucketURL)
			if res.code != ExitError || !strings.Contains(res.stdout, tc.want) || !strings.Contains(res.stderr, "1 problem") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", res.code, res.stdout, res.stderr, tc.want)
			}
		})
	}
}

// TestBucketCommandsMinIO runs consume --bucket, inspect manifest and bucket
// verify end to end against MinIO through s3:// URLs.
func TestBucketCommandsMinIO(t *testing.T) {
	srv := testminio.Start(t)
	testminio.SetCredentialsEnv(t)
	bucket := srv.NewBucket(t)
	url := srv.URL(bucket, "tiered/test")
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "c", "--config", "segment.bytes=1048576")
	produceMixed(t, dir, "c", 0, 1500)
	rollPartition(t, dir, "c")
	u := newHandUploader(t, url, "c", manifest.Policy{InlineMax: 1, SubSegments: 1})
	u.upload(dir)

	local := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "c", "--partition", "0")
	remote := mustRun(t, "", "consume", "--bucket", url, "--topic", "c", "--partition", "0")
	if local.stdout != remote.stdout || len(lines(remote.stdout)) != 1500 {
		t.Fatalf("--bucket output differs: %d vs %d lines", len(lines(remote.stdout)), len(lines(local.stdout)))
	}
	res := mustRun(t, "", "inspect", "manifest", "--bucket", url, "--topic", "c", "--partition", "0", "--all")
	if !strings.Contains(res.stdout, "manifest "+u.m.Key()) {
		t.Fatalf("stdout %q", res.stdout)
	}
	res = mustRun(t, "", "bucket", "verify", "--bucket", url)
	if !strings.Contains(res.stdout, "ok: 1 partition") {
		t.Fatalf("stdout %q", res.stdout)
	}
	if err := u.b.Delete(context.Background(), u.keys[1]); err != nil {
		t.Fatal(err)
	}
	res = run(t, "", "bucket", "verify", "--bucket", url)
	if res.code != ExitError || !strings.Contains(res.stdout, "FAIL missing "+u.keys[1]) {
		t.Fatalf("exit %d, stdout %q", res.code, res.stdout)
	}
	// A bucket that does not exist fails fast with one line.
	res = run(t, "", "bucket", "verify", "--bucket", srv.URL("no-such-bucket", ""))
	if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, "does not exist") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestBucketCommandsRefuseSymlinks replaces the root manifest, then a
// segment's .log, of a file:// bucket by a link to a copy outside the
// bucket: the reading commands refuse it, naming the key, instead of
// serving what the link points to.
func TestBucketCommandsRefuseSymlinks(t *testing.T) {
	_, bucketURL, u := remoteFixture(t)
	root := strings.TrimPrefix(bucketURL, "file://")
	outside := t.TempDir()
	link := func(t *testing.T, key string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(key))
		moved := filepath.Join(outside, filepath.Base(p))
		if err := os.Rename(p, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(p)
			os.Rename(moved, p)
		})
	}
	// verify compares the listed size first: a linked .log is a FAIL
	// size_mismatch (the link's own size), never the linked bytes.
	for _, tt := range []struct {
		name, key string
		args      [][]string
	}{
		{"manifest", u.m.Key(), [][]string{
			{"inspect", "manifest", "--bucket", bucketURL, "--topic", "c", "--partition", "0"},
			{"consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0"},
			{"bucket", "verify", "--bucket", bucketURL},
		}},
		{"segment_log", u.keys[0], [][]string{
			{"consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0"},
			{"bucket", "verify", "--bucket", bucketURL},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			link(t, tt.key)
			for _, args := range tt.args {
				res := run(t, "", args...)
				out := res.stdout + res.stderr
				refused := strings.Contains(out, "symbolic link refused") && strings.Contains(out, tt.key)
				if args[0] == "bucket" && tt.name == "segment_log" {
					refused = strings.Contains(res.stdout, "FAIL size_mismatch "+tt.key)
				}
				if res.code != ExitError || !refused {
					t.Errorf("tiered %s: exit %d, stderr %q, stdout ends %q; want exit 1 refusing the link at %s",
						strings.Join(args[:2], " "), res.code, res.stderr, tail(res.stdout, 300), tt.key)
				}
			}
		})
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestConsumeBucketFIFOFailsAtOnce replaces a committed .log of a file://
// bucket by a FIFO with no writer: consume --bucket fails at once naming
// the key, instead of blocking forever in open(2).
func TestConsumeBucketFIFOFailsAtOnce(t *testing.T) {
	_, bucketURL, u := remoteFixture(t)
	p := filepath.Join(strings.TrimPrefix(bucketURL, "file://"), filepath.FromSlash(u.keys[0]))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() { done <- run(t, "", "consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0") }()
	select {
	case res := <-done:
		if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, "not a regular file: it is a FIFO") || !strings.Contains(res.stderr, u.keys[0]) {
			t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the FIFO %s", res.code, res.stderr, u.keys[0])
		}
	case <-time.After(20 * time.Second):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // let the blocked open return so the test binary can end
		}
		t.Fatal("consume --bucket still blocked on the FIFO after 20s")
	}
}

// TestBucketDeleteRecords: a dry run changes nothing; then the remote log
// starts at the offset, reads below it are out of range, reads from it are
// the data dir's records, the segments wholly below it are gone without
// orphans (bucket verify passes), and a second run at or below the new
// start changes nothing.
func TestBucketDeleteRecords(t *testing.T) {
	dir, bucketURL, u := remoteFixture(t)
	cut := u.m.Segments[0].BaseOffset + 7 // inside the first inline segment, past every sealed one
	args := []string{"bucket", "delete-records", "--bucket", bucketURL, "--topic", "c", "--partition", "0", "--before", fmt.Sprint(cut)}
	consume := func(from int64) result {
		return run(t, "", "consume", "--bucket", bucketURL, "--topic", "c", "--partition", "0", "--from-offset", fmt.Sprint(from))
	}

	dry := mustRun(t, "", append(args, "--dry-run", "--json")...)
	var out struct {
		DryRun   bool  `json:"dry_run"`
		Start    int64 `json:"log_start_offset"`
		NewStart int64 `json:"new_log_start_offset"`
		Segments []struct {
			Reason string `json:"reason"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(dry.stdout), &out); err != nil {
		t.Fatalf("%v: %q", err, dry.stdout)
	}
	if !out.DryRun || out.Start != 0 || out.NewStart != cut || len(out.Segments) != u.m.SegmentCount()-len(u.m.Segments) {
		t.Fatalf("dry run: %+v; want log start 0 -> %d and the %d sealed segments", out, cut, u.m.SegmentCount()-len(u.m.Segments))
	}
	if res := consume(0); res.code != 0 || len(lines(res.stdout)) != 3000 {
		t.Fatalf("after the dry run: exit %d, %d records", res.code, len(lines(res.stdout)))
	}

	res := mustRun(t, "", args...)
	if !strings.Contains(res.stdout, fmt.Sprintf("c-0: log start offset moved from 0 to %d", cut)) {
		t.Fatalf("output:\n%s", res.stdout)
	}
	if res := consume(cut - 1); res.code != ExitError || !strings.Contains(res.stderr, fmt.Sprintf("log start offset %d", cut)) {
		t.Fatalf("read below the new log start: exit %d, stderr %q", res.code, res.stderr)
	}
	want := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "c", "--partition", "0", "--from-offset", fmt.Sprint(cut))
	if got := consume(cut); got.code != 0 || got.stdout != want.stdout {
		t.Fatalf("read from the new log start: exit %d, %d records; want the data dir's %d", got.code, len(lines(got.stdout)), len(lines(want.stdout)))
	}
	mustRun(t, "", "bucket", "verify", "--bucket", bucketURL, "--grace", "0s")
	if again := mustRun(t, "", args...); !strings.Contains(again.stdout, "nothing changed") {
		t.Fatalf("second run:\n%s", again.stdout)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"past the end", []string{"--topic", "c", "--partition", "0", "--before", "3001"}, ExitError, "must be at most its end 3000"},
		{"unknown partition", []string{"--topic", "c", "--partition", "7", "--before", "1"}, ExitError, "unknown topic or partition c-7"},
		{"no offset", []string{"--topic", "c", "--partition", "0"}, ExitUsage, "missing required flag --before"},
		{"negative offset", []string{"--topic", "c", "--partition", "0", "--before", "-1"}, ExitUsage, "--before -1 is negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, "", append([]string{"bucket", "delete-records", "--bucket", bucketURL}, tt.args...)...)
			if res.code != tt.code || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line containing %q", res.code, res.stderr, tt.code, tt.want)
			}
		})
	}
}
