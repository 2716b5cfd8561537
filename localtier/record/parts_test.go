package record

import (
	"bytes"
	"testing"
)

func TestCopyAt(t *testing.T) {
	parts := [][]byte{[]byte("abc"), {}, []byte("de"), []byte("fghij")}
	all := []byte("abcdefghij")
	for pos := 0; pos <= len(all); pos++ {
		for size := 0; size <= len(all)+2; size++ {
			dst := make([]byte, size)
			n := CopyAt(parts, pos, dst)
			want := all[pos:min(pos+size, len(all))]
			if n != len(want) || !bytes.Equal(dst[:n], want) {
				t.Fatalf("CopyAt(pos %d, %d bytes) = %d %q, want %q", pos, size, n, dst[:n], want)
			}
		}
	}
	if n := CopyAt(nil, 0, make([]byte, 4)); n != 0 {
		t.Fatalf("CopyAt of no parts copied %d", n)
	}
}
