package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/procfs"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// Configuration of the load test.
const (
	// EnvLoadSeconds overrides how long the consumers read (default 20).
	EnvLoadSeconds = "TIERED_LOAD_SECONDS"
	// EnvLoadSeed overrides the seed of the data and the reads (default 1).
	EnvLoadSeed = "TIERED_LOAD_SEED"
	// EnvSkipLoad=1 skips the load test.
	EnvSkipLoad = "TIERED_SKIP_LOAD"
)

// Budgets of the fetch process under load. The RSS bound is the
// configured budgets (cache and in-flight bytes) plus loadOverhead, which
// covers the Go runtime and binary, garbage not yet collected, and the
// buffers of 256 connections and their requests (each answer holds at most
// loadMaxBytes plus one batch).
const (
	loadConsumers  = 256
	loadParts      = 4
	loadPartBytes  = 6 << 20
	loadSegBytes   = 1 << 20
	loadCacheBytes = 8 << 20
	loadChunkBytes = 1 << 20
	loadInFlight   = 4 << 20
	loadMaxGets    = 4 // max_concurrent_gets
	loadMaxBytes   = 64 << 10
	loadOverhead   = 150 << 20
)

// loadPartition is one partition's uploaded bytes with its batch index.
type loadPartition struct {
	data  []byte
	bases []int64 // batch base offsets, ascending
	pos   []int   // batch positions in data
	end   int64
}

func newLoadPartition(t testing.TB, data []byte) *loadPartition {
	t.Helper()
	lp := &loadPartition{data: data}
	it := record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		lp.bases = append(lp.bases, b.BaseOffset())
		lp.pos = append(lp.pos, it.Pos()-b.Size())
		lp.end = b.NextOffset()
	}
	if it.Err() != nil || it.Pos() != len(data) || len(lp.bases) == 0 {
		t.Fatalf("uploaded log: %v (%d of %d bytes in %d batches)", it.Err(), it.Pos(), len(data), len(lp.bases))
	}
	return lp
}

// verify checks an answer for offset: it must be the uploaded bytes from
// the start of the batch holding offset (a trailing partial batch, as
// Kafka may send, is a prefix of the next one). It returns the records of
// the whole batches and the offset after them.
func (lp *loadPartition) verify(offset int64, got []byte) (records int, next int64, err error) {
	i := sort.Search(len(lp.bases), func(i int) bool { return lp.bases[i] > offset }) - 1
	if i < 0 {
		return 0, 0, fmt.Errorf("offset %d is below the log", offset)
	}
	start := lp.pos[i]
	if start+len(got) > len(lp.data) || !bytes.Equal(got, lp.data[start:start+len(got)]) {
		return 0, 0, fmt.Errorf("answer for offset %d (%d bytes) is not the uploaded bytes from position %d", offset, len(got), start)
	}
	next, whole, err := batchesEnd(got)
	if err != nil {
		return 0, 0, err
	}
	if whole == 0 {
		return 0, 0, fmt.Errorf("answer for offset %d holds no whole batch (%d bytes)", offset, len(got))
	}
	for it := record.NewIter(got[:whole]); ; {
		b, ok := it.Next()
		if !ok {
			break
		}
		records += int(b.RecordCount())
	}
	return records, next, nil
}

// rawKafkaConn sends Fetch requests (v11) over one connection with kmsg.
type rawKafkaConn struct {
	conn net.Conn
	rd   *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func dialKafka(addr string) (*rawKafkaConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawKafkaConn{conn: conn, rd: bufio.NewReader(conn), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tiered-load"))}, nil
}

// fetch reads one partition at offset; a throttled answer has
// ThrottleMillis > 0 and no data.
func (c *rawKafkaConn) fetch(topic string, p int32, offset int64, maxBytes int32) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, maxBytes, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, offset, maxBytes, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch answer: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		return nil, fmt.Errorf("fetch %s-%d at %d: partition error %d", topic, p, offset, ec)
	}
	return resp, nil
}

// do sends one request and reads its answer (any API: the flexible response header's
// tagged fields are skipped).
func (c *rawKafkaConn) do(req kmsg.Request) (kmsg.Response, error) {
	name := kmsg.NameForKey(req.Key())
	c.corr++
	c.buf = c.f.AppendRequest(c.buf[:0], req, c.corr)
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, fmt.Errorf("send %s: %w", name, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.rd, size[:]); err != nil {
		return nil, fmt.Errorf("read %s answer: %w", name, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 16<<20 {
		return nil, fmt.Errorf("%s answer of %d bytes", name, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.rd, body); err != nil {
		return nil, fmt.Errorf("read %s answer: %w", name, err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("%s answer for correlation id %d, want %d", name, corr, c.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:]
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if len(body) == 0 || body[0] != 0 {
			return nil, fmt.Errorf("%s answer: unexpected tagged fields in the response header", name)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s answer: %w", name, err)
	}
	return resp, nil
}

func (c *rawKafkaConn) close() error { return c.conn.Close() }

// openFDs counts the open file descriptors of process pid.
func openFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// procSockets counts the TCP sockets process pid holds: those connected to
// remotePort (its object-store connections) and the accepted ones on one
// of localPorts (its clients' connections; listeners are not counted).
func procSockets(pid, remotePort int, localPorts ...int) (store, clients int, err error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	port := func(addr string) int {
		_, hex, _ := strings.Cut(addr, ":")
		v, _ := strconv.ParseInt(hex, 16, 32)
		return int(v)
	}
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			const listen = "0A"
			switch {
			case port(f[2]) == remotePort:
				store++
			case f[3] != listen && slices.Contains(localPorts, port(f[1])):
				clients++
			}
		}
	}
	return store, clients, nil
}

// goroutines scrapes go_goroutines from a process's /metrics over a
// connection that is closed afterwards.
func goroutines(t testing.TB, base string) int {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("go_goroutines %q", rest)
			}
			return int(v)
		}
	}
	t.Fatalf("/metrics has no go_goroutines (%v)", sc.Err())
	return 0
}

// metricLines returns the samples of a process's /metrics whose names
// start with one of prefixes.
func metricLines(t testing.TB, base string, prefixes ...string) []string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(sc.Text(), p) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// percentile returns the q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// loadStats is what one consumer saw.
type loadStats struct {
	served    []time.Duration
	throttled int
	records   int
	bytes     int64
	wrong     int // answers that were not the uploaded bytes
	err       error
}

// TestLoad256Consumers runs `tiered fetch` as a process over a MinIO bucket
// holding four uploaded partitions (6 MiB each, four codecs) with budgets
// far below the data — 8 MiB cache, 1 MiB chunks, 4 MiB and 4 GETs in
// flight — so reads keep missing and wait on the gates, and lets 256
// consumers read for
// TIERED_LOAD_SECONDS (default 20, so the integration package stays within
// its CI time; the figure is 60): half read raw batches over HTTP,
// half send Kafka Fetch requests (kmsg over one connection each), each
// reading sequentially from random offsets (seeded, TIERED_LOAD_SEED).
//
// Every answer is compared byte for byte with the uploaded segments. The
// only errors allowed are explicit throttles (HTTP 429 with Retry-After,
// Kafka throttle_time_ms), obeyed by the consumer; anything else fails.
// The fetch process's peak RSS (VmHWM) stays within cache_bytes +
// max_inflight_bytes + 150 MiB, and once the consumers disconnect it holds
// no client connection and its goroutines and open file descriptors
// return to their baseline (apart from idle object-store connections).
// p50/p99 latencies are logged.
func TestLoad256Consumers(t *testing.T) {
	if os.Getenv(EnvSkipLoad) == "1" {
		t.Skip(EnvSkipLoad + "=1")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	secs := envInt(t, EnvLoadSeconds, 20)
	seed := uint64(envInt(t, EnvLoadSeed, 1))
	t.Logf("%d consumers for %ds, seed %d (%s, %s)", loadConsumers, secs, seed, EnvLoadSeconds, EnvLoadSeed)
	codecs := []codec.Codec{codec.None, codec.LZ4, codec.Zstd, codec.Snappy}
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "load", loadParts, map[string]string{"internal.segment.bytes": strconv.Itoa(loadSegBytes), "index.interval.bytes": "4096"})
		rng := rand.New(rand.NewPCG(seed, 0))
		for p := int32(0); p < loadParts; p++ {
			l := partitionLog(t, d, "load", p)
			pr := &producer{t: t}
			recs := make([]rec, 16)
			for written := 0; written < loadPartBytes; written += 16 * 1000 {
				for i := range recs {
					// Random bytes do not compress: every codec's
					// partition stays about 6 MiB.
					value := make([]byte, 400+rng.IntN(1200))
					for j := range value {
						value[j] = byte(rng.Uint32())
					}
					recs[i] = rec{Timestamp: ts0 + int64(written/1000), Key: []byte(strconv.Itoa(rng.IntN(1000))), Value: value}
				}
				pr.produce(l, codecs[p%int32(len(codecs))], 16, recs)
			}
		}
	})
	parts := make([]*loadPartition, loadParts)
	for p := range parts {
		parts[p] = newLoadPartition(t, cd.logBytes[fmt.Sprintf("load-%d", p)])
	}

	cfgFile := filepath.Join(t.TempDir(), "fetch.yaml")
	cfg := fmt.Sprintf("fetch:\n  cache_bytes: %d\n  chunk_bytes: %d\n  max_inflight_bytes: %d\n  max_concurrent_gets: %d\n  max_wait: 2s\n  readahead_chunks: 2\nshutdown_timeout: 30s\n",
		loadCacheBytes, loadChunkBytes, loadInFlight, loadMaxGets)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startTiered(t, tiered(t), nil, "fetch", "--bucket", cd.srv.URL(cd.bucket, ""), "--config", cfgFile, "--log-level", "warn")

	// Warm up every partition over both protocols, so that what the
	// service creates once (partition state, listener goroutines) is in
	// the baseline.
	for p := range parts {
		c := newRawClient(f.url())
		data, err := c.read(context.Background(), "load", int32(p), 0, loadMaxBytes, nil)
		c.close()
		if err != nil {
			t.Fatalf("warm-up HTTP read of load-%d: %v", p, err)
		}
		if _, _, err := parts[p].verify(0, data); err != nil {
			t.Fatalf("warm-up HTTP read of load-%d: %v", p, err)
		}
		kc, err := dialKafka(f.kafka)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := kc.fetch("load", int32(p), 0, loadMaxBytes)
		_ = kc.close()
		if err != nil {
			t.Fatalf("warm-up Kafka fetch of load-%d: %v", p, err)
		}
		if _, _, err := parts[p].verify(0, resp.Topics[0].Partitions[0].RecordBatches); err != nil {
			t.Fatalf("warm-up Kafka fetch of load-%d: %v", p, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	minioURL, err := url.Parse(cd.srv.URL(cd.bucket, ""))
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := url.Parse(minioURL.Query().Get("endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	minioPort, _ := strconv.Atoi(endpoint.Port())
	listenPorts := []int{}
	for _, a := range []string{f.http, f.kafka} {
		_, ps, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(ps)
		listenPorts = append(listenPorts, p)
	}
	sockets := func() (store, clients int) {
		store, clients, err := procSockets(f.pid(), minioPort, listenPorts...)
		if err != nil {
			t.Fatal(err)
		}
		return store, clients
	}
	baseG, baseFD := goroutines(t, f.url()), openFDs(t, f.pid())
	baseStore, baseClients := sockets()
	baseRSS := procfs.Status(t, f.pid(), "VmRSS")

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	stats := make([]loadStats, loadConsumers)
	var wg sync.WaitGroup
	var peakRSS, peakStore, peakClients atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", f.pid())); err == nil {
					if fields := strings.Fields(string(data)); len(fields) > 1 {
						if pages, err := strconv.ParseInt(fields[1], 10, 64); err == nil && pages*int64(os.Getpagesize()) > peakRSS.Load() {
							peakRSS.Store(pages * int64(os.Getpagesize()))
						}
					}
				}
				if store, clients, err := procSockets(f.pid(), minioPort, listenPorts...); err == nil {
					peakStore.Store(max(peakStore.Load(), int64(store)))
					peakClients.Store(max(peakClients.Load(), int64(clients)))
				}
			}
		}
	}()
	began := time.Now()
	for i := range loadConsumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &stats[i]
			rng := rand.New(rand.NewPCG(seed, uint64(i+1)))
			kafka := i%2 == 1
			var hc *rawClient
			var kc *rawKafkaConn
			if kafka {
				var err error
				if kc, err = dialKafka(f.kafka); err != nil {
					st.err = err
					return
				}
				defer kc.close()
			} else {
				hc = newRawClient(f.url())
				defer hc.close()
			}
			var buf []byte
			for ctx.Err() == nil {
				p := rng.IntN(loadParts)
				lp := parts[p]
				off := rng.Int64N(lp.end)
				for n := 1 + rng.IntN(32); n > 0 && off < lp.end && ctx.Err() == nil; {
					start := time.Now()
					var wait time.Duration
					if kafka {
						resp, err := kc.fetch("load", int32(p), off, loadMaxBytes)
						if err != nil {
							st.err = err
							return
						}
						if resp.ThrottleMillis > 0 {
							if len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
								st.err = fmt.Errorf("throttled Kafka answer with data")
								return
							}
							wait = time.Duration(resp.ThrottleMillis) * time.Millisecond
						} else {
							buf = resp.Topics[0].Partitions[0].RecordBatches
						}
					} else {
						var err error
						buf, err = hc.read(ctx, "load", int32(p), off, loadMaxBytes, buf[:0])
						var te *errThrottled
						switch {
						case errors.As(err, &te):
							wait = te.retryAfter
						case err != nil && ctx.Err() != nil:
							return // the load ended mid-request
						case err != nil:
							st.err = err
							return
						}
					}
					if wait > 0 {
						st.throttled++
						select {
						case <-time.After(wait):
						case <-ctx.Done():
						}
						continue
					}
					took := time.Since(start)
					recs, next, err := lp.verify(off, buf)
					if err != nil {
						st.wrong++
						st.err = fmt.Errorf("load-%d via %s: %w", p, map[bool]string{true: "Kafka", false: "HTTP"}[kafka], err)
						return
					}
					st.served = append(st.served, took)
					st.records += recs
					st.bytes += int64(len(buf))
					off = next
					n--
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	cancel()
	<-sampled

	var all, httpLat, kafkaLat []time.Duration
	records, throttled, failed, wrong := 0, 0, 0, 0
	var bytesRead int64
	for i, st := range stats {
		wrong += st.wrong
		if st.err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("consumer %d: %v", i, st.err)
			}
			continue
		}
		if len(st.served) == 0 {
			t.Errorf("consumer %d: no request served in %v (%d throttled)", i, elapsed, st.throttled)
		}
		all = append(all, st.served...)
		if i%2 == 1 {
			kafkaLat = append(kafkaLat, st.served...)
		} else {
			httpLat = append(httpLat, st.served...)
		}
		records += st.records
		throttled += st.throttled
		bytesRead += st.bytes
	}
	for _, s := range [][]time.Duration{all, httpLat, kafkaLat} {
		slices.Sort(s)
	}
	t.Logf("%d requests served in %v (%.0f/s, %.1f MiB/s), %d throttled, %d consumers failed; %d records verified byte for byte",
		len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), float64(bytesRead)/elapsed.Seconds()/(1<<20), throttled, failed, records)
	t.Logf("latency p50/p99: all %v/%v, HTTP %v/%v, Kafka %v/%v",
		percentile(all, .5), percentile(all, .99), percentile(httpLat, .5), percentile(httpLat, .99), percentile(kafkaLat, .5), percentile(kafkaLat, .99))
	t.Logf("BenchmarkLoad256Consumers/%ds\t%d\t%d p50-ns/op\t%d p99-ns/op\t%.1f MB/s",
		secs, len(all), percentile(all, .5).Nanoseconds(), percentile(all, .99).Nanoseconds(), float64(bytesRead)/elapsed.Seconds()/1e6)

	t.Logf("fetch process counters:\n%s", strings.Join(metricLines(t, f.url(), "tiered_objstore_operations_total", "tiered_fetch_store_gets_total",
		"tiered_fetch_cache_hits_total", "tiered_fetch_cache_misses_total", "tiered_fetch_cache_evictions_total", "tiered_fetch_readahead_chunks_total",
		"tiered_fetch_gate_rejections_total"), "\n"))

	// Memory: the peak RSS of the fetch process against its budgets.
	hwm := procfs.Status(t, f.pid(), "VmHWM")
	budget := int64(loadCacheBytes + loadInFlight + loadOverhead)
	t.Logf("fetch process RSS: %d MiB before the load, peak %d MiB sampled, VmHWM %d MiB; budget %d MiB (cache %d + in flight %d + overhead %d)",
		baseRSS>>20, peakRSS.Load()>>20, hwm>>20, budget>>20, loadCacheBytes>>20, loadInFlight>>20, loadOverhead>>20)
	if hwm > budget {
		t.Errorf("fetch process peak RSS %d MiB is over the %d MiB budget", hwm>>20, budget>>20)
	}

	// Leaks: once every consumer disconnected, no client connection is
	// left, and goroutines and descriptors return to the baseline within
	// 30 s — apart from the object-store client's pool of idle keep-alive
	// connections, which the load may have grown (two goroutines and one
	// descriptor each; counted from /proc, not assumed). The slack covers
	// the metrics scrape itself.
	const slackG, slackFD = 4, 2
	var g, fds, store, clients int
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, fds = goroutines(t, f.url()), openFDs(t, f.pid())
		store, clients = sockets()
		if clients <= baseClients && g-2*store <= baseG-2*baseStore+slackG && fds-store <= baseFD-baseStore+slackFD {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("30s after the load: %d client connections (baseline %d); %d goroutines and %d open fds with %d object-store connections (baseline %d, %d with %d)",
				clients, baseClients, g, fds, store, baseG, baseFD, baseStore)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("goroutines %d before, %d after; open fds %d before, %d after; object-store connections %d before, %d at most, %d after; client connections %d before, %d at most, %d after",
		baseG, g, baseFD, fds, baseStore, peakStore.Load(), store, baseClients, peakClients.Load(), clients)
	if t.Failed() {
		// SIGQUIT makes the Go runtime print every goroutine's stack.
		if err := f.cmd.Process.Signal(syscall.SIGQUIT); err == nil {
			<-f.done
		}
		t.Logf("fetch process stderr (goroutine dump):\n%s", f.stderr)
		t.FailNow()
	}
	f.stop()

	if len(all) == 0 {
		t.Fatal("nothing was served")
	}
	// A wrong answer counts as a lost record (and fails the test above).
	reliability.Record(t, fmt.Sprintf("%d consumers for %ds", loadConsumers, secs), 1, records, wrong)
}
