package compactor

import (
	"encoding/hex"
	"fmt"
	"testing"
)

// TestCMACVectors checks the key hasher against RFC 4493's examples.
func TestCMACVectors(t *testing.T) {
	key, _ := hex.DecodeString("2b7e151628aed2a6abf7158809cf4f3c")
	msg, _ := hex.DecodeString("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
	h, err := newKeyHasherWithKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "bb1d6929e95937287fa37d129b756746"},
		{16, "070a16b46b4d4144f79bdd9dd04a287c"},
		{40, "dfa66747de9ae63030ca32611497c827"},
		{64, "51f0bebf7e3b9d92fc49741779363cfe"},
	} {
		h0, h1 := h.sum(msg[:tc.n])
		if got := fmt.Sprintf("%016x%016x", h0, h1); got != tc.want {
			t.Errorf("CMAC of %d bytes = %s, want %s", tc.n, got, tc.want)
		}
	}
}

func TestOffsetMap(t *testing.T) {
	m, err := NewOffsetMap(24 * 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if m.Slots() != 1000 || m.MaxEntries() != 900 || m.MemoryBytes() != 24*1000 {
		t.Fatalf("slots %d, max entries %d, memory %d", m.Slots(), m.MaxEntries(), m.MemoryBytes())
	}
	for i := range 900 {
		if err := m.Put([]byte(fmt.Sprintf("key-%d", i)), int64(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Updating an existing key needs no new slot; a new key does.
	if err := m.Put([]byte("key-5"), 2000); err != nil {
		t.Fatal(err)
	}
	if err := m.Put([]byte("one too many"), 2001); err != ErrMapFull {
		t.Fatalf("put past the load factor: %v", err)
	}
	for i := range 900 {
		want := int64(i)
		if i == 5 {
			want = 2000
		}
		if got := m.Get([]byte(fmt.Sprintf("key-%d", i))); got != want {
			t.Fatalf("get key-%d = %d, want %d", i, got, want)
		}
	}
	if got := m.Get([]byte("absent")); got != -1 {
		t.Fatalf("absent key: %d", got)
	}
	// Keys of any length take one slot; empty and long keys are distinct.
	long := make([]byte, 10_000)
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	_ = m.Put([]byte{}, 1)
	_ = m.Put(long, 2)
	_ = m.Put(long[:16], 3)
	if m.Size() != 3 || m.Get([]byte{}) != 1 || m.Get(long) != 2 || m.Get(long[:16]) != 3 || m.Get(long[:15]) != -1 {
		t.Fatalf("size %d, gets %d %d %d", m.Size(), m.Get([]byte{}), m.Get(long), m.Get(long[:16]))
	}
	if m.LatestOffset() != 3 {
		t.Fatalf("latest offset %d", m.LatestOffset())
	}
}

// TestOffsetMapKeyedPerRun: the fingerprint key changes at every Reset, so
// fingerprints (and therefore any collision) do not carry over runs.
func TestOffsetMapKeyedPerRun(t *testing.T) {
	m, err := NewOffsetMap(24 * 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	a0, a1 := m.h.sum([]byte("user-1"))
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	b0, b1 := m.h.sum([]byte("user-1"))
	if a0 == b0 && a1 == b1 {
		t.Fatal("the same fingerprint after Reset: the key was not redrawn")
	}
}

func BenchmarkOffsetMap(b *testing.B) {
	m, err := NewOffsetMap(64 << 20)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Reset(); err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, 1<<20)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user-%012d", i))
	}
	b.ReportAllocs()
	b.ReportMetric(BytesPerEntry, "bytes/entry")
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		_ = m.Put(k, int64(i))
		_ = m.Get(k)
		i++
	}
}
