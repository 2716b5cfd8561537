package codec

import (
	"fmt"
	"testing"
)

// Batch sizes: the 16 KiB batches `tiered produce` writes, and a 1 MiB
// batch (max.message.bytes).
var benchSizes = []int{16 << 10, 1 << 20}

func BenchmarkDecompress(b *testing.B) {
	for _, c := range allCodecs {
		for _, n := range benchSizes {
			src := recordLike(n, 11)
			comp, err := Compress(c, nil, src)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%dKiB", c, n>>10), func(b *testing.B) {
				dst := make([]byte, 0, n)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Decompress(c, dst[:0], comp, n); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(comp))/float64(n), "ratio")
			})
		}
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, c := range allCodecs {
		for _, n := range benchSizes {
			src := recordLike(n, 11)
			b.Run(fmt.Sprintf("%s/%dKiB", c, n>>10), func(b *testing.B) {
				dst := make([]byte, 0, 2*n)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Compress(c, dst[:0], src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
