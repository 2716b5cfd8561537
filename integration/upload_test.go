package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/testkit/gobin"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// localLog writes a data dir with one remote-enabled topic of parts
// partitions, each with segs rolled segments of about segBytes and an
// active one, and returns it open.
func localLog(t testing.TB, dir string, parts, segs int, segBytes int) *localtier.LogDir {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("events", parts, map[string]string{"remote.storage.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	appendSegments(t, d, parts, segs, segBytes)
	return d
}

// appendSegments rolls the active segment of each partition after about
// segBytes, segs times, and leaves a small active segment.
func appendSegments(t testing.TB, d *localtier.LogDir, parts, segs int, segBytes int) {
	t.Helper()
	var e record.Encoder
	rng := rand.New(rand.NewPCG(7, uint64(parts)))
	value := make([]byte, 900)
	for p := 0; p < parts; p++ {
		l, err := d.Partition("events", int32(p))
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s <= segs; s++ {
			for written := 0; s < segs && written < segBytes || s == segs && written == 0; {
				recs := make([]record.Record, 16)
				for i := range recs {
					for j := range value {
						value[j] = byte('a' + rng.IntN(26))
					}
					recs[i] = record.Record{Offset: int64(i), Timestamp: time.Now().UnixMilli(), Key: []byte(strconv.Itoa(rng.IntN(1000))), Value: append([]byte(nil), value...)}
				}
				b, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Append(b); err != nil {
					t.Fatal(err)
				}
				written += len(b)
			}
			if s < segs {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}

// minioGet reads an object with minio-go, the independent client.
func minioGet(t testing.TB, c *minio.Client, bucket, key string) ([]byte, error) {
	t.Helper()
	obj, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// checkWithMinio reads a partition's manifest and every object it references
// with minio-go and checks them: the manifest validates; its segments follow
// one another without gap or overlap; each object has its size and
// checksum; when complete, the segments are exactly the local rolled ones,
// byte for byte, and every offset's batch read from the remote .log equals
// the local log's. It returns the committed keys (with the manifest's).
func checkWithMinio(t testing.TB, c *minio.Client, bucket, prefix string, l *localtier.Log, topic string, p int32, complete bool) map[string]bool {
	t.Helper()
	key := lineageManifestKey(t, minioGetter(t, c, bucket), prefix, topic, p)
	live := map[string]bool{}
	if tk, err := manifest.TopicKey(prefix, topic); err == nil {
		if data, err := minioGetter(t, c, bucket)(tk); err == nil && data != nil {
			live[tk] = true // the topic object naming the lineage: not garbage
		}
	}
	data, err := minioGet(t, c, bucket, key)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" && !complete {
			return live
		}
		t.Fatalf("get manifest %s: %v", key, err)
	}
	live[key] = true
	m, err := manifest.DecodeRoot(key, data)
	if err != nil {
		t.Fatal(err)
	}
	resolver := manifest.ResolverFunc(func(ctx context.Context, k string, size int64) ([]byte, error) {
		return minioGet(t, c, bucket, k)
	})
	refs, err := m.ReferencedKeys(context.Background(), resolver)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range refs {
		live[k] = true
	}
	local := map[int64]localtier.SegmentInfo{}
	segs := l.Segments()
	for _, s := range segs {
		local[s.BaseOffset] = s
	}
	var prev *manifest.Segment
	n := 0
	err = m.Walk(context.Background(), resolver, func(s manifest.Segment) error {
		n++
		if prev != nil && s.BaseOffset != prev.LastOffset+1 {
			return fmt.Errorf("segment %d follows one ending at %d", s.BaseOffset, prev.LastOffset)
		}
		prev = &s
		// Each object once; an index that is a section of the indexes
		// object is checked on its bytes, and the object must hold
		// exactly its sections.
		objects := map[string][]byte{}
		for _, o := range s.Objects() {
			data, ok := objects[o.Key]
			if !ok {
				var err error
				if data, err = minioGet(t, c, bucket, o.Key); err != nil {
					return fmt.Errorf("object %s: %w", o.Key, err)
				}
				objects[o.Key] = data
			}
			if o.Offset+o.Size > int64(len(data)) {
				return fmt.Errorf("object %s: %d bytes, the manifest has [%d, %d)", o.Key, len(data), o.Offset, o.Offset+o.Size)
			}
			if !o.Section() && int64(len(data)) != o.Size {
				return fmt.Errorf("object %s: %d bytes, the manifest says %d", o.Key, len(data), o.Size)
			}
			if sum, _ := manifest.ChecksumOf(manifest.CRC32C, data[o.Offset:o.Offset+o.Size]); sum != o.Checksum {
				return fmt.Errorf("object %s [%d, %d) does not match the manifest's checksum", o.Key, o.Offset, o.Offset+o.Size)
			}
		}
		if key, size, ok := s.IndexesObject(); ok && int64(len(objects[key])) != size {
			return fmt.Errorf("indexes object %s: %d bytes, its sections add up to %d", key, len(objects[key]), size)
		}
		ls, ok := local[s.BaseOffset]
		if !ok || ls.NextOffset != s.NextOffset() {
			return fmt.Errorf("segment [%d, %d] is not a local segment", s.BaseOffset, s.LastOffset)
		}
		remote := objects[s.Log.Key] // checked against the manifest above
		want, err := os.ReadFile(ls.Path)
		if err != nil {
			return err
		}
		if !bytes.Equal(remote, want[:ls.Size]) {
			return fmt.Errorf("segment %d: remote .log differs from the local file", s.BaseOffset)
		}
		if !complete {
			return nil // a check between kills: objects and order only
		}
		// Every offset: the batch holding it, from the remote bytes, is
		// the local log's.
		it := record.NewIter(remote)
		it.Verify = true
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			for off := b.BaseOffset(); off <= b.LastOffset(); off++ {
				lr, err := l.Read(off, 1, true)
				if err != nil {
					return err
				}
				if !bytes.Equal(lr.Data[:len(b)], b) {
					return fmt.Errorf("offset %d differs", off)
				}
			}
		}
		if it.Err() != nil || it.Truncated() {
			return fmt.Errorf("segment %d: %v", s.BaseOffset, it.Err())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s-%d: %v", topic, p, err)
	}
	if complete {
		if want := len(segs) - 1; n != want || m.NextOffset() != segs[len(segs)-1].BaseOffset {
			t.Fatalf("%s-%d: %d segments committed up to %d, want %d up to %d", topic, p, n, m.NextOffset(), want, segs[len(segs)-1].BaseOffset)
		}
	}
	return live
}

// bucketKeys lists the bucket with minio-go.
func bucketKeys(t testing.TB, c *minio.Client, bucket string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for o := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out[o.Key] = true
	}
	return out
}

func openS3(t testing.TB, srv *testminio.Server, bucket string) objstore.Bucket {
	t.Helper()
	b, err := objstore.Open(context.Background(), srv.URL(bucket, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// collectAll garbage-collects as if the grace period had passed.
func collectAll(t testing.TB, b objstore.Bucket) {
	t.Helper()
	if _, err := remotetier.GC(context.Background(), b, remotetier.GCOptions{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}); err != nil {
		t.Fatal(err)
	}
}

// cancelAfterCommits cancels a context after n root manifests were written.
type cancelAfterCommits struct {
	objstore.Bucket
	mu     sync.Mutex
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfterCommits) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	a, err := c.Bucket.Put(ctx, key, r, size, cond)
	if err == nil && strings.HasSuffix(key, "manifest.json") {
		c.mu.Lock()
		c.n--
		if c.n == 0 {
			c.cancel()
		}
		c.mu.Unlock()
	}
	return a, err
}

// TestUploadMinIO: upload to a real MinIO; stop the uploader after its first
// commit (a restart mid-run); a new one completes; two more race on the
// same partitions; minio-go then finds every segment byte for byte, every
// offset readable, no gap, no duplicate, and after garbage collection no
// object that no manifest references.
func TestUploadMinIO(t *testing.T) {
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	bucket := srv.NewBucket(t)
	b := openS3(t, srv, bucket)
	d := localLog(t, t.TempDir(), 2, 6, 256<<10)
	defer d.Close()
	src := remotetier.NewLocalSource(d, nil)

	ctx, cancel := context.WithCancel(context.Background())
	cb := &cancelAfterCommits{Bucket: b, n: 1, cancel: cancel}
	u, err := remotetier.NewUploader(cb, src, remotetier.Options{MaxCommitSegments: 2, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.RunOnce(ctx); err == nil {
		t.Log("the first pass finished before it was stopped")
	}
	cancel()
	// Restart: a new uploader with no state; then two racing ones.
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		u, err := remotetier.NewUploader(b, src, remotetier.Options{MaxCommitSegments: 1 + i, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := u.RunOnce(context.Background()); err != nil {
				t.Errorf("uploader %d: %v", i, err)
			}
		}()
		if i == 0 {
			wg.Wait()
		}
	}
	wg.Wait()
	collectAll(t, b)
	live := map[string]bool{}
	for p := int32(0); p < 2; p++ {
		l, _ := d.Partition("events", p)
		for k := range checkWithMinio(t, srv.Client(), bucket, "", l, "events", p, true) {
			live[k] = true
		}
	}
	keys := bucketKeys(t, srv.Client(), bucket)
	for k := range keys {
		if !live[k] {
			t.Errorf("unreferenced object left: %s", k)
		}
	}
	if len(keys) != len(live) {
		t.Fatalf("%d objects, %d referenced", len(keys), len(live))
	}
}

// TestUploadMinIOOutage stops MinIO while the uploader runs and starts it
// again: the uploads resume and complete.
func TestUploadMinIOOutage(t *testing.T) {
	srv := testminio.Start(t)
	testminio.SetCredentialsEnv(t)
	bucket := srv.NewBucket(t)
	b := openS3(t, srv, bucket)
	d := localLog(t, t.TempDir(), 1, 12, 256<<10)
	defer d.Close()
	l, _ := d.Partition("events", 0)
	segs := l.Segments()
	want := segs[len(segs)-1].BaseOffset
	u, err := remotetier.NewUploader(b, remotetier.NewLocalSource(d, nil), remotetier.Options{
		MaxCommitSegments: 1, Concurrency: 1, BytesPerSecond: 1 << 20, Interval: 100 * time.Millisecond,
		Retry: remotetier.Retry{Attempts: 3, Base: 50 * time.Millisecond, Max: 200 * time.Millisecond}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	store := func() int64 {
		data, err := minioGet(t, srv.Client(), bucket, mustKey(t, srv.Client(), bucket, "events", 0))
		if err != nil {
			return -1
		}
		m, err := manifest.DecodeRoot(mustKey(t, srv.Client(), bucket, "events", 0), data)
		if err != nil {
			t.Fatal(err)
		}
		return m.NextOffset()
	}
	waitFor(t, 60*time.Second, func() bool { n := store(); return n > 0 && n < want })
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, func() bool { return store() == want })
	checkWithMinio(t, srv.Client(), bucket, "", l, "events", 0, true)
}

// mustKey is the root manifest key of topic's partition p in the lineage
// bucket serves (lineageManifestKey).
func mustKey(t testing.TB, c *minio.Client, bucket, topic string, p int32) string {
	t.Helper()
	return lineageManifestKey(t, minioGetter(t, c, bucket), "", topic, p)
}

// lineageManifestKey is the root manifest key of topic's partition p in the
// lineage the bucket serves: its topic object's current one (the topic ID
// tiered's data dir gave the topic at creation), or the name-only one while
// the bucket has no topic object. get returns nil, nil for a missing key.
func lineageManifestKey(t testing.TB, get func(key string) ([]byte, error), prefix, topic string, p int32) string {
	t.Helper()
	tk, err := manifest.TopicKey(prefix, topic)
	if err != nil {
		t.Fatal(err)
	}
	data, err := get(tk)
	if err != nil {
		t.Fatalf("get topic object %s: %v", tk, err)
	}
	keyID := ""
	if data != nil {
		s, err := manifest.DecodeTopic(tk, data)
		if err != nil {
			t.Fatal(err)
		}
		if s.Current != nil {
			keyID = s.Current.KeyID()
		}
	}
	k, err := manifest.ManifestKeyID(prefix, topic, keyID, p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// minioGetter reads keys of bucket with minio-go for lineageManifestKey.
func minioGetter(t testing.TB, c *minio.Client, bucket string) func(string) ([]byte, error) {
	return func(key string) ([]byte, error) {
		data, err := minioGet(t, c, bucket, key)
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, nil
		}
		return data, err
	}
}

// storeManifestKey is lineageManifestKey through tiered's own reader
// (remotelog.ResolveTopic), for tests that read the bucket with it.
func storeManifestKey(t testing.TB, b objstore.BucketReader, topic string, p int32) string {
	t.Helper()
	keyID, _, err := remotelog.ResolveTopic(context.Background(), b, "", topic)
	if err != nil {
		t.Fatal(err)
	}
	k, err := manifest.ManifestKeyID("", topic, keyID, p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func waitFor(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tieredBin is the tiered binary, built once per test binary.
var tieredBin gobin.Binary

func tiered(t testing.TB) string {
	t.Helper()
	return tieredBin.Path(t, "../cmd/tiered")
}

func killRuns() int {
	if v, err := strconv.Atoi(os.Getenv("TIERED_KILL_RUNS")); err == nil && v > 0 {
		return v
	}
	return 20
}

// TestKillUploader kills real `tiered upload` and `tiered sidecar`
// processes with SIGKILL at random points (TIERED_KILL_RUNS times, default
// 20). After every kill the manifests minio-go reads are consistent and
// every committed segment is whole; at the end one more run completes the
// upload and garbage collection leaves no orphan.
func TestKillUploader(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kill -9 test needs Linux")
	}
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	bin := tiered(t)
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	d := localLog(t, dataDir, 2, 4, 256<<10)
	// The same data dir doubles as a broker log dir for the sidecar: give it
	// a replication-offset-checkpoint (the high watermarks).
	activeBase := map[int32]int64{}
	setHWs := func(d *localtier.LogDir) {
		hws := map[checkpoint.TopicPartition]int64{}
		for p := int32(0); p < 2; p++ {
			l, _ := d.Partition("events", p)
			hws[checkpoint.TopicPartition{Topic: "events", Partition: p}] = l.LogEndOffset()
			segs := l.Segments()
			activeBase[p] = segs[len(segs)-1].BaseOffset
		}
		if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dataDir, checkpoint.ReplicationOffsetFile), hws); err != nil {
			t.Fatal(err)
		}
	}
	setHWs(d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// grow adds six rolled segments to each partition, so every run has
	// work to be killed in the middle of.
	grow := func() {
		d, _, err := localtier.OpenLogDir(vfs.Default, dataDir, localtier.LogDirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		appendSegments(t, d, 2, 6, 256<<10)
		setHWs(d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// check opens the data dir between runs (no process holds it then).
	check := func(bucket string, complete bool) map[string]bool {
		d, _, err := localtier.OpenLogDir(vfs.Default, dataDir, localtier.LogDirOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		live := map[string]bool{}
		for p := int32(0); p < 2; p++ {
			l, _ := d.Partition("events", p)
			for k := range checkWithMinio(t, srv.Client(), bucket, "", l, "events", p, complete) {
				live[k] = true
			}
		}
		return live
	}
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+testminio.AccessKey, "AWS_SECRET_ACCESS_KEY="+testminio.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true")
	// upload and sidecar runs use separate buckets.
	names := map[string]string{"upload": srv.NewBucket(t), "sidecar": srv.NewBucket(t)}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for i := 0; i < killRuns(); i++ {
		grow()
		sidecar := i%4 == 3
		bucket := names["upload"]
		if sidecar {
			bucket = names["sidecar"]
		}
		url := srv.URL(bucket, "")
		var cmd *exec.Cmd
		if sidecar {
			cmd = exec.Command(bin, "sidecar", "--kafka-log-dir", dataDir, "--bucket", url, "--interval", "100ms", "--rate", "4M", "--concurrency", "2")
		} else {
			cmd = exec.Command(bin, "upload", "--data-dir", dataDir, "--bucket", url, "--rate", "4M", "--concurrency", "2")
		}
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(1400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err == nil && !sidecar {
			t.Logf("run %d finished before the kill", i)
		}
		live := check(bucket, false)
		t.Logf("run %d (%s): killed; %d objects committed", i, map[bool]string{true: "sidecar", false: "upload"}[sidecar], len(live))
	}
	// Complete the upload, then collect garbage, then check everything.
	for kind, bucket := range names {
		b := openS3(t, srv, bucket)
		if kind == "sidecar" {
			// Run a sidecar until its manifests are complete, then SIGTERM.
			cmd := exec.Command(bin, "sidecar", "--kafka-log-dir", dataDir, "--bucket", srv.URL(bucket, ""), "--interval", "100ms")
			cmd.Env = env
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Signals are handled once it says it started.
			waitFor(t, 30*time.Second, func() bool { return strings.Contains(stderr.String(), "sidecar started") })
			waitFor(t, 60*time.Second, func() bool {
				for p := int32(0); p < 2; p++ {
					data, err := minioGet(t, srv.Client(), bucket, mustKey(t, srv.Client(), bucket, "events", p))
					if err != nil {
						return false
					}
					m, err := manifest.DecodeRoot(mustKey(t, srv.Client(), bucket, "events", p), data)
					if err != nil || m.NextOffset() != activeBase[p] {
						return false
					}
				}
				return true
			})
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("sidecar after SIGTERM: %v\n%s", err, stderr.String())
			}
		} else {
			cmd := exec.Command(bin, "upload", "--data-dir", dataDir, "--bucket", srv.URL(bucket, ""))
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("final upload: %v\n%s", err, out)
			}
		}
		collectAll(t, b)
		live := check(bucket, true)
		keys := bucketKeys(t, srv.Client(), bucket)
		for k := range keys {
			if !live[k] {
				t.Errorf("%s: orphan left after gc: %s", kind, k)
			}
		}
		if len(keys) != len(live) {
			t.Errorf("%s: %d objects, %d referenced", kind, len(keys), len(live))
		}
	}
	if !t.Failed() {
		// Both buckets ended with every record of both partitions checked.
		reliability.Record(t, "process crash: kill -9 of tiered upload / sidecar", killRuns(), int(2*(activeBase[0]+activeBase[1])), 0)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
