package compactor

import (
	"errors"
	"fmt"
	"math/bits"
)

// BytesPerEntry is the memory one offset map slot takes, whatever the
// key's length: a 128-bit fingerprint and an offset.
const BytesPerEntry = 24

// LoadFactor is the share of slots the map fills before it reports full
// (Kafka's log.cleaner.io.buffer.load.factor default).
const LoadFactor = 0.9

// ErrMapFull is returned by Put when the map holds its maximum entries.
var ErrMapFull = errors.New("offset map is full")

// OffsetMap maps record keys to the latest offset seen for them, in one
// block of memory of a fixed maximum size (allocated as far as the dirty
// regions cleaned so far needed it, never beyond): open addressing with linear
// probing over slots of three words (fingerprint high, fingerprint low,
// offset+1; 0 marks a free slot). Keys are never stored; a fingerprint is
// the AES-CMAC of the key under a random key drawn at every Reset (see
// keyHasher). Not safe for concurrent use.
type OffsetMap struct {
	slots    []uint64 // allocated on demand, never more than maxSlots
	maxSlots uint64
	n        uint64 // slots in use this run (at most len(slots)/3)
	dirty    int    // words of slots possibly non-zero
	entries  int
	max      int // entries allowed: n * LoadFactor
	latest   int64
	h        *keyHasher
}

// NewOffsetMap makes a map of at most memory bytes (rounded down to whole
// slots). Call Reset or ResetFor before each run.
func NewOffsetMap(memory int64) (*OffsetMap, error) {
	n := memory / BytesPerEntry
	if n < 2 {
		return nil, fmt.Errorf("offset map: %d bytes hold fewer than 2 entries of %d bytes", memory, BytesPerEntry)
	}
	m := &OffsetMap{maxSlots: uint64(n)}
	if err := m.ResetFor(0); err != nil {
		return nil, err
	}
	return m, nil
}

// Reset empties the map, using all of its memory, and draws a new
// fingerprint key.
func (m *OffsetMap) Reset() error { return m.ResetFor(-1) }

// ResetFor empties the map and draws a new fingerprint key, like Reset, but
// uses only as many slots as keys (an upper bound; < 0 means unknown) need
// at the load factor. A dirty region much smaller than the buffer then
// touches (and clears) only a small, cache-friendly part of it; the memory
// stays allocated for larger runs.
func (m *OffsetMap) ResetFor(keys int64) error {
	h, err := newKeyHasher()
	if err != nil {
		return err
	}
	m.h = h
	m.n = m.maxSlots
	if keys >= 0 {
		if want := uint64(float64(keys)/LoadFactor) + 64; want < m.n {
			m.n = want
		}
	}
	m.max = max(int(float64(m.n)*LoadFactor), 1)
	if uint64(len(m.slots)) < 3*m.n {
		// Grow (within the configured memory) to what this run needs;
		// fresh memory is already zero.
		m.slots = nil
		m.slots = make([]uint64, 3*m.n)
	} else {
		clear(m.slots[:m.dirty])
	}
	m.dirty = int(3 * m.n)
	m.entries, m.latest = 0, -1
	return nil
}

// Slots is the number of slots in use; MaxEntries the entries they accept.
func (m *OffsetMap) Slots() int      { return int(m.n) }
func (m *OffsetMap) MaxEntries() int { return m.max }

// Size is the number of distinct keys held.
func (m *OffsetMap) Size() int { return m.entries }

// Utilization is Size over Slots (at most LoadFactor).
func (m *OffsetMap) Utilization() float64 { return float64(m.entries) / float64(m.n) }

// MemoryBytes is the memory the map may take (all slots).
func (m *OffsetMap) MemoryBytes() int64 { return int64(m.maxSlots) * BytesPerEntry }

// LatestOffset is the largest offset put (or set with SetLatestOffset), -1
// when none.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// SetLatestOffset records that the map covers the log up to offset.
func (m *OffsetMap) SetLatestOffset(offset int64) {
	if offset > m.latest {
		m.latest = offset
	}
}

// find returns the slot holding the fingerprint, or the free slot where it
// would go.
func (m *OffsetMap) find(h0, h1 uint64) (uint64, bool) {
	i, _ := bits.Mul64(h0, m.n)
	for {
		s := m.slots[3*i : 3*i+3 : 3*i+3]
		if s[2] == 0 {
			return i, false
		}
		if s[0] == h0 && s[1] == h1 {
			return i, true
		}
		i++
		if i == m.n {
			i = 0
		}
	}
}

// Put records offset as the latest offset of key. It returns ErrMapFull
// when key is new and the map is at MaxEntries.
func (m *OffsetMap) Put(key []byte, offset int64) error {
	h0, h1 := m.h.sum(key)
	i, ok := m.find(h0, h1)
	if !ok {
		if m.entries >= m.max {
			return ErrMapFull
		}
		m.entries++
		m.slots[3*i], m.slots[3*i+1] = h0, h1
	}
	m.slots[3*i+2] = uint64(offset) + 1
	if offset > m.latest {
		m.latest = offset
	}
	return nil
}

// Get returns the latest offset of key, or -1 if the map does not hold it.
func (m *OffsetMap) Get(key []byte) int64 {
	h0, h1 := m.h.sum(key)
	i, ok := m.find(h0, h1)
	if !ok {
		return -1
	}
	return int64(m.slots[3*i+2] - 1)
}
