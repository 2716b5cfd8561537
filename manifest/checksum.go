package manifest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"strings"
)

// Checksum algorithms.
const (
	// CRC32C is CRC-32 with the Castagnoli polynomial (as Kafka's batches and
	// S3's x-amz-checksum-crc32c): cheap, enough to catch corruption.
	CRC32C = "crc32c"
	// SHA256 is used for sub-manifests, whose keys are content-addressed.
	SHA256 = "sha256"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is "<algorithm>:<lowercase hex digest>": "crc32c:" and 8 hex
// digits, or "sha256:" and 64.
type Checksum string

// Algorithm is the part before the colon.
func (c Checksum) Algorithm() string {
	alg, _, _ := strings.Cut(string(c), ":")
	return alg
}

// Validate checks the form of c.
func (c Checksum) Validate() error {
	alg, digest, ok := strings.Cut(string(c), ":")
	var want int
	switch alg {
	case CRC32C:
		want = 8
	case SHA256:
		want = 64
	default:
		return fmt.Errorf("checksum %q: unknown algorithm (want %s or %s)", truncate(string(c)), CRC32C, SHA256)
	}
	if !ok || len(digest) != want || !isLowerHex(digest) {
		return fmt.Errorf("checksum %q: want %s: and %d lowercase hex digits", truncate(string(c)), alg, want)
	}
	return nil
}

// ChecksumOf returns the checksum of data under algorithm alg.
func ChecksumOf(alg string, data []byte) (Checksum, error) {
	d, err := NewDigest(alg)
	if err != nil {
		return "", err
	}
	_, _ = d.Write(data)
	return d.Checksum(), nil
}

// Digest computes a Checksum over bytes written to it, so an uploader can
// checksum a segment while streaming it from disk.
type Digest struct {
	alg string
	h   hash.Hash
}

// NewDigest returns a Digest for alg (CRC32C or SHA256).
func NewDigest(alg string) (*Digest, error) {
	switch alg {
	case CRC32C:
		return &Digest{alg: alg, h: crc32.New(castagnoli)}, nil
	case SHA256:
		return &Digest{alg: alg, h: sha256.New()}, nil
	}
	return nil, fmt.Errorf("unknown checksum algorithm %q", alg)
}

// Write adds p to the digest; it never fails.
func (d *Digest) Write(p []byte) (int, error) { return d.h.Write(p) }

// Checksum of everything written so far.
func (d *Digest) Checksum() Checksum {
	return Checksum(d.alg + ":" + hex.EncodeToString(d.h.Sum(nil)))
}

// CRC32CValue returns the CRC-32C as a number (for S3's
// x-amz-checksum-crc32c, which is its big-endian bytes in base64); ok is
// false for other algorithms.
func (c Checksum) CRC32CValue() (v uint32, ok bool) {
	if c.Algorithm() != CRC32C || c.Validate() != nil {
		return 0, false
	}
	b, _ := hex.DecodeString(string(c[len(CRC32C)+1:]))
	return binary.BigEndian.Uint32(b), true
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// CRC32CChecksum formats a CRC-32C value as a Checksum.
func CRC32CChecksum(v uint32) Checksum {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return Checksum(CRC32C + ":" + hex.EncodeToString(b[:]))
}

// SHA256Checksum formats a SHA-256 sum as a Checksum.
func SHA256Checksum(sum [32]byte) Checksum {
	return Checksum(SHA256 + ":" + hex.EncodeToString(sum[:]))
}
