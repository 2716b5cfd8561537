package localtier

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// A flushed segment in which a batch's size field reads 2 and byte 16 reads
// 0 (a legacy message shorter than the smallest one, 14 bytes; Iter refuses
// it as corrupt) made ScanBatchHeaders hand fn a 14-byte "header", and the
// first accessor (IsLegacy reads byte 16) panicked: the compactor's producer
// scan would crash the process instead of reporting the corruption.
func TestReviewScanBatchHeadersShortLegacyLength(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	mem := vfs.NewMem()
	dir := "/data/t-0"
	cfg := testConfig(t, map[string]string{"index.interval.bytes": "1"})
	l, _ := openTestLog(t, mem, dir, cfg, clock, 0)
	var second int64
	for i := 0; i < 3; i++ {
		if i == 1 {
			second = l.Size()
		}
		mustAppend(t, l, batchOf(t, 2, 10, clock.t.UnixMilli(), codec.None))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenFile(SegmentPath(dir, 0, LogSuffix), os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], 2)
	if _, err := f.WriteAt(size[:], second+8); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0}, second+16); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l, _ = openTestLog(t, mem, dir, cfg, clock, end)
	defer l.Close()
	seg := l.CleanerView().Segments[0]
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("ScanBatchHeaders panicked: %v", r)
		}
	}()
	err = l.ScanBatchHeaders(seg, func(_ int64, _ int, h record.Batch) error {
		_ = h.IsLegacy()
		return nil
	})
	if !record.IsCorrupt(err) {
		t.Fatalf("err = %v, want a corrupt batch error", err)
	}
}
