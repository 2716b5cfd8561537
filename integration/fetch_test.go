package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

func createTopic(t testing.TB, d *localtier.LogDir, name string, parts int, cfg map[string]string) {
	t.Helper()
	all := map[string]string{"remote.storage.enable": "true", "index.interval.bytes": "512"}
	for k, v := range cfg {
		all[k] = v
	}
	if _, err := d.CreateTopic(name, parts, all); err != nil {
		t.Fatal(err)
	}
}

func partitionLog(t testing.TB, d *localtier.LogDir, topic string, p int32) *localtier.Log {
	t.Helper()
	l, err := d.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fromOffset and fromTime are the expected answers of a consumer starting
// at an absolute offset or a timestamp.
func fromOffset(rs []rec, off int64) []rec {
	for i, r := range rs {
		if r.Offset >= off {
			return rs[i:]
		}
	}
	return nil
}

func fromTime(rs []rec, ts int64) []rec {
	for i, r := range rs {
		if r.Timestamp >= ts {
			return rs[i:]
		}
	}
	return nil
}

// TestFetchColdKcatAndFranzGo: partitions of every codec and a compacted
// topic with offset gaps are uploaded to MinIO by the uploader and deleted
// locally; kcat (librdkafka) and a franz-go consumer read them through the
// fetch service (remote catalog over the chunk cache) from the beginning,
// from an absolute offset and from a timestamp, across segment and chunk
// boundaries, and get exactly the records produced.
func TestFetchColdKcatAndFranzGo(t *testing.T) {
	kcat := kcatPath(t)
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}
	want := map[int32][]rec{}
	var compacted []rec
	cd := buildCold(t, func(d *localtier.LogDir) {
		pr := &producer{t: t}
		createTopic(t, d, "codecs", len(codecs), map[string]string{"internal.segment.bytes": "1024", "index.interval.bytes": "256"})
		for i, c := range codecs {
			want[int32(i)] = pr.produce(partitionLog(t, d, "codecs", int32(i)), c, 7, genRecs(200, c.String()))
		}
		createTopic(t, d, "compacted", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0",
			"delete.retention.ms": "86400000", "internal.segment.bytes": "600"})
		l := partitionLog(t, d, "compacted", 0)
		recs := make([]rec, 240)
		for i := range recs {
			k := i % 61 // later only a few keys are rewritten: the survivors leave gaps
			if i >= 150 {
				k = i % 5
			}
			recs[i] = rec{Timestamp: ts0 + int64(i)*10, Key: []byte("key-" + strconv.Itoa(k)), Value: []byte("write " + strconv.Itoa(i))}
			if i == 230 {
				recs[i].Value = nil // a tombstone (kept: delete.retention.ms not passed)
			}
		}
		pr.produce(l, codec.LZ4, 4, recs)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if rep, err := compactor.RunOnce(context.Background(), d, compactor.PassOptions{Force: true, Config: compactor.Config{DedupeBufferSize: 1 << 20}}); err != nil {
			t.Fatalf("compact: %v (%+v)", err, rep)
		}
		compacted = testrecs.FromLog(t, l)
		// Against the producer, not only the engine: the last write of
		// every key survives, in order.
		last := map[string]rec{}
		for _, r := range recs {
			last[string(r.Key)] = r
		}
		got := map[string]rec{}
		for _, r := range compacted {
			got[string(r.Key)] = r
		}
		for k, w := range last {
			if g, ok := got[k]; !ok || g.Timestamp != w.Timestamp || !testrecs.SameBytes(g.Value, w.Value) {
				t.Fatalf("setup: compaction lost the last write of %s: %v", k, w)
			}
		}
	})
	gaps := 0
	for i := 1; i < len(compacted); i++ {
		if compacted[i].Offset != compacted[i-1].Offset+1 {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatalf("setup: compaction left %d records and no gap", len(compacted))
	}
	for name, keys := range cd.logKeys {
		if len(keys) < 3 {
			t.Fatalf("setup: %s has %d remote segments, want several", name, len(keys))
		}
	}
	// Small chunks: reads cross chunk boundaries as well as segments. One
	// service per client, so that each reads the bucket cold.
	kcatSvc := startFetch(t, cd.store, chunkcache.CacheOptions{ChunkBytes: 4 << 10}, kafkasrv.KafkaOptions{})
	franzSvc := startFetch(t, cd.store, chunkcache.CacheOptions{ChunkBytes: 4 << 10}, kafkasrv.KafkaOptions{})

	type start struct {
		name string
		kcat string     // kcat -o
		kgo  kgo.Offset // franz-go start
		want func([]rec) []rec
	}
	starts := func(rs []rec) []start {
		mid := rs[len(rs)*3/5].Offset
		if rs[len(rs)*3/5-1].Offset+1 < mid {
			mid-- // inside a gap: served from the next record present
		}
		ts := rs[len(rs)/3].Timestamp - 3
		return []start{
			{"beginning", "beginning", kgo.NewOffset().AtStart(), func(rs []rec) []rec { return rs }},
			{"absolute", strconv.FormatInt(mid, 10), kgo.NewOffset().At(mid), func(rs []rec) []rec { return fromOffset(rs, mid) }},
			{"timestamp", fmt.Sprintf("s@%d", ts), kgo.NewOffset().AfterMilli(ts), func(rs []rec) []rec { return fromTime(rs, ts) }},
		}
	}
	check := func(t *testing.T, topic string, p int32, rs []rec) {
		for _, s := range starts(rs) {
			w := s.want(rs)
			if len(w) == 0 || len(w) == len(rs) && s.name != "beginning" {
				t.Fatalf("%s: bad test start (%d of %d records)", s.name, len(w), len(rs))
			}
			t.Run(s.name+"/kcat", func(t *testing.T) {
				testrecs.Same(t, runKcat(t, kcat, kcatSvc.kafkaAddr, topic, p, s.kcat), w, false)
			})
			t.Run(s.name+"/franz-go", func(t *testing.T) {
				testrecs.Same(t, testrecs.ConsumeKgo(t, franzSvc.kafkaAddr, topic, p, s.kgo, len(w)), w, true)
			})
		}
	}
	for i, c := range codecs {
		t.Run(c.String(), func(t *testing.T) { check(t, "codecs", int32(i), want[int32(i)]) })
	}
	t.Run("compacted", func(t *testing.T) { check(t, "compacted", 0, compacted) })
}

// wideData is one partition of about size bytes of 1 KiB records in
// segments of segBytes, uploaded and deleted locally.
func wideData(t testing.TB, size, segBytes int) (*coldData, int64) {
	t.Helper()
	var end int64
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "wide", 1, map[string]string{"internal.segment.bytes": strconv.Itoa(segBytes), "index.interval.bytes": "4096"})
		l := partitionLog(t, d, "wide", 0)
		pr := &producer{t: t}
		rng := rand.New(rand.NewPCG(1, 2))
		value := make([]byte, 1000)
		recs := make([]rec, 16)
		for written := 0; written < size; written += 16 * 1030 {
			for i := range recs {
				for j := range value {
					value[j] = byte('a' + rng.IntN(26))
				}
				recs[i] = rec{Timestamp: ts0 + int64(written), Key: []byte(strconv.Itoa(rng.IntN(1000))), Value: append([]byte(nil), value...)}
			}
			pr.produce(l, codec.None, 16, recs)
		}
		end = l.LogEndOffset()
	})
	return cd, end
}

// TestFetchCold64Consumers: 64 consumers read the same cold range at once
// through the service. Every range of every object is fetched from the
// store once (the end check's exact tail included) (concurrent misses share one GET; nothing is evicted because
// the cache holds the range), every consumer gets the uploaded bytes
// exactly, and the live heap stays within the cache and in-flight budgets
// plus what the consumers themselves hold.
func TestFetchCold64Consumers(t *testing.T) {
	const (
		consumers = 64
		maxBytes  = 64 << 10
		chunk     = 256 << 10
		memory    = 16 << 20
		inFlight  = 4 * chunk
	)
	cd, end := wideData(t, 8<<20, 1<<20)
	want := cd.logBytes["wide-0"]
	cb := newCountingBucket(cd.store)
	fs := startFetch(t, cb, chunkcache.CacheOptions{ChunkBytes: chunk, MemoryBytes: memory, MaxInFlightBytes: inFlight,
		MaxWait: 30 * time.Second}, kafkasrv.KafkaOptions{})

	runtime.GC()
	base, _ := startLiveHeapSampler().finish()
	hs := startLiveHeapSampler()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	ready := make(chan struct{})
	wantCRC := crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli))
	errs := make([]error, consumers)
	for i := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newRawClient(fs.httpURL)
			defer c.close()
			h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
			cw := &countWriter{w: h}
			<-ready
			_, _, err := c.readAll(ctx, "wide", 0, 0, end, maxBytes, cw)
			if err == nil && (cw.n != int64(len(want)) || h.Sum32() != wantCRC) {
				err = fmt.Errorf("read %d bytes (crc %08x), want the %d uploaded (crc %08x)", cw.n, h.Sum32(), len(want), wantCRC)
			}
			errs[i] = err
		}()
	}
	close(ready)
	wg.Wait()
	live, alloc := hs.finish()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
	}
	if rep := cb.repeated(func(string) bool { return true }); len(rep) > 0 {
		t.Errorf("ranges fetched more than once: %v", rep)
	}
	logGets := 0
	cb.mu.Lock()
	for k := range cb.seen {
		if strings.Contains(k, ".log@") {
			logGets++
		}
	}
	cb.mu.Unlock()
	chunks := 0
	for _, size := range segmentSizes(t, cd, "wide-0") {
		chunks += int((size + chunk - 1) / chunk)
	}
	// Every chunk is read once, by a GET of its own or by continuing the
	// parked GET of the chunks before it; the end check reads the final
	// segment's tail exactly, or through its chunk for a small partition,
	// once for all consumers. So at most one GET per chunk and the tail,
	// and each byte read once (the tail and the indexes besides).
	if logGets > chunks+1 || logGets == 0 {
		t.Errorf("%d range GETs of .log objects, want at most one per chunk (%d) and the final segment's tail", logGets, chunks)
	}
	if read, most := cb.bytes.Load(), int64(len(want))+256<<10; read > most {
		t.Errorf("%d bytes read from the store for %d bytes of .log objects: want each byte once (at most %d with the tail and indexes)", read, len(want), most)
	}
	// Budget: the cache's bytes and in-flight bytes, each consumer's
	// request and response buffers (a response holds whole batches, so up
	// to max_bytes plus one batch, and the client reads it into a buffer),
	// plus slack for the HTTP stacks and the runtime.
	budget := uint64(memory + inFlight + consumers*4*maxBytes + 8<<20)
	t.Logf("%d consumers read %d bytes each: %d store GETs (%d bytes); live heap %d MiB above the %d MiB baseline (peak HeapAlloc %d MiB); budget %d MiB",
		consumers, len(want), cb.gets.Load(), cb.bytes.Load(), (live-min(live, base))>>20, base>>20, alloc>>20, budget>>20)
	if live > base+budget {
		t.Errorf("live heap peaked at %d MiB, %d MiB above the baseline: over the %d MiB budget", live>>20, (live-base)>>20, budget>>20)
	}
}

type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// segmentSizes returns the sizes of a partition's remote .log objects.
func segmentSizes(t testing.TB, cd *coldData, name string) []int64 {
	t.Helper()
	var out []int64
	for _, k := range cd.logKeys[name] {
		a, err := cd.store.Attributes(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Size)
	}
	return out
}

// TestFetchOverloadThrottles: with tiny gates (one GET at a time, one chunk
// in flight, 20 ms of waiting) and a slow store, concurrent cold reads get
// fast, explicit overload answers — HTTP 429 with Retry-After, Kafka
// throttle_time_ms with no error and no data — never a timeout, and the
// requests admitted are served correctly.
func TestFetchOverloadThrottles(t *testing.T) {
	const readers = 12
	cd, end := wideData(t, 3<<20, 256<<10)
	all := cd.logBytes["wide-0"]
	co := chunkcache.CacheOptions{ChunkBytes: 64 << 10, MaxConcurrentGets: 1, MaxInFlightBytes: 64 << 10,
		MaxWait: 20 * time.Millisecond, RetryAfter: time.Second, ReadAheadChunks: -1}
	// Distinct cold offsets, spread over the partition.
	offsets := make([]int64, readers)
	for i := range offsets {
		offsets[i] = end * int64(i) / readers
	}
	// A GET takes at least 150 ms: more than the whole wait budget.
	const getDelay = 150 * time.Millisecond
	const answerWithin = 5 * time.Second

	t.Run("http", func(t *testing.T) {
		cb := newCountingBucket(cd.store)
		cb.delay = getDelay
		fs := startFetch(t, cb, co, kafkasrv.KafkaOptions{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, throttled := 0, 0
		for _, off := range offsets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := newRawClient(fs.httpURL)
				defer c.close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				began := time.Now()
				data, err := c.read(ctx, "wide", 0, off, 32<<10, nil)
				took := time.Since(began)
				mu.Lock()
				defer mu.Unlock()
				var te *errThrottled
				switch {
				case errors.As(err, &te):
					throttled++
				case err != nil:
					t.Errorf("offset %d: %v after %s", off, err, took)
				default:
					ok++
					if len(data) == 0 || !bytes.Contains(all, data[:min(len(data), 4096)]) {
						t.Errorf("offset %d: %d bytes not from the partition", off, len(data))
					}
				}
				if took > answerWithin {
					t.Errorf("offset %d: answered after %s", off, took)
				}
			}()
		}
		wg.Wait()
		t.Logf("%d served, %d throttled (429)", ok, throttled)
		// Under overload some requests must be throttled (never time out);
		// how many are served depends on how loaded the machine is.
		if throttled == 0 {
			t.Fatalf("%d served, %d throttled: want throttles under overload", ok, throttled)
		}
		if n := fs.counter(t, "tiered_fetch_gate_rejections_total"); n == 0 {
			t.Errorf("no gate rejection counted")
		}
	})

	t.Run("kafka", func(t *testing.T) {
		cb := newCountingBucket(cd.store)
		cb.delay = getDelay
		fs := startFetch(t, cb, co, kafkasrv.KafkaOptions{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, throttled := 0, 0
		for _, off := range offsets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(fs.kafkaAddr), byNameVersions())
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// Connect first, so the timing is the fetch's.
				if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
					t.Error(err)
					return
				}
				req := kmsg.NewPtrFetchRequest()
				req.MaxBytes, req.SessionEpoch, req.MaxWaitMillis = 32<<10, -1, 0
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "wide"
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, off, 32<<10
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				began := time.Now()
				resp, err := req.RequestWith(ctx, cl)
				took := time.Since(began)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("offset %d: fetch failed after %s: %v", off, took, err)
					return
				}
				if took > answerWithin {
					t.Errorf("offset %d: answered after %s", off, took)
				}
				if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Errorf("offset %d: response error %d, %d topics", off, resp.ErrorCode, len(resp.Topics))
					return
				}
				p := resp.Topics[0].Partitions[0]
				switch {
				case p.ErrorCode != 0:
					t.Errorf("offset %d: partition error %d", off, p.ErrorCode)
				case resp.ThrottleMillis > 0:
					throttled++
					if len(p.RecordBatches) != 0 {
						t.Errorf("offset %d: throttled response with %d bytes", off, len(p.RecordBatches))
					}
				default:
					ok++
					it := record.NewIter(p.RecordBatches)
					b, found := it.Next()
					if !found || b.BaseOffset() > off || b.NextOffset() <= off || !bytes.Contains(all, b) {
						t.Errorf("offset %d: first batch not the one holding it", off)
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("%d served, %d throttled (throttle_time_ms)", ok, throttled)
		// Under overload some requests must be throttled (never time out);
		// how many are served depends on how loaded the machine is.
		if throttled == 0 {
			t.Fatalf("%d served, %d throttled: want throttles under overload", ok, throttled)
		}
	})
}
