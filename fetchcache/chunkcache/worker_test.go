package chunkcache

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

// goid is the calling goroutine's id, from its stack trace's header.
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// Background work after a worker went idle runs on that worker, which
// keeps the stack it grew (loads run the S3 client's deep call stacks),
// instead of on a new goroutine; Close ends the idle workers (TestMain's
// leak check).
func TestBackgroundWorkReusesWorker(t *testing.T) {
	c := mustCache(t, objstore.NewMemory(), CacheOptions{MemoryBytes: 1 << 20, ChunkBytes: 1 << 16})
	ids := make(chan uint64, 1)
	run := func() { ids <- goid() }
	if !c.goBackground(run) {
		t.Fatal("goBackground refused work before Close")
	}
	first := <-ids
	reused := false
	// The worker takes new work once it is back waiting for it.
	for range 200 {
		time.Sleep(time.Millisecond)
		c.goBackground(run)
		if <-ids == first {
			reused = true
			break
		}
	}
	if !reused {
		t.Fatal("every piece of background work ran on a new goroutine; want the idle worker to take it")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.goBackground(run) {
		t.Fatal("goBackground took work after Close")
	}
}
