package producer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := Murmur2([]byte(key)); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestKeyPartitionMatchesKgo routes keys through franz-go's Kafka-compatible
// partitioner (kgo.StickyKeyPartitioner(nil) = murmur2, as the Java
// producer) and requires the same partition for every key length and count.
func TestKeyPartitionMatchesKgo(t *testing.T) {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		key := make([]byte, rng.IntN(40))
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		if i%2 == 0 {
			key = []byte(fmt.Sprintf("user-%d", i))
		}
		n := 1 + rng.IntN(100)
		want := tp.Partition(&kgo.Record{Key: key}, n)
		if got := KeyPartition(key, n); int(got) != want {
			t.Fatalf("KeyPartition(%q, %d) = %d, kgo says %d", key, n, got, want)
		}
	}
}
