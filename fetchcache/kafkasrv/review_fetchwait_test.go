package kafkasrv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestReviewFetchWaitsDespiteUnauthorizedPartition holds that a Fetch at
// the log end still waits its max wait for data when it also names a
// partition the principal may not read. Kafka sets the unauthorized
// partitions apart (answered TOPIC_AUTHORIZATION_FAILED with the rest) and
// waits for the others; answering at once made a consumer that keeps such
// a partition assigned (Java's poll() throws, the application goes on
// polling) fetch in a busy loop, thousands of requests a second.
func TestReviewFetchWaitsDespiteUnauthorizedPartition(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	const maxWait = 400 * time.Millisecond
	addr := startKafka(t, e.Cat, KafkaOptions{Auth: z, MaxFetchWait: maxWait})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: fetchkit.PassAlice}.AsMechanism()))
	// orders (alice may read it) at its log end, secret (she may not).
	req := fetchOf(int32(maxWait/time.Millisecond), 1<<20, "orders", int32(0), "secret", int32(0))
	req.Topics[0].Partitions[0].FetchOffset = 20
	req.MinBytes = 1
	start := time.Now()
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["orders"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("codes %v", codes)
	}
	if took < maxWait*3/4 {
		t.Fatalf("answered after %v, want about the max wait %v", took, maxWait)
	}
}

// TestReviewFetchWaitsDespiteUnknownPartition: likewise for a partition
// that does not exist (a deleted topic a consumer still has assigned):
// Kafka answers it UNKNOWN_TOPIC_OR_PARTITION from its metadata, apart
// from the reads, and waits for the others.
func TestReviewFetchWaitsDespiteUnknownPartition(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 1, nil)
	e.Produce(e.Log("orders", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(20, ts0, "o"))
	const maxWait = 400 * time.Millisecond
	addr := startKafka(t, e.Cat, KafkaOptions{MaxFetchWait: maxWait})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	req := fetchOf(int32(maxWait/time.Millisecond), 1<<20, "orders", int32(0), "gone", int32(0), "orders", int32(7))
	req.Topics[0].Partitions[0].FetchOffset = 20
	req.MinBytes = 1
	start := time.Now()
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	var codes []int16
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
		}
	}
	u := kerr.UnknownTopicOrPartition.Code
	if len(codes) != 3 || codes[0] != 0 || codes[1] != u || codes[2] != u {
		t.Fatalf("codes %v", codes)
	}
	if took < maxWait*3/4 {
		t.Fatalf("answered after %v, want about the max wait %v", took, maxWait)
	}
}
