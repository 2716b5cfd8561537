package daemon

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"testing/iotest"
)

// touchPages writes a byte to every page of a block and then has the
// kernel fill it from /dev/zero; without /dev/zero, or when that read
// fails, the bytes written remain.
func TestTouchPages(t *testing.T) {
	page := os.Getpagesize()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip("no /dev/zero:", err)
	}
	defer zero.Close()
	b := bytes.Repeat([]byte{7}, 3*page+100)
	touchPages(b, zero)
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("block not filled with zeros from /dev/zero")
	}
	for _, tc := range []struct {
		name string
		bad  bool
	}{{"no /dev/zero", false}, {"read fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, 3*page+100)
			if tc.bad {
				touchPages(b, iotest.ErrReader(errors.New("boom")))
			} else {
				touchPages(b, nil)
			}
			for i := range b {
				if want := byte(0); i%page == 0 {
					want = 1
					if b[i] != want {
						t.Fatalf("page at %d not written", i)
					}
				} else if b[i] != want {
					t.Fatalf("byte %d is %d, want %d", i, b[i], want)
				}
			}
		})
	}
}
