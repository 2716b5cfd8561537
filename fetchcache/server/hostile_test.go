package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/procfs"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/remotetier/objstore"
)

// EnvHostileRuns turns TestHostileClients on: how many times to run each
// attack (scripts/reliability sets it; unset or 0 skips the test, which is
// too heavy for the default suite).
const EnvHostileRuns = "TIERED_HOSTILE_RUNS"

// The budgets the hostile test configures; the goal for an attack's peak
// resident memory is the memory before it plus the budgets it meets plus
// hostileSlack.
const (
	hostileResponseBudget = 64 << 20
	hostileProduceBudget  = 128 << 20
	hostileSlack          = 128 << 20
)

// attacker is the address hostile clients come from, so the per-IP cap
// applies to them and not to the probe on 127.0.0.1.
var attacker = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}

// TestHostileClients runs each attack of the hostile-clients section of
// RELIABILITY.md against both listeners while a probe consumer fetches
// beside it, and records the peak resident memory against the budgets, the
// probe's p99 and failures, and the bucket GETs. It fails when the probe
// was not served or a peak broke its goal.
func TestHostileClients(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv(EnvHostileRuns))
	if runs <= 0 {
		t.Skipf("set %s to run the hostile-clients attacks", EnvHostileRuns)
	}
	e := fetchkit.NewEnv(t)
	e.Topic("hot", 2, map[string]string{"internal.segment.bytes": strconv.Itoa(64 << 20)}) // reads of whole 16 MB partitions
	big := make([]fetchkit.Rec, 1600)                                                      // 16 MB a partition, 10 KB values
	for i := range big {
		big[i] = fetchkit.Rec{Timestamp: fetchkit.Ts0 + int64(i), Key: []byte(strconv.Itoa(i)), Value: make([]byte, 10_000)}
	}
	for p := range int32(2) {
		e.Produce(e.Log("hot", p), fetchkit.ProduceOpts{Per: 10}, big)
	}
	s, err := Listen(ServerOptions{
		Catalog: e.Cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Logger: fetchkit.DiscardLogger(),
		Kafka: kafkasrv.KafkaOptions{MaxInFlightResponseBytes: hostileResponseBudget, MaxFetchWait: 500 * time.Millisecond, WriteTimeout: 10 * time.Second},
		HTTP:  httpapi.HTTPOptions{Writer: holdingWriter{}, MaxInFlightProduceBytes: hostileProduceBudget, ProduceMaxWait: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Serve)
	kafkaAddr, httpAddr := s.KafkaAddr().String(), s.HTTPAddr().String()

	attacks := []struct {
		name, budgets string
		goal          int64 // over the baseline
		run           func(t *testing.T, hold func()) string
	}{
		{"fetch amplification × 40 slow readers", "kafka.max_inflight_response_bytes 64 MiB", hostileResponseBudget, func(t *testing.T, hold func()) string {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxBytes, req.SessionEpoch = 12, 50<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "hot"
			for i := range 3001 {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = int32(min(i, 1)), 50<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			frame := requestFrame(req, 1)
			for range 40 {
				c := dialAttacker(t, kafkaAddr)
				if _, err := c.Write(frame); err != nil {
					t.Fatal(err)
				}
				// and never read the answer
			}
			hold()
			return "one answer per partition; budget-bound"
		}},
		{"300 stalled frames", "300 × kafka request max 1 MiB", 300 << 20, func(t *testing.T, hold func()) string {
			half := binary.BigEndian.AppendUint32(nil, 1<<20-1)
			half = append(half, make([]byte, 512<<10)...)
			for range 300 {
				c := dialAttacker(t, kafkaAddr)
				if _, err := c.Write(half); err != nil {
					t.Fatal(err)
				}
			}
			hold()
			return "closed after kafka.request_read_timeout"
		}},
		{"4,100 idle sockets", "kafka.max_connections_per_ip 1024", 0, func(t *testing.T, hold func()) string {
			for range 4100 {
				dialAttacker(t, kafkaAddr)
			}
			hold()
			return "3,076 refused at once (per-IP cap); the rest closed after kafka.idle_timeout"
		}},
		{"500 slow HTTP bodies", "http.max_inflight_produce_bytes 128 MiB", hostileProduceBudget, func(t *testing.T, hold func()) string {
			for range 500 {
				c := dialAttacker(t, httpAddr)
				fmt.Fprintf(c, "POST /v1/topics/hot/records HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx", 1<<20)
			}
			hold()
			return "429 past the produce budget; 408 and closed after http.body_read_timeout"
		}},
		{"8 concurrent 62 MB produce bodies", "http.max_inflight_produce_bytes 128 MiB", hostileProduceBudget, func(t *testing.T, hold func()) string {
			var wg sync.WaitGroup
			var throttled atomic.Int64
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dialAttacker(t, httpAddr)
					const n = 62 << 20
					fmt.Fprintf(c, "POST /v1/topics/hot/records HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
					go func() { _, _ = io.Copy(c, io.LimitReader(zeros{}, n)) }()
					if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
						if resp.StatusCode == http.StatusTooManyRequests {
							throttled.Add(1)
						}
						resp.Body.Close()
					}
				}()
			}
			hold()
			wg.Wait()
			return fmt.Sprintf("%d of 8 answered 429 THROTTLED", throttled.Load())
		}},
	}
	for run := range runs {
		for _, a := range attacks {
			t.Run(fmt.Sprintf("%s/%d", a.name, run), func(t *testing.T) {
				h, note := measure(t, kafkaAddr, func(hold func()) string { return a.run(t, hold) })
				h.GoalBytes, h.Budgets, h.BucketGets, h.Note = h.BaselineRSSBytes+a.goal+hostileSlack, a.budgets, -1, note
				check(t, a.name, h)
			})
		}
		t.Run(fmt.Sprintf("30,000 missing partitions/%d", run), func(t *testing.T) { missingPartitions(t, kafkaAddr) })
	}
}

// missingPartitions sends Fetches naming 30,000 partitions that have no
// manifest (three of 10,000, kafka.max_fetch_partitions), twice, to a
// Kafka listener over a bucket, and records the GETs of the second pass;
// the probe fetches from probeAddr.
func missingPartitions(t *testing.T, probeAddr string) {
	b := &objtesting.ReadCounter{BucketReader: objstore.NewMemory()}
	cat, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startKafka(t, cat, kafkasrv.KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.Dialer(attacker.DialContext), kgo.RequestTimeoutOverhead(time.Minute))
	pass := func() {
		for k := range 3 {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.SessionEpoch = 12, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "missing"
			for p := range 10_000 {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = int32(k*10_000+p), 1<<10
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			if _, err := req.RequestWith(context.Background(), cl); err != nil {
				t.Fatalf("fetch of 10,000 missing partitions: %v", err)
			}
		}
	}
	var first int64
	h, _ := measure(t, probeAddr, func(hold func()) string {
		pass()
		first = b.Reads()
		pass()
		return ""
	})
	second := b.Reads() - first
	h.GoalBytes, h.Budgets, h.BucketGets = h.BaselineRSSBytes+hostileSlack, "unknown-partition LRU 65,536", second
	h.Note = fmt.Sprintf("first pass %d GETs, second %d", first, second)
	check(t, "30,000 missing partitions", h)
	if second > 0 {
		t.Errorf("the second pass over 30,000 missing partitions made %d GETs, want 0", second)
	}
}

// check records h and fails on a probe failure. A peak over the goal is
// reported (the table marks it), not failed: the machine's other load and
// the attack clients (in this process) count in the peak too.
func check(t *testing.T, attack string, h reliability.Hostile) {
	t.Helper()
	reliability.RecordHostile(t, attack, h)
	t.Logf("%s: RSS %d → peak %d MiB (goal %d MiB), probe %d requests, %d failed, p99 %.1f ms, %s", attack,
		h.BaselineRSSBytes>>20, h.PeakRSSBytes>>20, h.GoalBytes>>20, h.ProbeRequests, h.ProbeFailures, h.ProbeP99Millis, h.Note)
	if h.ProbeFailures > 0 || h.ProbeRequests == 0 {
		t.Errorf("%s: the probe had %d of %d requests fail", attack, h.ProbeFailures, h.ProbeRequests)
	}
	if h.PeakRSSBytes > h.GoalBytes {
		t.Logf("%s: peak RSS %d MiB over the goal of %d MiB", attack, h.PeakRSSBytes>>20, h.GoalBytes>>20)
	}
}

// measure runs attack while a probe consumer on 127.0.0.1 fetches from
// kafkaAddr; attack calls hold to keep its clients in place for the
// measured window. It returns the resident memory before, the peak during
// (VmHWM after a reset), and the probe's figures.
func measure(t *testing.T, kafkaAddr string, attack func(hold func()) string) (reliability.Hostile, string) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var h reliability.Hostile
	h.BaselineRSSBytes = procfs.Status(t, 0, "VmRSS")
	// As serve and fetch run (daemon.ApplyMemoryLimit): under a soft memory
	// limit of their budgets plus 128 MiB, here over what the test process
	// held before the attack.
	prev := debug.SetMemoryLimit(h.BaselineRSSBytes + hostileResponseBudget + hostileProduceBudget + hostileSlack)
	defer debug.SetMemoryLimit(prev)
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS: %v", err)
	}
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(kafkaAddr))
	stop := make(chan struct{})
	var (
		lat      []time.Duration
		failures int
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			req := kmsg.NewPtrFetchRequest()
			req.MaxBytes, req.SessionEpoch = 64<<10, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "hot"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = 1, 64<<10
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			resp, err := req.RequestWith(ctx, cl)
			cancel()
			if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				failures++
			}
			lat = append(lat, time.Since(start))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	note := attack(func() { time.Sleep(3 * time.Second) })
	close(stop)
	<-done
	h.PeakRSSBytes = procfs.Status(t, 0, "VmHWM")
	h.ProbeRequests, h.ProbeFailures = len(lat), failures
	if len(lat) > 0 {
		slices.Sort(lat)
		h.ProbeP99Millis = float64(lat[(len(lat)*99)/100]) / float64(time.Millisecond)
	}
	return h, note
}

// dialAttacker connects from 127.0.0.2; the connection closes when the
// attack's test ends.
func dialAttacker(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := attacker.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("attacker dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// requestFrame encodes req as a request frame with header v2.
func requestFrame(req kmsg.Request, corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'h')
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// holdingWriter holds a produce body whole, as read (64 KiB pieces, no
// copies: what the body budget accounts for), and answers without
// appending, as a Writer that holds a body in memory does.
type holdingWriter struct{}

func (holdingWriter) CreateTopic(context.Context, httpapi.CreateTopicRequest) (any, error) {
	return nil, nil
}
func (holdingWriter) DescribeTopic(context.Context, string) (any, error) { return nil, nil }
func (holdingWriter) AlterTopic(context.Context, string, httpapi.AlterConfigRequest) (any, error) {
	return nil, nil
}
func (holdingWriter) Reload(context.Context) error { return nil }
func (holdingWriter) Produce(_ context.Context, _ string, _ int32, _ bool, body io.Reader) (any, error) {
	var held [][]byte
	n := 0
	for {
		p := make([]byte, 64<<10)
		k, err := io.ReadFull(body, p)
		held, n = append(held, p[:k]), n+k
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return map[string]int{"bytes": n, "pieces": len(held)}, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
