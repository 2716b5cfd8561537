package compactor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// keyHasher computes AES-CMAC (RFC 4493) of record keys under a key drawn
// at random for every cleaning run.
//
// Why CMAC: the offset map stores only a fingerprint of each key, so two
// keys with the same fingerprint are one key to the cleaner, which would
// then drop the older one's value. Kafka fingerprints with unkeyed MD5, so a
// producer can craft colliding keys and make the cleaner delete another
// key's latest value. A pseudo-random function under a secret, per-run key
// leaves a producer nothing to aim at: CMAC is a PRF as long as AES is a
// block cipher, gives 128 bits (accidental collisions: about n²/2¹²⁹, 10⁻²⁶
// for a billion keys), needs only the standard library, and runs on AES-NI
// at a few nanoseconds per 16 bytes. hash/maphash was the other
// dependency-free candidate, but it is a hash-flooding defence, not a PRF
// (two seeds give 128 bits, yet nothing rules out seed-independent
// collisions), and SipHash-128 would be a hand-written primitive without a
// standard-library reference.
type keyHasher struct {
	block  cipher.Block
	k1, k2 [16]byte // CMAC subkeys
	x, y   [16]byte // scratch
}

func newKeyHasher() (*keyHasher, error) {
	var key [16]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("offset map key: %w", err)
	}
	return newKeyHasherWithKey(key[:])
}

func newKeyHasherWithKey(key []byte) (*keyHasher, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("offset map key: %w", err)
	}
	h := &keyHasher{block: b}
	var l [16]byte
	b.Encrypt(l[:], l[:])
	h.k1 = dbl(l)
	h.k2 = dbl(h.k1)
	return h, nil
}

// dbl is doubling in GF(2^128) as RFC 4493 generates subkeys.
func dbl(in [16]byte) [16]byte {
	var out [16]byte
	hi := binary.BigEndian.Uint64(in[:8])
	lo := binary.BigEndian.Uint64(in[8:])
	carry := hi >> 63
	hi = hi<<1 | lo>>63
	lo <<= 1
	lo ^= 0x87 * carry
	binary.BigEndian.PutUint64(out[:8], hi)
	binary.BigEndian.PutUint64(out[8:], lo)
	return out
}

func xor16(dst *[16]byte, a []byte) {
	d0 := binary.LittleEndian.Uint64(dst[:8]) ^ binary.LittleEndian.Uint64(a[:8])
	d1 := binary.LittleEndian.Uint64(dst[8:]) ^ binary.LittleEndian.Uint64(a[8:16])
	binary.LittleEndian.PutUint64(dst[:8], d0)
	binary.LittleEndian.PutUint64(dst[8:], d1)
}

// sum returns the 16-byte CMAC tag of msg as two words.
func (h *keyHasher) sum(msg []byte) (uint64, uint64) {
	x := &h.x
	*x = [16]byte{}
	for len(msg) > 16 {
		xor16(x, msg)
		h.block.Encrypt(x[:], x[:])
		msg = msg[16:]
	}
	if len(msg) == 16 {
		xor16(x, msg)
		xor16(x, h.k1[:])
	} else {
		last := &h.y
		*last = [16]byte{}
		copy(last[:], msg)
		last[len(msg)] = 0x80
		xor16(x, last[:])
		xor16(x, h.k2[:])
	}
	h.block.Encrypt(x[:], x[:])
	return binary.BigEndian.Uint64(x[:8]), binary.BigEndian.Uint64(x[8:])
}
