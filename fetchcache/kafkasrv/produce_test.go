package kafkasrv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

func TestKafkaProduceRefused(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("ro", 1, nil)
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ro", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("produce: %v, want POLICY_VIOLATION", err)
	}
	if l := e.Log("ro", 0); l.LogEndOffset() != 0 {
		t.Fatalf("produce wrote to the log: end %d", l.LogEndOffset())
	}
}
