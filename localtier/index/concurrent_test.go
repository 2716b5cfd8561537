package index

import (
	"sync"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

// TestConcurrentLookupAppend runs lookups while entries are appended; run
// with -race to check the locking.
func TestConcurrentLookupAppend(t *testing.T) {
	x, err := OpenOffsetIndex(vfs.NewMem(), "/c.index", 0, 1<<16)
	must(t, err)
	ti, err := OpenTimeIndex(vfs.NewMem(), "/c.timeindex", 0, 1<<16)
	must(t, err)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				e := x.Lookup(500)
				if e.Offset > 500 || (e.Offset != 0 && int64(e.Position) != 10*e.Offset) {
					t.Errorf("Lookup(500) = %v", e)
					return
				}
				if te := ti.Lookup(5000); te.Timestamp > 5000 {
					t.Errorf("time Lookup(5000) = %v", te)
					return
				}
			}
		})
	}
	for i := int64(1); i <= 1000; i++ {
		must(t, x.Append(i, int32(10*i)))
		must(t, ti.MaybeAppend(10*i, i))
	}
	close(done)
	wg.Wait()
	must(t, x.Close())
	must(t, ti.Close())
}
