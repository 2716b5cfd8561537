package kafkasrv

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// apiVersionsRoundTrip sends ApiVersions v0 on rc and fails unless it is
// answered: the connection is served.
func apiVersionsRoundTrip(t *testing.T, rc *fetchkit.RawConn, corr int32) {
	t.Helper()
	rc.Send(apiVersionsKey, 0, corr, false, nil)
	if _, err := rc.Recv(corr); err != nil {
		t.Fatalf("ApiVersions not answered: %v", err)
	}
}

// counterIs fails unless c is want. The server counts a closed or refused
// connection before closing it, so a client that saw the close sees the
// count.
func counterIs(t *testing.T, c prometheus.Counter, want float64) {
	t.Helper()
	if got := fetchkit.CounterValue(t, c); got != want {
		t.Fatalf("counter %v, want %v", got, want)
	}
}

func TestKafkaConnectionTimeouts(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	long := time.Hour
	tests := []struct {
		name   string
		o      KafkaOptions
		send   func(t *testing.T, rc *fetchkit.RawConn)
		reason string
	}{
		{
			name: "idle_before_any_request",
			o:    KafkaOptions{IdleTimeout: 50 * time.Millisecond},
			send: func(*testing.T, *fetchkit.RawConn) {},
			// Kafka's connections.max.idle.ms
			reason: fetchcache.ClosedIdleTimeout,
		},
		{
			name:   "idle_after_a_request",
			o:      KafkaOptions{IdleTimeout: 50 * time.Millisecond},
			send:   func(t *testing.T, rc *fetchkit.RawConn) { apiVersionsRoundTrip(t, rc, 1) },
			reason: fetchcache.ClosedIdleTimeout,
		},
		{
			name: "half_sent_frame",
			o:    KafkaOptions{IdleTimeout: long, RequestReadTimeout: 50 * time.Millisecond},
			send: func(t *testing.T, rc *fetchkit.RawConn) {
				// A frame declaring 900 KB of which 10 bytes arrive.
				b := binary.BigEndian.AppendUint32(nil, 900<<10)
				if _, err := rc.C.Write(append(b, make([]byte, 10)...)); err != nil {
					t.Fatal(err)
				}
			},
			reason: fetchcache.ClosedRequestReadTimeout,
		},
		{
			name: "half_sent_header",
			o:    KafkaOptions{IdleTimeout: long, RequestReadTimeout: 50 * time.Millisecond},
			send: func(t *testing.T, rc *fetchkit.RawConn) {
				if _, err := rc.C.Write([]byte{0, 0}); err != nil {
					t.Fatal(err)
				}
			},
			reason: fetchcache.ClosedRequestReadTimeout,
		},
		{
			name: "sasl_never_finished",
			o:    KafkaOptions{IdleTimeout: long, RequestReadTimeout: long, SASLTimeout: 50 * time.Millisecond, Auth: z},
			// ApiVersions is allowed before SASL, and answered; the
			// connection still has to authenticate in time.
			send:   func(t *testing.T, rc *fetchkit.RawConn) { apiVersionsRoundTrip(t, rc, 1) },
			reason: fetchcache.ClosedSASLTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fetchcache.NewServeMetrics(nil)
			tt.o.Metrics = m
			addr := startKafka(t, e.Cat, tt.o)
			rc := fetchkit.DialRaw(t, addr)
			tt.send(t, rc)
			fetchkit.ClosedWithin(t, rc.C, 5*time.Second)
			counterIs(t, m.Closed(fetchcache.InterfaceKafka, tt.reason), 1)
		})
	}
}

func TestKafkaConnectionCaps(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	tests := []struct {
		name   string
		o      KafkaOptions
		reason string
	}{
		{"max_connections", KafkaOptions{MaxConnections: 2, MaxConnectionsPerIP: 10}, fetchcache.RefusedMaxConnections},
		{"max_connections_per_ip", KafkaOptions{MaxConnections: 10, MaxConnectionsPerIP: 2}, fetchcache.RefusedMaxConnectionsPerIP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fetchcache.NewServeMetrics(nil)
			tt.o.Metrics = m
			addr := startKafka(t, e.Cat, tt.o)
			a, b := fetchkit.DialRaw(t, addr), fetchkit.DialRaw(t, addr)
			apiVersionsRoundTrip(t, a, 1)
			apiVersionsRoundTrip(t, b, 1)
			// The third is closed at once, before it sends anything.
			fetchkit.ClosedWithin(t, fetchkit.DialRaw(t, addr).C, 5*time.Second)
			counterIs(t, m.Refused(fetchcache.InterfaceKafka, tt.reason), 1)

			// A closed connection frees its place: a new one is served once
			// the server has seen the close.
			a.C.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				c := fetchkit.DialRaw(t, addr)
				c.Send(apiVersionsKey, 0, 2, false, nil)
				if _, err := c.Recv(2); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no connection served after one of the capped ones closed")
				}
			}
		})
	}
}

// TestKafkaUnservedVersionsClose: every request below Kafka 4.0's version
// floors (KIP-896), above what is served, or of an API not served closes
// the connection without an answer, as a Kafka 4 broker does; none gets an
// empty body a client would take for success.
func TestKafkaUnservedVersionsClose(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	m := fetchcache.NewServeMetrics(nil)
	addr := startKafka(t, e.Cat, KafkaOptions{Metrics: m})
	fetchReq := func(v int16) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.MaxWaitMillis, r.MaxBytes = v, 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
	at := func(r kmsg.Request, v int16) kmsg.Request { r.SetVersion(v); return r }
	tests := []struct {
		name string
		req  kmsg.Request
	}{
		{"fetch_v0", fetchReq(0)},
		{"fetch_v1", fetchReq(1)},
		{"fetch_v2", fetchReq(2)},
		{"fetch_v3", fetchReq(3)},
		{"fetch_v13_topic_ids", fetchReq(13)},
		{"list_offsets_v0", at(kmsg.NewPtrListOffsetsRequest(), 0)},
		{"list_offsets_v8", at(kmsg.NewPtrListOffsetsRequest(), 8)},
		{"produce_v0", at(kmsg.NewPtrProduceRequest(), 0)},
		{"produce_v2", at(kmsg.NewPtrProduceRequest(), 2)},
		{"metadata_v13", at(kmsg.NewPtrMetadataRequest(), 13)},
		{"offset_fetch_v0", at(kmsg.NewPtrOffsetFetchRequest(), 0)},
		{"offset_fetch_v10_topic_ids", at(kmsg.NewPtrOffsetFetchRequest(), 10)},
		{"offset_commit_v1", at(kmsg.NewPtrOffsetCommitRequest(), 1)},
		{"offset_commit_v10_topic_ids", at(kmsg.NewPtrOffsetCommitRequest(), 10)},
		{"join_group_v0", at(kmsg.NewPtrJoinGroupRequest(), 0)},
		{"join_group_v1", at(kmsg.NewPtrJoinGroupRequest(), 1)},
		{"describe_groups_v6", at(kmsg.NewPtrDescribeGroupsRequest(), 6)},
		{"create_topics", at(kmsg.NewPtrCreateTopicsRequest(), 2)},
		{"sasl_handshake_without_sasl", at(kmsg.NewPtrSASLHandshakeRequest(), 1)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := fetchkit.DialRaw(t, addr)
			corr := int32(100 + i)
			rc.Send(tt.req.Key(), tt.req.GetVersion(), corr, tt.req.IsFlexible(), tt.req.AppendTo(nil))
			if body, err := rc.Recv(corr); err == nil {
				t.Fatalf("%s v%d answered with %d bytes; want the connection closed", kmsg.NameForKey(tt.req.Key()), tt.req.GetVersion(), len(body))
			}
			fetchkit.ClosedWithin(t, rc.C, 5*time.Second)
		})
	}
	counterIs(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeUnsupportedVersion), float64(len(tests)))
	// The served versions next to them still work.
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V2_1_0()))
	if _, err := fetchReq(4).(*kmsg.FetchRequest).RequestWith(context.Background(), cl); err != nil {
		t.Fatalf("Fetch v4: %v", err)
	}
}

// emfileListener fails its first n Accepts as a process out of descriptors
// does, then accepts.
type emfileListener struct {
	net.Listener
	n atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An Accept that fails (EMFILE: a client filled the descriptor table) does
// not stop the listener: it waits and accepts again, and is served. Before,
// any accept error but a timeout ended Serve, and with it the process.
func TestKafkaAcceptErrorsAreRetried(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	s, err := NewKafkaServer(KafkaOptions{Catalog: e.Cat})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: inner}
	ln.n.Store(5)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	rc := fetchkit.DialRaw(t, inner.Addr().String())
	apiVersionsRoundTrip(t, rc, 1)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after accept errors and a cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop 10s after its context was cancelled")
	}
}
