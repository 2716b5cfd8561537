package server

import (
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// secureServer is a Server with both listeners on loopback.
type secureServer struct {
	http, kafka string
	logs        *fetchkit.LogCapture
}

func startSecureServer(t testing.TB, cat fetchcache.Catalog, sec auth.Security) *secureServer {
	t.Helper()
	logs := &fetchkit.LogCapture{}
	s, err := Listen(ServerOptions{
		Catalog: cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Logger: logs.Logger(), Security: sec,
		Kafka: kafkasrv.KafkaOptions{MaxFetchWait: 200 * time.Millisecond, FetchPollInterval: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Serve)
	return &secureServer{http: s.HTTPAddr().String(), kafka: s.KafkaAddr().String(), logs: logs}
}

// startKafka serves cat on a Kafka listener alone, on a loopback port,
// until the test ends; o's Auth and Logger become the server's.
func startKafka(t testing.TB, cat fetchcache.Catalog, o kafkasrv.KafkaOptions) string {
	t.Helper()
	if o.MaxFetchWait == 0 {
		o.MaxFetchWait = 200 * time.Millisecond
	}
	if o.FetchPollInterval == 0 {
		o.FetchPollInterval = 5 * time.Millisecond
	}
	logger := o.Logger
	if logger == nil {
		logger = fetchkit.DiscardLogger()
	}
	s, err := Listen(ServerOptions{Catalog: cat, KafkaAddr: "127.0.0.1:0", Logger: logger, Security: auth.Security{Auth: o.Auth}, Kafka: o})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Serve)
	return s.KafkaAddr().String()
}
