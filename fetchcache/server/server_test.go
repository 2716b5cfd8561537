package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
)

func TestServerServesAndShutsDown(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("s", 1, nil)
	want := e.Produce(e.Log("s", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(10, ts0, "s"))
	reg := prometheus.NewRegistry()
	sc := &signalingCatalog{Catalog: e.Cat, waiting: make(chan struct{}, 1)}
	srv, err := Listen(ServerOptions{Catalog: sc, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Registerer: reg, Gatherer: reg, Kafka: kafkasrv.KafkaOptions{MaxFetchWait: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	base := "http://" + srv.HTTPAddr().String()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `tiered_fetch_requests_total{code="OK",interface="kafka"} 0`) {
		t.Fatalf("metrics %d: series missing at start", code)
	}
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, srv.KafkaAddr().String(), "s", 0, kgo.NewOffset().AtStart(), len(want)), want)

	// A fetch waiting at the log end is answered at once on shutdown.
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(srv.KafkaAddr().String()))
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 30000, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "s"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 10, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	waiting := make(chan error, 1)
	go func() {
		resp, err := req.RequestWith(context.Background(), cl)
		if err == nil && resp.Topics[0].Partitions[0].HighWatermark != 10 {
			t.Errorf("waiting fetch answer %+v", resp.Topics[0].Partitions[0])
		}
		waiting <- err
	}()
	// The consumer above is closed, but the server may still be holding
	// its last fetch for up to that fetch's 100 ms max wait: let it end
	// before arming, so the signal comes from this fetch.
	time.Sleep(300 * time.Millisecond)
	sc.armed.Store(true)
	<-sc.waiting // the fetch is polling for data
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("waiting fetch: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("shutdown took %v: the waiting fetch held it", d)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("HTTP still served after shutdown")
	}
}

func TestListenValidates(t *testing.T) {
	e := fetchkit.NewEnv(t)
	if _, err := Listen(ServerOptions{HTTPAddr: "127.0.0.1:0"}); err == nil {
		t.Fatal("no catalog accepted")
	}
	if _, err := Listen(ServerOptions{Catalog: e.Cat}); err == nil {
		t.Fatal("no listener accepted")
	}
	if _, err := Listen(ServerOptions{Catalog: e.Cat, KafkaAddr: "127.0.0.1:0", AdvertisedAddr: "nohostport"}); err == nil {
		t.Fatal("bad advertised address accepted")
	}
	srv, err := Listen(ServerOptions{Catalog: e.Cat, KafkaAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if srv.HTTPAddr() != nil || srv.KafkaAddr() == nil {
		t.Fatal("addresses")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

// signalingCatalog reports, once armed, that a partition's offsets were
// read (a fetch polling at the log end).
type signalingCatalog struct {
	fetchcache.Catalog
	armed   atomic.Bool
	waiting chan struct{}
}

func (c *signalingCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return signalingPartition{part, c}, nil
}

type signalingPartition struct {
	fetchcache.Partition
	c *signalingCatalog
}

func (p signalingPartition) Offsets(ctx context.Context) (fetchcache.Offsets, error) {
	if p.c.armed.Load() {
		select {
		case p.c.waiting <- struct{}{}:
		default:
		}
	}
	return p.Partition.Offsets(ctx)
}
