package kafkasrv

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

const ts0 = fetchkit.Ts0

func TestKafkaProtocolErrors(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	addr := startKafka(t, e.Cat, KafkaOptions{MaxRequestBytes: 4096})

	t.Run("api_versions_kip511", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(apiVersionsKey, 9, 11, true, []byte{1, 1, 0}) // a future version's body
		body, err := rc.Recv(11)
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(KafkaAPIVersions) {
			t.Fatalf("KIP-511 answer %+v", resp)
		}
	})
	t.Run("api_versions_all", func(t *testing.T) {
		for v := int16(0); v <= 3; v++ {
			rc := fetchkit.DialRaw(t, addr)
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "test", "1"
			rc.Send(apiVersionsKey, v, 5, v >= 3, req.AppendTo(nil))
			body, err := rc.Recv(5) // header v0 even for v3
			if err != nil {
				t.Fatal(err)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = v
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) != len(KafkaAPIVersions) {
				t.Fatalf("v%d: %+v %v", v, resp, err)
			}
		}
	})
	closed := func(t *testing.T, rc *fetchkit.RawConn) {
		t.Helper()
		if _, err := rc.Recv(0); err == nil {
			t.Fatal("connection still open after a bad request")
		}
	}
	t.Run("unknown_api_key", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(9999, 0, 8, false, nil)
		closed(t, rc)
	})
	t.Run("malformed_body", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(fetchKey, 11, 9, false, []byte{0, 0, 0})
		closed(t, rc)
	})
	t.Run("frame_too_large", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(metadataKey, 1, 10, false, bytes.Repeat([]byte{0}, 5000))
		closed(t, rc)
	})
	t.Run("incremental_session", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch = 77, 3
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
			t.Fatalf("incremental fetch of an unknown session: %+v", resp)
		}
	})
	t.Run("produce_acks0_refused_closes", func(t *testing.T) {
		// Kafka answers no acks=0 Produce, and closes the connection when
		// any partition failed, the only way such a producer learns of it
		// (KafkaApis.handleProduceRequest). Every partition is refused
		// here: a connection left open lets an acks=0 producer send into
		// the void for ever without an error.
		rc := fetchkit.DialRaw(t, addr)
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks = 7, 0
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "t"
		pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
		p.Topics = append(p.Topics, pt)
		rc.Send(produceKey, 7, 12, false, p.AppendTo(nil))
		_ = rc.C.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := rc.Recv(12)
		if err == nil || isTimeout(err) {
			t.Fatalf("acks=0 produce refused: connection still open (read: %v)", err)
		}
	})
	t.Run("produce_acks0_empty_no_response", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks = 7, 0
		rc.Send(produceKey, 7, 12, false, p.AppendTo(nil))
		m := kmsg.NewPtrMetadataRequest()
		m.Version = 1
		rc.Send(metadataKey, 1, 13, false, m.AppendTo(nil))
		if _, err := rc.Recv(13); err != nil { // the next response is Metadata's
			t.Fatal(err)
		}
	})
}

func TestKafkaOverloadThrottles(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("busy", 1, nil)
	e.Produce(e.Log("busy", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(5, ts0, "busy"))
	m := fetchcache.NewServeMetrics(nil)
	addr := startKafka(t, fetchkit.OverloadedCatalog{Catalog: e.Cat}, KafkaOptions{Metrics: m})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()

	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "busy"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if resp.ThrottleMillis < 1500 || p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 5 {
		t.Fatalf("overloaded fetch: throttle %d, partition %+v", resp.ThrottleMillis, p)
	}

	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "busy"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = ts0
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if lresp.ThrottleMillis < 700 || lresp.Topics[0].Partitions[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("overloaded list offsets: %+v", lresp)
	}
	// The server counts a request after writing its response, so the client
	// can see the answer a moment before the counter moves.
	deadline := time.Now().Add(5 * time.Second)
	got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeThrottled))
	for got < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		got = fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeThrottled))
	}
	if got != 2 {
		t.Fatalf("throttled kafka requests %v, want 2", got)
	}
}

func startKafka(t testing.TB, cat fetchcache.Catalog, o KafkaOptions) string {
	t.Helper()
	_, addr := startKafkaServer(t, cat, o)
	return addr
}

// startKafkaServer is startKafka that also returns the server.
func startKafkaServer(t testing.TB, cat fetchcache.Catalog, o KafkaOptions) (*KafkaServer, string) {
	t.Helper()
	o.Catalog = cat
	if o.MaxFetchWait == 0 {
		o.MaxFetchWait = 200e6 // keep waits at the log end short in tests
	}
	if o.FetchPollInterval == 0 {
		o.FetchPollInterval = 5e6
	}
	s, err := NewKafkaServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kafka server: %v", err)
		}
	})
	return s, ln.Addr().String()
}
