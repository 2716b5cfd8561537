package chunkcache

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// A range that ends inside a chunk being loaded is answered once its bytes
// of that chunk are in, not once the whole chunk is: the GET of a 1 MiB
// chunk gives 300 KiB and stalls; a read of [100 KiB, 250 KiB) returns
// meanwhile, a read of the whole chunk waits for the rest. One GET in all,
// and the chunk ends cached whole.
func TestRangeAnsweredFromChunkPrefix(t *testing.T) {
	mem := objstore.NewMemory()
	want := putObject(t, mem, "seg", 1<<20)
	sb := &stallingBodies{BucketReader: mem, after: 300 << 10, release: make(chan struct{})}
	cb := newCounting(sb)
	c := mustCache(t, cb, CacheOptions{MemoryBytes: 8 << 20, ChunkBytes: 1 << 20})
	var once sync.Once
	goOn := func() { once.Do(func() { close(sb.release) }) }
	t.Cleanup(goOn) // a failed check does not leave the GET stalled

	// read reads a range in its own goroutine (t.Fatal belongs to the
	// test's): the bytes, or nil and the error logged.
	read := func(off, n int64) <-chan []byte {
		out := make(chan []byte, 1)
		go func() {
			rc, err := c.GetRange(context.Background(), "seg", off, n)
			if err != nil {
				t.Errorf("get range [%d,+%d): %v", off, n, err)
				out <- nil
				return
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Errorf("read [%d,+%d): %v", off, n, err)
			}
			out <- b
		}()
		return out
	}
	whole := read(0, 1<<20)
	got := read(100<<10, 150<<10)
	select {
	case b := <-got:
		if !bytes.Equal(b, want[100<<10:250<<10]) {
			t.Fatal("prefix read returned other bytes than the object's")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a range within the bytes already in waited for the whole chunk")
	}
	select {
	case <-whole:
		t.Fatal("a read of the whole chunk returned before its bytes were in")
	case <-time.After(50 * time.Millisecond):
	}
	goOn()
	if b := <-whole; !bytes.Equal(b, want) {
		t.Fatal("whole read returned other bytes than the object's")
	}
	waitIdle(t, c)
	if b := readAll(t, c, "seg", 0, 1<<20); !bytes.Equal(b, want) {
		t.Fatal("cached read returned other bytes than the object's")
	}
	if calls := cb.takeRanges(); len(calls) != 1 {
		t.Fatalf("%d GETs, want 1: %v", len(calls), calls)
	}
}
