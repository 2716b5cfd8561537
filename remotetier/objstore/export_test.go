package objstore

import "testing"

// UseOpenat2 makes the filesystem backend resolve keys with openat2 (on)
// or with the portable component walk (off) until the test ends.
func UseOpenat2(t testing.TB, on bool) {
	prev := openat2Usable.Load()
	openat2Usable.Store(on && haveOpenat2)
	t.Cleanup(func() { openat2Usable.Store(prev) })
}

// HaveOpenat2 reports whether this platform has openat2.
const HaveOpenat2 = haveOpenat2
