package codec

import (
	"errors"
	"testing"
)

// Kafka's KafkaLZ4BlockInputStream refuses a frame whose FLG does not set
// block independence (bit 5): "Dependent block stream is unsupported". Such
// a frame decoded here, so a batch Kafka refuses, and a Java consumer could
// not read, was accepted.
func TestReviewLZ4DependentBlocksRefused(t *testing.T) {
	src := recordLike(100<<10, 1)
	comp, err := Compress(LZ4, nil, src)
	if err != nil {
		t.Fatal(err)
	}
	comp[4] &^= 1 << 5 // FLG: blocks depend on the previous ones
	comp[6] = lz4HeaderChecksum(comp[4:6])
	if _, err := Decompress(LZ4, nil, comp, len(src)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("frame with FLG %#x (dependent blocks): err = %v, want ErrCorrupt", comp[4], err)
	}
}
