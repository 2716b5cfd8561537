package integration

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/app/daemon"
)

// Benchmark data: one partition of 1 KiB records in 16-record batches,
// in segments of benchSegBytes, uploaded by the uploader.
const (
	benchFetchBytes = 48 << 20
	benchSegBytes   = 16 << 20
	// benchReadBytes is max_bytes of each HTTP read of the Go client.
	benchReadBytes = 4 << 20
)

// BenchmarkFetch compares, in the same run and on the same objects,
// sequential reads of a cold partition through the fetch service (HTTP
// API, in-process Go client, default chunk size and read-ahead; a new
// service with an empty cache each iteration) with raw GetObject calls of
// its .log objects by minio-go, one after the other (raw_get).
// service_cold should reach 0.8 × raw_get; service_warm (every chunk in
// the memory cache) 1 GB/s. service_cold reports the store GETs per MiB
// served.
func BenchmarkFetch(b *testing.B) {
	cd, end := wideData(b, benchFetchBytes, benchSegBytes)
	total := int64(len(cd.logBytes["wide-0"]))
	ctx := context.Background()

	b.Run("raw_get", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		buf := make([]byte, 256<<10)
		for b.Loop() {
			var n int64
			for _, k := range cd.logKeys["wide-0"] {
				obj, err := cd.srv.Client().GetObject(ctx, cd.bucket, k, minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				m, err := io.CopyBuffer(io.Discard, obj, buf)
				obj.Close()
				if err != nil {
					b.Fatal(err)
				}
				n += m
			}
			if n != total {
				b.Fatalf("read %d bytes, want %d", n, total)
			}
		}
	})

	var scratch []byte // the client's buffer, kept from read to read as raw_get keeps its
	read := func(b *testing.B, fs *fetchService) {
		c := newRawClient(fs.httpURL)
		defer c.close()
		cw := &countWriter{w: io.Discard}
		if _, _, err := c.readAllInto(ctx, &scratch, "wide", 0, 0, end, benchReadBytes, cw); err != nil {
			b.Fatal(err)
		}
		if cw.n != total {
			b.Fatalf("read %d bytes, want %d", cw.n, total)
		}
	}

	b.Run("service_cold", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		var gets, served float64
		// The first iteration's chunks take pages mapped here, as the
		// pages a `tiered fetch` process pretouched at start-up take its
		// first replay's (internal/app/daemon Pretouch; the same work,
		// without its GC settings, which would hold for the whole test
		// process): twice what an iteration allocates. Without it the
		// first of each pass's iterations faulted in 300-3,000 pages
		// more than the others (one fault costs about 15 µs on a PVM
		// guest), and ran up to 1.7 × as long.
		if err := daemon.TouchHeap(2 * benchFetchBytes); err != nil {
			b.Logf("pages touched by this process only: %v", err)
		}
		for b.Loop() {
			b.StopTimer()
			// The last iteration's cache is garbage: collected now, its
			// pages take this one's chunks, as the pretouched ones above
			// took the first's. Without it, on a PVM guest the chunks
			// land in new pages whose first access by the kernel's socket
			// reads costs as much as a fault (measured 0.40-0.57 of
			// raw_get against 0.57-0.75, alternating runs).
			runtime.GC()
			fs := startFetch(b, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
			b.StartTimer()
			read(b, fs)
			b.StopTimer()
			gets += fs.counter(b, "tiered_fetch_store_gets_total")
			served += float64(total)
			fs.stop()
			b.StartTimer()
		}
		b.ReportMetric(gets/(served/(1<<20)), "GETs/MiB")
	})

	b.Run("service_warm", func(b *testing.B) {
		fs := startFetch(b, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
		read(b, fs)
		gets := fs.counter(b, "tiered_fetch_store_gets_total")
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			read(b, fs)
		}
		if g := fs.counter(b, "tiered_fetch_store_gets_total"); g != gets {
			b.Fatalf("warm reads sent %v GETs to the store", g-gets)
		}
	})
}

// BenchmarkFetchKafkaLatency measures single Fetch requests (Kafka
// protocol, franz-go client, one partition, 1 MiB max) at random offsets
// of a partition whose chunks are all cached, and reports the p50 and p99
// latency.
func BenchmarkFetchKafkaLatency(b *testing.B) {
	cd, end := wideData(b, 16<<20, 4<<20)
	fs := startFetch(b, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
	ctx := context.Background()
	c := newRawClient(fs.httpURL)
	if _, _, err := c.readAll(ctx, "wide", 0, 0, end, 4<<20, io.Discard); err != nil {
		b.Fatal(err)
	}
	// A sequential read needs no segment index; a read at a random offset
	// does: one read inside every 64th of the log loads them all.
	for off := int64(0); off < end; off += max(end/64, 1) {
		if _, err := c.read(ctx, "wide", 0, off, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	c.close()
	gets := fs.counter(b, "tiered_fetch_store_gets_total")
	cl, err := kgo.NewClient(kgo.SeedBrokers(fs.kafkaAddr), byNameVersions())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var lat []time.Duration
	var bytes int64
	b.ReportAllocs()
	for b.Loop() {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch, req.MaxWaitMillis = 1<<20, -1, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "wide"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = rng.Int64N(end), 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		began := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		lat = append(lat, time.Since(began))
		if err != nil {
			b.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || resp.ThrottleMillis != 0 || len(p.RecordBatches) == 0 {
			b.Fatalf("fetch at %d: error %d, throttle %d ms, %d bytes", rp.FetchOffset, p.ErrorCode, resp.ThrottleMillis, len(p.RecordBatches))
		}
		bytes += int64(len(p.RecordBatches))
	}
	if g := fs.counter(b, "tiered_fetch_store_gets_total"); g != gets {
		b.Fatalf("cache-hit fetches sent %v GETs to the store", g-gets)
	}
	slices.Sort(lat)
	q := func(f float64) float64 {
		return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(bytes)/float64(len(lat)), "bytes/fetch")
}

// BenchmarkKcat times `kcat -C -o beginning -e` reading one partition
// end to end, values written to /dev/null: from the fetch service with a
// warm cache (tiered_warm) and from franz-go's in-memory kfake broker
// holding the same record batches, byte for byte (kfake). tiered_warm
// should reach 1.0 × kfake. Each iteration is one kcat process, so the
// figures include its start-up, the same for both.
func BenchmarkKcat(b *testing.B) {
	kcat := kcatPath(b)
	cd, end := wideData(b, 32<<20, 16<<20)
	data := cd.logBytes["wide-0"]
	total := int64(len(data))
	ctx := context.Background()
	run := func(b *testing.B, addr string) {
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer devnull.Close()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, kcat, "-C", "-b", addr, "-t", "wide", "-p", "0", "-o", "beginning", "-e", "-q", "-f", `%s\n`)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = devnull, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("kcat: %v: %s", err, stderr.String())
		}
	}
	// The end offset check: a kcat run that stopped early would look fast.
	checkEnd := func(b *testing.B, addr string) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, kcat, "-C", "-b", addr, "-t", "wide", "-p", "0", "-o", "-1", "-e", "-q", "-f", `%o\n`).Output()
		if err != nil {
			b.Fatalf("kcat: %v", err)
		}
		if got := string(out); got != strconv.FormatInt(end-1, 10)+"\n" {
			b.Fatalf("last offset %q, want %d", got, end-1)
		}
	}

	b.Run("kfake", func(b *testing.B) {
		addr := kfakeWith(b, "wide", [][]byte{data})
		checkEnd(b, addr)
		b.SetBytes(total)
		for b.Loop() {
			run(b, addr)
		}
	})

	b.Run("tiered_warm", func(b *testing.B) {
		fs := startFetch(b, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
		run(b, fs.kafkaAddr) // warms the cache
		checkEnd(b, fs.kafkaAddr)
		gets := fs.counter(b, "tiered_fetch_store_gets_total")
		b.SetBytes(total)
		for b.Loop() {
			run(b, fs.kafkaAddr)
		}
		if g := fs.counter(b, "tiered_fetch_store_gets_total"); g != gets {
			b.Fatalf("warm reads sent %v GETs to the store", g-gets)
		}
	})
}
