package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/faultproxy"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Object-store fault tests: tiered's S3 backend talks to MinIO through
// internal/faultproxy, which answers some requests with 500 InternalError
// or 503 SlowDown, resets connections, stalls past the client's response
// timeout, or cuts response bodies short with their Content-Length kept.
// About half the requests fail, so that failures get past the SDK's own
// three attempts to the callers' retries and the metrics.
// The faults are drawn from a seeded generator: TIERED_FAULT_SEEDS runs
// (default 2) use seeds 1, 2, ...

func faultSeeds() int {
	if v, err := strconv.Atoi(os.Getenv("TIERED_FAULT_SEEDS")); err == nil && v > 0 {
		return v
	}
	return 2
}

// faultRules is the mix every fault test injects. Stalls are limited to
// reads: a stalled upload body would block in the client's write, which no
// response timeout covers (the caller's context does).
func faultRules() []*faultproxy.Rule {
	reads := faultproxy.Methods(http.MethodGet, http.MethodHead)
	return []*faultproxy.Rule{
		// A burst first: the first 16 requests fail. No attempt succeeds
		// during it and at most four calls are in flight, so at least one
		// call spends all of the SDK's three attempts and the caller's own
		// retry and the metrics see the failure.
		{Kind: faultproxy.SlowDown, Max: 16},
		{Kind: faultproxy.InternalError, Probability: 0.15},
		{Kind: faultproxy.SlowDown, Probability: 0.15},
		{Kind: faultproxy.Reset, Probability: 0.08},
		{Match: reads, Kind: faultproxy.Stall, Probability: 0.03, Stall: time.Hour},
		{Match: faultproxy.Methods(http.MethodGet), Kind: faultproxy.Truncate, Probability: 0.15},
	}
}

// faultTimeout is the S3 client's response-header timeout in these tests:
// a stall outlasts it.
const faultTimeout = 400 * time.Millisecond

// startProxy puts a fault proxy in front of srv.
func startProxy(t testing.TB, srv *testminio.Server, seed uint64) *faultproxy.Proxy {
	t.Helper()
	loc, err := objstore.ParseURL(srv.URL("x", ""))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(loc.S3.Endpoint, faultproxy.Options{Seed: seed, Rules: faultRules()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// proxiedBucket opens bucket as an s3:// URL whose endpoint is the proxy,
// with the objstore metrics in reg.
func proxiedBucket(t testing.TB, srv *testminio.Server, bucket string, p *faultproxy.Proxy, reg prometheus.Registerer) objstore.Bucket {
	t.Helper()
	loc, err := objstore.ParseURL(srv.URL(bucket, ""))
	if err != nil {
		t.Fatal(err)
	}
	loc.S3.Endpoint = p.URL()
	loc.S3.ResponseHeaderTimeout = faultTimeout
	var b objstore.Bucket
	// Opening checks the bucket (HeadBucket), which may meet a fault too.
	p.SetEnabled(false)
	b, err = loc.Open(context.Background())
	p.SetEnabled(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return objstore.WithMetrics(b, reg)
}

func gatherCounter(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestFaultProxyUpload: the uploader copies two partitions to MinIO over
// s3:// through the fault proxy. Passes are repeated until nothing lags,
// within a bound; then, with faults off, VerifyBucket is clean and minio-go
// finds every segment byte for byte and every offset's batch equal to the
// local log's. Failures were counted in tiered_objstore_operation_failures_total.
func TestFaultProxyUpload(t *testing.T) {
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	const maxPasses = 12
	runs, checked := 0, 0
	for seed := uint64(1); seed <= uint64(faultSeeds()); seed++ {
		bucket := srv.NewBucket(t)
		proxy := startProxy(t, srv, seed)
		reg := prometheus.NewRegistry()
		b := proxiedBucket(t, srv, bucket, proxy, reg)
		d := localLog(t, t.TempDir(), 2, 5, 200<<10)
		u, err := remotetier.NewUploader(b, remotetier.NewLocalSource(d, nil), remotetier.Options{
			MaxCommitSegments: 2, Concurrency: 2,
			Retry:      remotetier.Retry{Attempts: 8, Base: 10 * time.Millisecond, Max: 200 * time.Millisecond},
			Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		passes := 0
		for {
			passes++
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			rep, err := u.RunOnce(ctx)
			cancel()
			if err == nil && rep.LagSegments == 0 {
				break
			}
			if passes >= maxPasses {
				t.Fatalf("seed %d: upload not complete after %d passes: lag %d, err %v (faults %v)", seed, passes, rep.LagSegments, err, proxy.Counts())
			}
			t.Logf("seed %d: pass %d: lag %d segments, err %v", seed, passes, rep.LagSegments, err)
		}
		proxy.SetEnabled(false)
		vr, err := remotetier.VerifyBucket(context.Background(), b, remotetier.DefaultVerifyOptions())
		if err != nil || !vr.OK() {
			t.Fatalf("seed %d: verify after faulty uploads: %v %+v", seed, err, vr)
		}
		for p := int32(0); p < 2; p++ {
			l, _ := d.Partition("events", p)
			checkWithMinio(t, srv.Client(), bucket, "", l, "events", p, true)
			segs := l.Segments()
			checked += int(segs[len(segs)-1].BaseOffset - l.LogStartOffset())
		}
		failures := gatherCounter(t, reg, "tiered_objstore_operation_failures_total")
		t.Logf("seed %d: %d passes; %d requests, injected %v; objstore failures counted %v", seed, passes, proxy.Requests(), proxy.Counts(), failures)
		if proxy.InjectedTotal() == 0 || failures == 0 {
			t.Fatalf("seed %d: no fault reached the uploader (injected %v, failures %v)", seed, proxy.Counts(), failures)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		runs++
	}
	reliability.Record(t, "object store: upload through 500/503/reset/stall/truncate faults", runs, checked, 0)
}

// expectedBatches indexes the batches of concatenated .log bytes by base
// offset.
func expectedBatches(t testing.TB, logBytes []byte) (map[int64][]byte, int64) {
	t.Helper()
	out := map[int64][]byte{}
	it := record.NewIter(logBytes)
	it.Verify = true
	var end int64
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		out[b.BaseOffset()] = b
		end = b.NextOffset()
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out, end
}

// matchBatches checks every batch of data against the expected ones and
// returns the records they hold and the offset after the last. A batch
// that differs is wrong data served: the test fails.
func matchBatches(t testing.TB, what string, data []byte, want map[int64][]byte) (records int, next int64) {
	t.Helper()
	it := record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		w, ok := want[b.BaseOffset()]
		if !ok || !bytes.Equal(b, w) {
			t.Fatalf("%s: WRONG DATA served for the batch at offset %d (%d bytes)", what, b.BaseOffset(), len(b))
		}
		records += int(b.LastOffset() - b.BaseOffset() + 1)
		next = b.NextOffset()
	}
	if it.Err() != nil || it.Truncated() || len(data) == 0 {
		t.Fatalf("%s: %d bytes are not whole batches: %v", what, len(data), it.Err())
	}
	return records, next
}

// corruptClass reports the errors that claim stored data is corrupt.
func corruptClass(err error) bool {
	var coe *remotelog.CorruptObjectError
	var cie *index.CorruptIndexError
	var cme *manifest.CorruptManifestError
	return record.IsCorrupt(err) || errors.As(err, &coe) || errors.As(err, &cie) || errors.As(err, &cme)
}

// faultCold uploads two partitions of several segments and returns them.
func faultCold(t testing.TB) *coldData {
	return buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "events", 2, nil)
		appendSegments(t, d, 2, 3, 200<<10)
	})
}

// TestFaultProxyReads reads healthy uploaded partitions through the fault
// proxy three ways — remotelog.RemoteLog directly on the S3 backend, the
// fetch service's HTTP API, and a franz-go consumer of its Kafka listener —
// retrying failed reads. Every byte served must be the uploaded one (a
// truncated body is an error, never short or wrong data), no healthy
// object may be reported corrupt, every read completes within a bounded
// number of retries, and the failures are counted in the metrics.
func TestFaultProxyReads(t *testing.T) {
	cd := faultCold(t)
	runs, checked := 0, 0
	for seed := uint64(1); seed <= uint64(faultSeeds()); seed++ {
		proxy := startProxy(t, cd.srv, 100+seed)
		reg := prometheus.NewRegistry()
		pb := proxiedBucket(t, cd.srv, cd.bucket, proxy, reg)
		ctx := context.Background()
		const maxFailures = 300

		// 1. RemoteLog straight on the S3 backend.
		for p := int32(0); p < 2; p++ {
			name := fmt.Sprintf("events-%d", p)
			want, end := expectedBatches(t, cd.logBytes[name])
			failures := 0
			fail := func(what string, err error) {
				failures++
				if corruptClass(err) {
					t.Fatalf("seed %d %s: %s: a healthy object reported corrupt: %v", seed, name, what, err)
				}
				if failures > maxFailures {
					t.Fatalf("seed %d %s: %d failed reads: no recovery (last: %v)", seed, name, failures, err)
				}
			}
			var rl *remotelog.RemoteLog
			for rl == nil {
				var err error
				if rl, err = remotelog.OpenRemoteLog(ctx, pb, "", "events", p, remotelog.ReaderOptions{}); err != nil {
					fail("open", err)
				}
			}
			for off := int64(0); off < end; {
				res, err := rl.Read(ctx, off, 48<<10)
				if err != nil {
					fail(fmt.Sprintf("read at %d", off), err)
					continue
				}
				n, next := matchBatches(t, fmt.Sprintf("seed %d RemoteLog %s at %d", seed, name, off), res.Data, want)
				checked += n
				off = next
			}
			t.Logf("seed %d: RemoteLog read %s with %d failed attempts", seed, name, failures)
		}

		// 2. The fetch service over the same faulty bucket.
		fs := startFetch(t, pb, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
		rc := newRawClient(fs.httpURL)
		for p := int32(0); p < 2; p++ {
			name := fmt.Sprintf("events-%d", p)
			want, end := expectedBatches(t, cd.logBytes[name])
			failures := 0
			for off := int64(0); off < end; {
				data, err := rc.read(ctx, "events", p, off, 48<<10, nil)
				if err != nil {
					failures++
					var te *errThrottled
					if !errors.As(err, &te) && !strings.Contains(err.Error(), " 500 ") {
						t.Fatalf("seed %d HTTP %s at %d: %v", seed, name, off, err)
					}
					if strings.Contains(err.Error(), fetchcache.CodeCorruptMessage) {
						t.Fatalf("seed %d HTTP %s at %d: a healthy object reported corrupt: %v", seed, name, off, err)
					}
					if failures > maxFailures {
						t.Fatalf("seed %d HTTP %s: %d failed reads: no recovery (last: %v)", seed, name, failures, err)
					}
					continue
				}
				n, next := matchBatches(t, fmt.Sprintf("seed %d HTTP %s at %d", seed, name, off), data, want)
				checked += n
				off = next
			}
			t.Logf("seed %d: HTTP read %s with %d failed attempts", seed, name, failures)
		}
		rc.close()

		// 3. A franz-go consumer: it retries KAFKA_STORAGE_ERROR itself.
		for p := int32(0); p < 2; p++ {
			name := fmt.Sprintf("events-%d", p)
			want, end := expectedBatches(t, cd.logBytes[name])
			checked += consumeMatching(t, fs.kafkaAddr, "events", p, want, end)
		}
		rc.close()
		fs.stop()

		failures := gatherCounter(t, reg, "tiered_objstore_operation_failures_total")
		served := fs.counter(t, "tiered_fetch_requests_total")
		corrupt := fs.counter(t, "tiered_fetch_corrupt_objects_total")
		t.Logf("seed %d: %d requests, injected %v; objstore failures %v; fetch requests %v, corrupt %v",
			seed, proxy.Requests(), proxy.Counts(), failures, served, corrupt)
		if proxy.Injected(faultproxy.Truncate) == 0 || failures == 0 {
			t.Fatalf("seed %d: faults did not reach the readers: injected %v, failures counted %v", seed, proxy.Counts(), failures)
		}
		if corrupt != 0 {
			t.Fatalf("seed %d: %v healthy reads counted as corrupt", seed, corrupt)
		}
		runs++
	}
	reliability.Record(t, "object store: reads (RemoteLog, HTTP, Kafka) through 500/503/reset/stall/truncate faults", runs, checked, 0)
}

// consumeMatching reads topic-partition p from the start to end with a
// franz-go consumer, tolerating retriable errors, and checks every record
// against the expected batches. It returns the records checked.
func consumeMatching(t testing.TB, addr, topic string, p int32, want map[int64][]byte, end int64) int {
	t.Helper()
	expect := map[int64][]byte{}
	var dec record.Decoder
	for _, b := range want {
		recs, err := dec.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			expect[r.Offset] = append([]byte(nil), r.Value...)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	next, n, errs := int64(0), 0, 0
	for next < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafka %s-%d: consumed up to %d of %d before the deadline (%d fetch errors)", topic, p, next, end, errs)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			errs++
			if errs > 300 {
				t.Fatalf("kafka %s-%d: %d fetch errors (last %v)", topic, p, errs, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("kafka %s-%d: offset %d after %d", topic, p, r.Offset, next-1)
			}
			if w, ok := expect[r.Offset]; !ok || !bytes.Equal(w, r.Value) {
				t.Fatalf("kafka %s-%d: WRONG DATA at offset %d", topic, p, r.Offset)
			}
			next++
			n++
		})
	}
	return n
}

// TestReadsAcrossMinIORestart reads a partition through the fetch service
// (HTTP) while its own MinIO is restarted in the middle: reads during the
// outage fail with 5xx, never wrong data, and the reader then finishes with
// every byte.
func TestReadsAcrossMinIORestart(t *testing.T) {
	srv := testminio.Start(t)
	testminio.SetCredentialsEnv(t)
	bucket := srv.NewBucket(t)
	store := openS3(t, srv, bucket)
	dir := filepath.Join(t.TempDir(), "data")
	d := localLog(t, dir, 1, 6, 200<<10)
	l, _ := d.Partition("events", 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	u, err := remotetier.NewUploader(store, remotetier.NewLocalSource(d, nil), remotetier.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := u.RunOnce(context.Background()); err != nil || rep.LagSegments != 0 {
		t.Fatalf("upload: %v, lag %d", err, rep.LagSegments)
	}
	var logBytes []byte
	for _, s := range l.Segments() {
		if !s.Active {
			data, err := os.ReadFile(s.Path)
			if err != nil {
				t.Fatal(err)
			}
			logBytes = append(logBytes, data...)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	want, end := expectedBatches(t, logBytes)

	// A small cache and read size, so the read keeps going to MinIO.
	fs := startFetch(t, store, chunkcache.CacheOptions{MemoryBytes: 256 << 10, ChunkBytes: 64 << 10}, kafkasrv.KafkaOptions{})
	rc := newRawClient(fs.httpURL)
	defer rc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// A third of the way in, MinIO is killed; after a few failed reads it
	// is started again on the same data.
	killed, restarted := false, false
	checked, failures, outageFailures := 0, 0, 0
	for off := int64(0); off < end; {
		if !killed && off >= end/3 {
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		data, err := rc.read(ctx, "events", 0, off, 16<<10, nil)
		if err != nil {
			failures++
			if ctx.Err() != nil || strings.Contains(err.Error(), fetchcache.CodeCorruptMessage) {
				t.Fatalf("read at %d: %v", off, err)
			}
			if killed && !restarted {
				if outageFailures++; outageFailures >= 3 {
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
					restarted = true
				}
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		n, next := matchBatches(t, fmt.Sprintf("read at %d", off), data, want)
		checked += n
		off = next
	}
	if !restarted {
		t.Fatalf("the reads never saw the outage (killed %v, %d failures)", killed, failures)
	}
	t.Logf("read %d records across a MinIO kill and restart with %d failed requests", checked, failures)
	reliability.Record(t, "object store: MinIO restart during fetch-service reads", 1, checked, 0)
}
