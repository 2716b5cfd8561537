package remotetier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// BenchmarkSidecarPass measures one sidecar pass over a broker log dir of
// many partitions whose rolled segments are all committed already (the
// steady state between rolls): listing, high watermarks, reconciling
// against the cached manifests. ns/op is the time of one pass, B/op what a
// pass allocates, and retained-heap-MiB what the uploader keeps between
// passes.
func BenchmarkSidecarPass(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			data, _ := upEncodedBatches(b, 4) // offsets 0..11
			hws := map[checkpoint.TopicPartition]int64{}
			for p := 0; p < n; p++ {
				pd := filepath.Join(dir, fmt.Sprintf("t-%d", p))
				if err := os.MkdirAll(pd, 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(localtier.SegmentPath(pd, 0, localtier.LogSuffix), data, 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(localtier.SegmentPath(pd, 12, localtier.LogSuffix), nil, 0o644); err != nil {
					b.Fatal(err)
				}
				hws[checkpoint.TopicPartition{Topic: "t", Partition: int32(p)}] = 12
			}
			if err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, checkpoint.ReplicationOffsetFile), hws); err != nil {
				b.Fatal(err)
			}
			view, err := localtier.OpenBrokerView(vfs.Default, dir)
			if err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			u := upUploader(b, objstore.NewMemory(), NewBrokerSource(view, nil), Options{})
			ctx := context.Background()
			if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != n {
				b.Fatalf("first pass: %d segments, %v", rep.UploadedSegments, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				rep, err := u.RunOnce(ctx)
				if err != nil || rep.UploadedSegments != 0 {
					b.Fatalf("pass: %+v, %v", rep, err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(u)
			// What the uploader keeps between passes (cached manifests and
			// per-partition state; also the memory bucket's copy of each
			// partition's one small segment), in all and per partition.
			retained := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			b.ReportMetric(retained/(1<<20), "retained-heap-MiB")
			b.ReportMetric(retained/float64(n)/1024, "retained-KiB/partition")
		})
	}
}
