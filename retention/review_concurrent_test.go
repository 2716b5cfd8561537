package retention

import (
	"sync"
	"testing"
)

// TestReviewConcurrentCheckpoints: serve runs the local retention loop and
// the remote retention loop side by side (same initial delay, same
// interval); each ends a pass that deleted something with
// LogDir.Checkpoint, which holds the dir's read lock only and writes
// through one fixed temporary name (<checkpoint>.tmp). Two at once truncate
// and rename each other's temporary file: one pass fails with a rename
// error, and the file renamed into place may hold one writer's bytes over
// the other's.
func TestReviewConcurrentCheckpoints(t *testing.T) {
	d := openDir(t, t.TempDir())
	defer d.Close()
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, err := d.CreateTopic(name, 4, nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2000)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if err := d.Checkpoint(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	var first error
	for err := range errs {
		if first == nil {
			first = err
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of 1000 concurrent checkpoints failed; first: %v", n, first)
	}
}
