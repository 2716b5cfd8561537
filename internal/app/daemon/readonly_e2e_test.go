package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// nobody runs a process as uid/gid 65534.
var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

// traversable makes dir and its parent (t.TempDir's per-test directory,
// 0700) reachable by other users, and returns dir.
func traversable(t *testing.T, dir string) string {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// treeOf lists every path under dir with its mode.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %v %d", rel, info.Mode(), info.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// uploadFixture produces 240 records in 6 batches to topic "ro" of a data
// dir with tiny segments, uploads the rolled ones (200 records) to the
// bucket at url, and returns what consume --bucket reads from it.
func uploadFixture(t *testing.T, bin, url string) []e2eRec {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	mustCmd(t, bin, "", "topic", "create", "--data-dir", data, "--topic", "ro",
		"--config", "remote.storage.enable=true", "--config", "internal.segment.bytes=2048")
	var all []e2eRec
	for batch := range 6 {
		var in strings.Builder
		for i := range 40 {
			n := batch*40 + i
			r := e2eRec{Offset: int64(n), Key: fmt.Sprintf("k%d", n%7), Value: fmt.Sprintf("value %d %s", n, strings.Repeat("v", n%40))}
			fmt.Fprintf(&in, "{\"key\":%q,\"value\":%q}\n", r.Key, r.Value)
			all = append(all, r)
		}
		mustCmd(t, bin, in.String(), "produce", "--data-dir", data, "--topic", "ro", "--partition", "0")
	}
	mustCmd(t, bin, "", "upload", "--data-dir", data, "--bucket", url)
	want := parseLines(t, mustCmd(t, bin, "", "consume", "--bucket", url, "--topic", "ro", "--partition", "0"))
	if len(want) < 100 || len(want) >= len(all) {
		t.Fatalf("fixture: the bucket holds %d of %d records, want the rolled segments only", len(want), len(all))
	}
	sameE2E(t, "fixture", want, all[:len(want)])
	return want
}

// fileBucketFixture is uploadFixture on a file:// bucket that it then makes
// read-only: every file 0444, every directory 0555, and no lock file or
// temporary directory (what a read-write open leaves behind: readers must
// not need them).
func fileBucketFixture(t *testing.T, bin string) (bucketDir string, want []e2eRec) {
	t.Helper()
	bucketDir = filepath.Join(traversable(t, t.TempDir()), "bucket")
	if err := os.Mkdir(bucketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	want = uploadFixture(t, bin, "file://"+bucketDir)
	for _, p := range []string{".tiered-tmp", ".tiered-lock"} {
		if err := os.RemoveAll(filepath.Join(bucketDir, p)); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.Walk(bucketDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.Chmod(p, 0o555)
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(bucketDir, 0o755) })
	return bucketDir, want
}

// readersWork runs consume --bucket, bucket verify, inspect manifest and
// fetch (Kafka and HTTP reads) on url with the process attributes attr
// and requires each to read want.
func readersWork(t *testing.T, bin string, attr *syscall.SysProcAttr, url string, want []e2eRec) {
	t.Helper()
	t.Run("consume", func(t *testing.T) {
		code, out, errs := runCmdAs(t, attr, bin, "", "consume", "--bucket", url, "--topic", "ro", "--partition", "0")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		sameE2E(t, "consume --bucket", parseLines(t, out), want)
	})
	t.Run("bucket_verify", func(t *testing.T) {
		code, out, errs := runCmdAs(t, attr, bin, "", "bucket", "verify", "--bucket", url)
		if code != 0 || !strings.Contains(out, "ok: 1 partition") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	t.Run("inspect_manifest", func(t *testing.T) {
		code, out, errs := runCmdAs(t, attr, bin, "", "inspect", "manifest", "--bucket", url, "--topic", "ro", "--partition", "0", "--all")
		if code != 0 || !strings.Contains(out, "manifest ") || !strings.Contains(out, fmt.Sprintf("nextOffset %d", len(want))) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	t.Run("fetch", func(t *testing.T) {
		f := startProcAs(t, attr, bin, nil, "fetch", "--bucket", url)
		sameE2E(t, "fetch kafka", kafkaRecords(t, f.kafka, "ro", len(want)), want)
		resp, err := http.Get(f.url() + "/v1/topics/ro/partitions/0/records?offset=7")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := parseLines(t, string(body)); resp.StatusCode != 200 || len(got) == 0 || got[0] != want[7] {
			t.Fatalf("HTTP records: %d %s", resp.StatusCode, body)
		}
		f.stop()
	})
}

// TestReadOnlyFileBucketAsUnprivilegedUser runs fetch (HTTP and Kafka
// reads), consume --bucket, bucket verify and inspect manifest as uid
// 65534 on a file:// bucket that user may only read. The test runs as root,
// for whom permissions mean nothing, hence the other user. Nothing in the
// bucket changes.
func TestReadOnlyFileBucketAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run tiered as uid 65534 (as a normal user the other tests' buckets are writable by their reader)")
	}
	bin := tieredBin(t)
	traversable(t, filepath.Dir(bin))
	bucketDir, want := fileBucketFixture(t, bin)
	url := "file://" + bucketDir
	before := treeOf(t, bucketDir)

	// The user really cannot write there.
	if code, _, _ := runCmdAs(t, nobody, "/bin/sh", "", "-c", `: > "$1"`, "sh", filepath.Join(bucketDir, "probe")); code == 0 {
		t.Fatal("uid 65534 could create a file in the bucket: the test would prove nothing")
	}

	readersWork(t, bin, nobody, url, want)
	if after := treeOf(t, bucketDir); !slices.Equal(before, after) {
		t.Errorf("the readers changed the bucket:\nbefore %q\nafter  %q", before, after)
	}
}

// TestReadOnlyS3Credentials reads a MinIO bucket with temporary credentials
// from STS AssumeRole whose inline session policy allows only reading:
// every write with them is refused, and fetch (Kafka and HTTP),
// consume --bucket, bucket verify and inspect manifest all work.
func TestReadOnlyS3Credentials(t *testing.T) {
	bin := tieredBin(t)
	srv := testminio.Shared(t)
	bucket := srv.NewBucket(t)
	url := srv.URL(bucket, "ro-creds")
	testminio.SetCredentialsEnv(t)
	want := uploadFixture(t, bin, url)

	access, secret, token := srv.ReadOnlyCredentials(t, bucket)
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", token)

	// The credentials really cannot write: tiered's own S3 client (opened
	// read-write) gets AccessDenied for a Put, minio-go for a PutObject and a
	// RemoveObject.
	ctx := context.Background()
	b, err := objstore.Open(ctx, url)
	if err != nil {
		t.Fatalf("open with read-only credentials: %v", err)
	}
	defer b.Close()
	if _, err := b.Put(ctx, "probe", strings.NewReader("x"), 1, objstore.Condition{}); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("Put with read-only credentials = %v, want AccessDenied", err)
	}
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{
		Creds: miniocreds.NewStaticV4(access, secret, token), Region: testminio.Region})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mc.PutObject(ctx, bucket, "probe", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	if minio.ToErrorResponse(err).Code != "AccessDenied" {
		t.Fatalf("minio-go PutObject with read-only credentials = %v, want AccessDenied", err)
	}
	if err := mc.RemoveObject(ctx, bucket, "ro-creds/"+anyKey(t, srv, bucket), minio.RemoveObjectOptions{}); minio.ToErrorResponse(err).Code != "AccessDenied" {
		t.Fatalf("minio-go RemoveObject with read-only credentials = %v, want AccessDenied", err)
	}
	before := objectsOf(t, srv, bucket)
	readersWork(t, bin, nil, url, want)
	if after := objectsOf(t, srv, bucket); !slices.Equal(before, after) {
		t.Errorf("the readers changed the bucket:\nbefore %q\nafter  %q", before, after)
	}
}

// objectsOf lists bucket's objects with their ETags and sizes.
func objectsOf(t *testing.T, srv *testminio.Server, bucket string) []string {
	t.Helper()
	var out []string
	for o := range srv.Client().ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out = append(out, fmt.Sprintf("%s %s %d", o.Key, o.ETag, o.Size))
	}
	return out
}

// anyKey is the key (below the URL's prefix) of some object in bucket.
func anyKey(t *testing.T, srv *testminio.Server, bucket string) string {
	t.Helper()
	objs := objectsOf(t, srv, bucket)
	if len(objs) == 0 {
		t.Fatal("empty bucket")
	}
	key, _, _ := strings.Cut(objs[0], " ")
	return strings.TrimPrefix(key, "ro-creds/")
}

// TestFetchFIFOInFileBucket replaces a committed segment's .log in a
// file:// bucket by a FIFO with no writer (opening it to read would block
// forever): fetch answers a read of it at once with an error, keeps
// serving, and exits 0 on SIGTERM.
func TestFetchFIFOInFileBucket(t *testing.T) {
	bin := tieredBin(t)
	bucketDir := filepath.Join(t.TempDir(), "bucket")
	if err := os.Mkdir(bucketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	url := "file://" + bucketDir
	want := uploadFixture(t, bin, url)
	// ro-0~<topic id>: serve and upload give topics IDs (the lineage's keys).
	logs, err := filepath.Glob(filepath.Join(bucketDir, "data", "*", "ro-0*", "*.log"))
	if err != nil || len(logs) < 2 {
		t.Fatalf("segment objects %q, %v", logs, err)
	}
	slices.Sort(logs)
	if err := os.Remove(logs[0]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(logs[0], 0o644); err != nil {
		t.Fatal(err)
	}
	key, _ := filepath.Rel(bucketDir, logs[0])
	f := startProc(t, bin, nil, "fetch", "--bucket", url)
	client := &http.Client{Timeout: 15 * time.Second}
	get := func(offset int64) (int, string) {
		t.Helper()
		resp, err := client.Get(fmt.Sprintf("%s/v1/topics/ro/partitions/0/records?offset=%d", f.url(), offset))
		if err != nil {
			// Unblock a hung open so the process can be stopped.
			if w, err := os.OpenFile(logs[0], os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("GET offset %d: %v", offset, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if code, body := get(0); code == http.StatusOK || !strings.Contains(body, "not a regular file") || !strings.Contains(body, filepath.ToSlash(key)) {
		t.Errorf("read of the FIFO segment: %d %s; want an error naming %s", code, body, key)
	}
	last := want[len(want)-1]
	if code, body := get(last.Offset); code != http.StatusOK || !strings.Contains(body, last.Value) {
		t.Errorf("read of a later segment after the FIFO: %d %s", code, body)
	}
	f.stop()
}
