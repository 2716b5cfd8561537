package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// ts0 is the timestamp of the first produced record.
const ts0 = int64(1_700_000_000_000)

// rec is a record as produced and as expected back.
type rec = testrecs.Rec

// genRecs makes n varied records: text and binary keys and values, null
// keys, empty values, values with newlines, headers (one with a null
// value), timestamps ts0, ts0+10, ...
func genRecs(n int, tag string) []rec {
	out := make([]rec, n)
	for i := range out {
		r := rec{Timestamp: ts0 + int64(i)*10}
		switch i % 7 {
		case 3:
			r.Key = nil
		case 5:
			r.Key = []byte{0xff, 0x00, '\n', byte(i)}
		default:
			r.Key = []byte(fmt.Sprintf("%s-key-%d", tag, i))
		}
		switch i % 11 {
		case 4:
			r.Value = []byte{}
		case 6:
			r.Value = []byte{0x80, 0x00, byte(i), '\n', 0xc3}
		default:
			r.Value = bytes.Repeat([]byte(fmt.Sprintf("%s value %d ", tag, i)), 1+i%9)
		}
		if i%4 == 1 {
			r.Headers = []record.Header{{Key: []byte("h1"), Value: []byte(strconv.Itoa(i))}, {Key: []byte("nullh")}}
		}
		out[i] = r
	}
	return out
}

// producer appends records to local partition logs in batches.
type producer struct {
	t   testing.TB
	enc record.Encoder
	// pid, when set, makes the batches that producer's transactional
	// ones (epoch 0), their sequences following on from seq.
	pid int64
	seq int32
}

// produce appends recs to l in batches of per records compressed with c and
// returns them with the offsets the log assigned.
func (p *producer) produce(l *localtier.Log, c codec.Codec, per int, recs []rec) []rec {
	p.t.Helper()
	out := append([]rec(nil), recs...)
	for start := 0; start < len(out); start += per {
		chunk := out[start:min(start+per, len(out))]
		rs := make([]record.Record, len(chunk))
		for i, r := range chunk {
			rs[i] = record.Record{Offset: int64(i), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
		}
		spec := record.NewBatchSpec(0, c)
		if p.pid != 0 {
			spec.Transactional, spec.ProducerID, spec.BaseSequence = true, p.pid, p.seq
			p.seq += int32(len(rs))
		}
		b, err := p.enc.AppendBatch(nil, spec, rs)
		if err != nil {
			p.t.Fatal(err)
		}
		info, err := l.Append(b)
		if err != nil {
			p.t.Fatal(err)
		}
		for i := range chunk {
			chunk[i].Offset = info.FirstOffset + int64(i)
		}
	}
	return out
}

// coldData is a data set uploaded to MinIO by the real uploader, whose
// local copy is deleted: every read of it is a cold read of the bucket.
type coldData struct {
	srv    *testminio.Server
	bucket string
	store  objstore.Bucket // tiered's S3 backend on the bucket
	// logBytes are the concatenated .log objects of each partition
	// ("topic-p"), in offset order: what a sequential raw read from the
	// log start must return.
	logBytes map[string][]byte
	// logKeys are the .log object keys of each partition, in offset order.
	logKeys map[string][]string
}

// buildCold opens a local data dir, lets fill create topics and produce,
// rolls every partition so that nothing stays in an active segment, uploads
// everything with remotetier's uploader, records what was uploaded, then
// closes and deletes the data dir.
func buildCold(t testing.TB, fill func(d *localtier.LogDir)) *coldData {
	t.Helper()
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	cd := &coldData{srv: srv, bucket: srv.NewBucket(t), logBytes: map[string][]byte{}, logKeys: map[string][]string{}}
	cd.store = openS3(t, srv, cd.bucket)
	dir := filepath.Join(t.TempDir(), "data")
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fill(d)
	type part struct {
		topic string
		p     int32
		l     *localtier.Log
	}
	var parts []part
	for _, topic := range d.Topics() {
		for p := int32(0); ; p++ {
			l, err := d.Partition(topic, p)
			if err != nil {
				break
			}
			if segs := l.Segments(); segs[len(segs)-1].Size > 0 {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
			parts = append(parts, part{topic, p, l})
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	u, err := remotetier.NewUploader(cd.store, remotetier.NewLocalSource(d, nil), remotetier.Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := u.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if rep.LagSegments != 0 || rep.UploadedSegments == 0 {
		t.Fatalf("upload left %d segments behind (%d uploaded)", rep.LagSegments, rep.UploadedSegments)
	}
	for _, p := range parts {
		name := fmt.Sprintf("%s-%d", p.topic, p.p)
		for _, s := range p.l.Segments() {
			if s.Active {
				continue
			}
			data, err := os.ReadFile(s.Path)
			if err != nil {
				t.Fatal(err)
			}
			cd.logBytes[name] = append(cd.logBytes[name], data...)
		}
		key := storeManifestKey(t, cd.store, p.topic, p.p)
		m, err := remotelog.LoadRoot(context.Background(), cd.store, key)
		if err != nil {
			t.Fatalf("manifest of %s: %v", name, err)
		}
		resolver := manifest.ResolverFunc(func(ctx context.Context, k string, size int64) ([]byte, error) {
			rc, err := cd.store.Get(ctx, k)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(rc)
		})
		if err := m.Walk(context.Background(), resolver, func(s manifest.Segment) error {
			cd.logKeys[name] = append(cd.logKeys[name], s.Log.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return cd
}

// countingBucket counts the range GETs that reach the store, per object
// range, and may delay each one.
type countingBucket struct {
	objstore.BucketReader
	delay time.Duration
	gets  atomic.Int64
	bytes atomic.Int64
	mu    sync.Mutex
	seen  map[string]int // "key@off+len" → GETs
}

func newCountingBucket(b objstore.BucketReader) *countingBucket {
	return &countingBucket{BucketReader: b, seen: map[string]int{}}
}

func (c *countingBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s@%d+%d", key, off, length)]++
	c.mu.Unlock()
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rc, err := c.BucketReader.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, n: &c.bytes}, nil
}

// repeated returns the ranges of keys accepted by match that were fetched
// more than once.
func (c *countingBucket) repeated(match func(string) bool) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.seen {
		if n > 1 && match(k) {
			out[k] = n
		}
	}
	return out
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// fetchService is an in-process fetch service (HTTP and Kafka) over a
// bucket, as `tiered fetch` wires it: remote catalog over the chunk cache.
type fetchService struct {
	cache     *chunkcache.CachingBucket
	reg       *prometheus.Registry
	httpURL   string
	kafkaAddr string
	stopOnce  sync.Once
	stopFn    func()
}

// stop shuts the service down and releases its cache (also done when the
// test ends).
func (fs *fetchService) stop() { fs.stopOnce.Do(fs.stopFn) }

// startFetch serves b until the test ends or stop is called.
func startFetch(t testing.TB, b objstore.BucketReader, co chunkcache.CacheOptions, ko kafkasrv.KafkaOptions) *fetchService {
	t.Helper()
	fs := &fetchService{reg: prometheus.NewRegistry()}
	co.Registerer = fs.reg
	var err error
	if fs.cache, err = chunkcache.NewCachingBucket(b, co); err != nil {
		t.Fatal(err)
	}
	cat, err := fetchcache.NewRemoteCatalog(fs.cache, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ko.MaxFetchWait == 0 {
		ko.MaxFetchWait = 100 * time.Millisecond
	}
	srv, err := server.Listen(server.ServerOptions{Catalog: cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Registerer: fs.reg, Gatherer: fs.reg, Kafka: ko})
	if err != nil {
		t.Fatal(err)
	}
	fs.httpURL = "http://" + srv.HTTPAddr().String()
	fs.kafkaAddr = srv.KafkaAddr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	fs.stopFn = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("fetch service: %v", err)
		}
		if err := fs.cache.Close(); err != nil {
			t.Errorf("close cache: %v", err)
		}
	}
	t.Cleanup(fs.stop)
	return fs
}

// counter sums a counter family of the service's registry.
func (fs *fetchService) counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := fs.reg.Gather()
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

// rawClient reads raw record batches over the HTTP API.
type rawClient struct {
	base string
	hc   *http.Client
}

func newRawClient(base string) *rawClient {
	return &rawClient{base: base, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}}
}

func (c *rawClient) close() { c.hc.CloseIdleConnections() }

// errThrottled is a 429 answer.
type errThrottled struct{ retryAfter time.Duration }

func (e *errThrottled) Error() string { return fmt.Sprintf("throttled, retry after %s", e.retryAfter) }

// read returns the raw batches from offset, appended to buf.
func (c *rawClient) read(ctx context.Context, topic string, p int32, offset int64, maxBytes int, buf []byte) ([]byte, error) {
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_bytes=%d", c.base, topic, p, offset, maxBytes)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return buf, err
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return buf, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		_, _ = io.Copy(io.Discard, resp.Body)
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if secs <= 0 {
			return buf, fmt.Errorf("429 without a positive Retry-After (%q)", resp.Header.Get("Retry-After"))
		}
		return buf, &errThrottled{retryAfter: time.Duration(secs) * time.Second}
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return buf, fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	w := bytes.NewBuffer(buf)
	_, err = w.ReadFrom(resp.Body)
	return w.Bytes(), err
}

// readAll reads a partition sequentially from offset to end through the
// HTTP API, max bytes per request, and returns the bytes and the number of
// throttled requests (waited out with a short pause, not Retry-After's
// whole seconds, so tests stay fast). sink, when set, receives the bytes
// instead of the result.
func (c *rawClient) readAll(ctx context.Context, topic string, p int32, from, end int64, maxBytes int, sink io.Writer) ([]byte, int, error) {
	var scratch []byte
	return c.readAllInto(ctx, &scratch, topic, p, from, end, maxBytes, sink)
}

// readAllInto is readAll reading each response into *scratch, left there
// for the next call: a client that reads on keeps its buffer, as the raw
// GETs it is compared with keep theirs (a buffer grown afresh on each
// read of a new process's heap faults its pages in, on a PVM guest more
// than the read of cached data costs).
func (c *rawClient) readAllInto(ctx context.Context, scratch *[]byte, topic string, p int32, from, end int64, maxBytes int, sink io.Writer) ([]byte, int, error) {
	var out []byte
	buf := *scratch
	defer func() { *scratch = buf[:0] }()
	throttled := 0
	for off := from; off < end; {
		var err error
		buf, err = c.read(ctx, topic, p, off, maxBytes, buf[:0])
		var te *errThrottled
		if errors.As(err, &te) {
			throttled++
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
				return out, throttled, ctx.Err()
			}
			continue
		}
		if err != nil {
			return out, throttled, err
		}
		next, whole, err := batchesEnd(buf)
		if err != nil {
			return out, throttled, fmt.Errorf("batches at %d: %w", off, err)
		}
		if next <= off {
			return out, throttled, fmt.Errorf("no progress at offset %d (%d bytes)", off, len(buf))
		}
		if sink != nil {
			if _, err := sink.Write(buf[:whole]); err != nil {
				return out, throttled, err
			}
		} else {
			out = append(out, buf[:whole]...)
		}
		off = next
	}
	return out, throttled, nil
}

// batchesEnd walks the headers of the whole batches at the start of buf
// (no CRC check: the consumer-side work of a raw GET, which checks none
// either) and returns the offset after the last one and its end position.
func batchesEnd(buf []byte) (next int64, end int, err error) {
	for len(buf)-end >= record.HeaderSize {
		b := record.Batch(buf[end:])
		n := int(b.Length()) + 12
		if n < record.HeaderSize {
			return 0, 0, fmt.Errorf("batch at %d: length %d", end, b.Length())
		}
		if end+n > len(buf) {
			break
		}
		next, end = record.Batch(buf[end:end+n]).NextOffset(), end+n
	}
	return next, end, nil
}

// kcatPath finds kcat (scripts/setup installs it). Missing kcat fails the
// test unless TIERED_SKIP_KCAT=1.
func kcatPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("TIERED_SKIP_KCAT") == "1" {
			t.Skip("kcat not installed and TIERED_SKIP_KCAT=1")
		}
		t.Fatalf("kcat not found (run scripts/setup, or set TIERED_SKIP_KCAT=1): %v", err)
	}
	return p
}

// kcatFormat prints each record so that binary keys and values parse back
// unambiguously: lengths first (-1 for null), then the bytes.
const kcatFormat = `%o %T %K %S|%k|%s` + "\n"

// parseKcat parses kcat output written with kcatFormat.
func parseKcat(out []byte) ([]rec, error) {
	var recs []rec
	for len(out) > 0 {
		var off, ts, kl, vl int64
		bar := bytes.IndexByte(out, '|')
		if bar < 0 {
			return nil, fmt.Errorf("record %d: no header in %.80q", len(recs), out)
		}
		if _, err := fmt.Sscanf(string(out[:bar]), "%d %d %d %d", &off, &ts, &kl, &vl); err != nil {
			return nil, fmt.Errorf("record %d: header %q: %w", len(recs), out[:bar], err)
		}
		out = out[bar+1:]
		r := rec{Offset: off, Timestamp: ts}
		take := func(n int64, sep byte) ([]byte, error) {
			if n < 0 {
				n = 0
			}
			if int64(len(out)) < n+1 || out[n] != sep {
				return nil, fmt.Errorf("record %d (offset %d): field of %d bytes not followed by %q", len(recs), off, n, sep)
			}
			b := out[:n:n]
			out = out[n+1:]
			return b, nil
		}
		var err error
		if r.Key, err = take(kl, '|'); err != nil {
			return nil, err
		}
		if r.Value, err = take(vl, '\n'); err != nil {
			return nil, err
		}
		if kl < 0 {
			r.Key = nil
		} else if r.Key == nil {
			r.Key = []byte{}
		}
		if vl < 0 {
			r.Value = nil
		} else if r.Value == nil {
			r.Value = []byte{}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// runKcat consumes topic/partition from `from` (kcat -o syntax) to the end.
func runKcat(t testing.TB, kcat, addr, topic string, p int32, from string) []rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", addr, "-t", topic, "-p", strconv.Itoa(int(p)), "-o", from, "-e", "-q", "-f", kcatFormat)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -o %s: %v\n%s", from, err, stderr.String())
	}
	recs, err := parseKcat(out)
	if err != nil {
		t.Fatalf("kcat -o %s output: %v\nstderr: %s", from, err, stderr.String())
	}
	return recs
}

// liveHeapSampler tracks the peak live heap (as marked by the last GC)
// and the peak HeapAlloc while it runs.
type liveHeapSampler struct {
	stop      chan struct{}
	done      sync.WaitGroup
	peakLive  atomic.Uint64
	peakAlloc atomic.Uint64
}

func startLiveHeapSampler() *liveHeapSampler {
	s := &liveHeapSampler{stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > s.peakLive.Load() {
				s.peakLive.Store(v)
			}
			if v := sample[1].Value.Uint64(); v > s.peakAlloc.Load() {
				s.peakAlloc.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

func (s *liveHeapSampler) finish() (live, alloc uint64) {
	close(s.stop)
	s.done.Wait()
	return s.peakLive.Load(), s.peakAlloc.Load()
}

// byNameVersions caps a franz-go client's Fetch at v12, which names topics:
// the raw Fetch requests the tests build carry a topic name and no topic
// ID, which v13 on would send as the zero ID (UNKNOWN_TOPIC_ID from a
// fetch service serving the topic's lineage by its ID).
func byNameVersions() kgo.Opt {
	vers := kversion.Stable()
	vers.SetMaxKeyVersion(1, 12) // Fetch
	return kgo.MaxVersions(vers)
}

// byNameClient is a franz-go client of addr with byNameVersions, closed at
// the test's end.
func byNameClient(t testing.TB, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byNameVersions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
