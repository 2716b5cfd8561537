package codec

import (
	"testing"
	"time"
)

func TestTmpTime(t *testing.T) {
	z := make([]byte, 100<<20)
	for _, c := range allCodecs[1:] {
		s := time.Now()
		Compress(c, nil, z)
		t.Log(c, time.Since(s))
	}
}
