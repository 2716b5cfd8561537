package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// produceRolled creates a remote-enabled topic and produces n records, 2 s
// apart, so that every record rolls a segment (segment.ms=1000).
func produceRolled(t *testing.T, dir, topic string, n int, extra ...string) {
	t.Helper()
	args := []string{"topic", "create", "--data-dir", dir, "--topic", topic, "--config", "segment.ms=1000",
		"--config", "remote.storage.enable=true"}
	for _, c := range extra {
		args = append(args, "--config", c)
	}
	mustRun(t, "", args...)
	for i := 0; i < n; i++ {
		mustRun(t, fmt.Sprintf(`{"key":"k%d","value":"value %d","timestamp":%d}`+"\n", i, i, 1_699_990_000_000+int64(i)*2000),
			"produce", "--data-dir", dir, "--topic", topic)
	}
}

func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

// rolledWithBucket runs produceRolled on topic "logs" of <tmp>/data and
// creates an empty <tmp>/bucket directory; it returns both paths.
func rolledWithBucket(t *testing.T, n int, extra ...string) (dir, bucket string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "data")
	produceRolled(t, dir, "logs", n, extra...)
	bucket = filepath.Join(root, "bucket")
	if err := os.Mkdir(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bucket
}

func TestUploadCommand(t *testing.T) {
	dir, bucket := rolledWithBucket(t, 4)
	res := mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket), "--json")
	var rep struct {
		UploadedSegments int `json:"uploaded_segments"`
		Commits          int `json:"commits"`
		LagSegments      int `json:"lag_segments"`
		Partitions       []struct {
			Committed []struct {
				BaseOffset int64 `json:"base_offset"`
			} `json:"committed"`
			RemoteNextOffset int64 `json:"remote_next_offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("report %q: %v", res.stdout, err)
	}
	// Four records, each in its own segment; the last is active.
	if rep.UploadedSegments != 3 || rep.Commits != 1 || rep.LagSegments != 0 || rep.Partitions[0].RemoteNextOffset != 3 {
		t.Fatalf("report %+v", rep)
	}
	// Rerun: nothing to do.
	res = mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket))
	if !strings.Contains(res.stdout, "uploaded 0 segments") {
		t.Fatalf("second upload: %q", res.stdout)
	}
	// The committed records read back through the manifest as from the data dir.
	local := lines(mustRun(t, "", "consume", "--data-dir", dir, "--topic", "logs", "--partition", "0").stdout)
	remote := lines(mustRun(t, "", "consume", "--bucket", fileURL(bucket), "--topic", "logs", "--partition", "0").stdout)
	if len(remote) != 3 || strings.Join(remote, "\n") != strings.Join(local[:3], "\n") {
		t.Fatalf("consume --bucket:\n%s\nwant:\n%s", strings.Join(remote, "\n"), strings.Join(local[:3], "\n"))
	}
	// The bucket verifies clean.
	mustRun(t, "", "bucket", "verify", "--bucket", fileURL(bucket))

	// The default bucket is file://<data-dir>/bucket.
	mustRun(t, "", "upload", "--data-dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "bucket", "manifests")); err != nil {
		t.Fatalf("default bucket: %v", err)
	}
	// The data dir still opens (the loader skips the bucket directory).
	mustRun(t, "", "consume", "--data-dir", dir, "--topic", "logs", "--partition", "0")
}

// TestUploadManifestVersion: --manifest-version 1 writes one object per
// index under a version-1 manifest, which still reads back and verifies.
func TestUploadManifestVersion(t *testing.T) {
	dir, bucket := rolledWithBucket(t, 3)
	mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket), "--manifest-version", "1")
	var data []string
	var rootKey string
	if err := filepath.WalkDir(bucket, func(path string, e fs.DirEntry, err error) error {
		switch {
		case err != nil || e.IsDir():
			return err
		case e.Name() == "manifest.json":
			rootKey = path
		case strings.Contains(path, string(filepath.Separator)+"data"+string(filepath.Separator)):
			data = append(data, filepath.Ext(path))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(data)
	if want := []string{".index", ".index", ".log", ".log", ".timeindex", ".timeindex"}; !slices.Equal(data, want) {
		t.Fatalf("objects %v, want %v", data, want)
	}
	m, err := os.ReadFile(rootKey)
	if err != nil || !strings.HasPrefix(string(m), `{"version":1,`) {
		t.Fatalf("root manifest %.30q, %v; want one starting {\"version\":1,", m, err)
	}
	inspect := func(bucket string) string {
		return mustRun(t, "", "inspect", "manifest", "--bucket", fileURL(bucket), "--topic", "logs", "--partition", "0").stdout
	}
	if out := inspect(bucket); strings.Contains(out, ".indexes") || strings.Contains(out, " at ") {
		t.Fatalf("inspect manifest shows sections of a version-1 upload:\n%s", out)
	}
	// The same data uploaded as version 2 does show them: the check above
	// looks for what inspect prints of sections.
	bucket2 := filepath.Join(t.TempDir(), "bucket2")
	if err := os.Mkdir(bucket2, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket2), "--manifest-version", "2")
	if out := inspect(bucket2); !strings.Contains(out, ".indexes") || !strings.Contains(out, " at ") {
		t.Fatalf("inspect manifest of a version-2 upload, want .indexes sections \"at\" their offsets:\n%s", out)
	}
	if remote := lines(mustRun(t, "", "consume", "--bucket", fileURL(bucket), "--topic", "logs", "--partition", "0").stdout); len(remote) != 2 {
		t.Fatalf("consume --bucket: %d records, want 2", len(remote))
	}
	mustRun(t, "", "bucket", "verify", "--bucket", fileURL(bucket))
}

func TestUploadCommandErrors(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	produceRolled(t, dir, "logs", 2)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"malformed_url", []string{"--bucket", "s3//nope"}, 2, "bucket URL"},
		{"unknown_scheme", []string{"--bucket", "ftp://x/y"}, 2, "unknown scheme"},
		{"missing_dir", []string{"--bucket", fileURL(filepath.Join(root, "nope"))}, 1, "nope"},
		{"bad_rate", []string{"--bucket", fileURL(root), "--rate", "fast"}, 2, "--rate"},
		{"bad_concurrency", []string{"--bucket", fileURL(root), "--concurrency", "0"}, 2, "--concurrency"},
		{"newer_manifest_version", []string{"--bucket", fileURL(root), "--manifest-version", "3"}, 2, "--manifest-version 3 must be from 1 to 2"},
		{"missing_data_dir", []string{"--bucket", fileURL(root), "--data-dir", filepath.Join(root, "none")}, 1, "does not exist"},
		{"unreachable_s3", []string{"--bucket", "s3://b/p?endpoint=http://127.0.0.1:1&region=us-east-1&path_style=true"}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"upload", "--data-dir", dir}, tc.args...)
			if tc.name == "missing_data_dir" {
				args = append([]string{"upload"}, tc.args...)
			}
			if tc.name == "unreachable_s3" {
				t.Setenv("AWS_ACCESS_KEY_ID", "x")
				t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
				t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			}
			res := run(t, "", args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || strings.Count(res.stderr, "\n") != 1 {
				t.Fatalf("exit %d stderr %q, want exit %d with %q on one line", res.code, res.stderr, tc.code, tc.want)
			}
		})
	}
}

func TestRetentionCommandBucket(t *testing.T) {
	// retention.ms one hour; the records are 2.7 hours old (the Runner clock).
	dir, bucket := rolledWithBucket(t, 4, "retention.ms=3600000", "local.retention.ms=1000")
	// Without a bucket, the remote-enabled topic keeps everything.
	res := mustRun(t, "", "retention", "--data-dir", dir, "--json")
	if strings.Contains(res.stdout, `"remote"`) || countSegments(t, dir) != 4 {
		t.Fatalf("retention without a bucket: %s", res.stdout)
	}
	// Upload, then retention removes the three rolled segments remotely and locally.
	mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket))
	res = mustRun(t, "", "retention", "--data-dir", dir, "--bucket", fileURL(bucket), "--dry-run", "--json")
	var rep struct {
		Remote struct {
			DryRun          bool `json:"dry_run"`
			DeletedSegments int  `json:"deleted_segments"`
		} `json:"remote"`
		GC *struct{} `json:"gc"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Remote.DryRun || rep.Remote.DeletedSegments != 3 || rep.GC == nil || countSegments(t, dir) != 4 {
		t.Fatalf("dry run: %s", res.stdout)
	}
	res = mustRun(t, "", "retention", "--data-dir", dir, "--bucket", fileURL(bucket))
	if !strings.Contains(res.stdout, "remote: 3 segments deleted") || countSegments(t, dir) != 1 {
		t.Fatalf("retention --bucket: %q, %d local segments", res.stdout, countSegments(t, dir))
	}
	var objects []string
	filepath.WalkDir(bucket, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.Contains(p, "/data/") {
			objects = append(objects, p)
		}
		return nil
	})
	if len(objects) != 0 {
		t.Fatalf("data objects left after remote retention: %v", objects)
	}
	mustRun(t, "", "bucket", "verify", "--bucket", fileURL(bucket))
	if res := run(t, "", "retention", "--data-dir", dir, "--gc-grace", "1m"); res.code != 2 {
		t.Fatalf("--gc-grace without --bucket: %+v", res)
	}
}

func countSegments(t *testing.T, dir string) int {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "logs-0", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

// TestUploadEmptyBucketFlag: an explicit empty --bucket (say an unset
// "$BUCKET") is a usage error naming the flag, not a silent upload to the
// default file://<data-dir>/bucket; the same for retention, which would
// otherwise skip the bucket silently.
func TestUploadEmptyBucketFlag(t *testing.T) {
	dir, _ := rolledWithBucket(t, 2)
	for _, cmd := range []string{"upload", "retention"} {
		res := run(t, "", cmd, "--data-dir", dir, "--bucket", "")
		if res.code != ExitUsage || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, "--bucket") || res.stdout != "" {
			t.Errorf("%s --bucket '': exit %d, stdout %q, stderr %q; want exit 2 with one line naming --bucket", cmd, res.code, res.stdout, res.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bucket")); !os.IsNotExist(err) {
		t.Fatalf("default bucket written: %v", err)
	}
}
