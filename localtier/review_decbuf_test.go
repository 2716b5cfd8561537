package localtier

import (
	"runtime"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestAppendKeepsNoLargeDecodeBuffer: validating an append decompresses
// each batch into the log's decoder; a batch that decompresses to tens of
// MiB (a few KiB of zstd) left that buffer pinned by the partition's Log
// for as long as it stayed open, one such buffer per partition.
func TestAppendKeepsNoLargeDecodeBuffer(t *testing.T) {
	const big = 32 << 20
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, nil), clock, 0)
	defer l.Close()
	small := batchOf(t, 1, 10, clock.t.UnixMilli(), codec.Zstd)
	if _, err := l.Append(small); err != nil {
		t.Fatal(err)
	}
	data := batchOf(t, 1, big, clock.t.UnixMilli(), codec.Zstd)
	// Two collections empty the codec pools (sync.Pool keeps a victim
	// generation), whose encoders hold buffers of their own.
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := l.Append(data); err != nil {
		t.Fatal(err)
	}
	data = nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap after appending a batch of %d decompressed bytes: %+d bytes", big, grew)
	if grew > big/2 {
		t.Errorf("the open log holds %d more heap bytes after appending a %d-byte (decompressed) batch", grew, big)
	}
	runtime.KeepAlive(l)
}
