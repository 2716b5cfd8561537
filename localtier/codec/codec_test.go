package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStringAndParse(t *testing.T) {
	for _, c := range allCodecs {
		got, err := Parse(c.String())
		if err != nil || got != c {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
	}
	if got, err := Parse("uncompressed"); err != nil || got != None {
		t.Errorf("Parse(uncompressed) = %v, %v", got, err)
	}
	for _, name := range []string{"producer", "GZIP", "", "brotli"} {
		if _, err := Parse(name); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("Parse(%q) error = %v, want ErrUnknownCodec", name, err)
		}
	}
	if _, err := Parse("producer"); err == nil || !strings.Contains(err.Error(), "producer's codec") {
		t.Errorf("Parse(producer) error %v does not explain itself", err)
	}
	if s := Codec(5).String(); s != "codec(5)" {
		t.Errorf("Codec(5).String() = %q", s)
	}
}

func TestRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 100, 32<<10 - 1, 32 << 10, 32<<10 + 1, 64<<10 + 1, 1 << 20}
	for _, c := range allCodecs {
		for _, n := range sizes {
			for _, kind := range []string{"records", "random"} {
				t.Run(fmt.Sprintf("%s/%d/%s", c, n, kind), func(t *testing.T) {
					src := recordLike(n, uint64(n))
					if kind == "random" {
						src = randomBytes(n, uint64(n))
					}
					prefix := []byte("prefix")
					comp, err := Compress(c, bytes.Clone(prefix), src)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.HasPrefix(comp, prefix) {
						t.Fatal("Compress did not keep dst")
					}
					comp = comp[len(prefix):]
					out, err := Decompress(c, bytes.Clone(prefix), comp, n)
					if err != nil {
						t.Fatalf("Decompress: %v", err)
					}
					if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], src) {
						t.Fatal("round trip changed the data")
					}
					if n > 0 {
						if _, err := Decompress(c, nil, comp, n-1); !errors.Is(err, ErrTooLarge) {
							t.Fatalf("maxOut %d for %d bytes: err = %v, want ErrTooLarge", n-1, n, err)
						}
					}
					// A second opinion: franz-go's decompressor reads what we write.
					// (Not for an empty xerial stream: franz-go reads a
					// header-only payload as a raw block, snappy-java as
					// an empty stream.)
					if c != None && !(c == Snappy && n == 0) {
						theirs, err := kgo.DefaultDecompressor().Decompress(comp, kgo.CompressionCodecType(c))
						if err != nil {
							t.Fatalf("franz-go Decompress: %v", err)
						}
						if !bytes.Equal(theirs, src) {
							t.Fatal("franz-go decoded different bytes")
						}
					}
				})
			}
		}
	}
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	s := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		b[i] = byte(s)
	}
	return b
}

// TestFixtures decodes real batches written by librdkafka and the Java
// client, and cross-checks the result with franz-go.
func TestFixtures(t *testing.T) {
	seen := map[Codec]bool{}
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			seen[f.codec] = true
			out, err := Decompress(f.codec, nil, f.payload, 1<<20)
			if err != nil {
				t.Fatalf("Decompress(%s): %v", f.codec, err)
			}
			recs, err := walkRecords(out, f.recordCount)
			if err != nil {
				t.Fatalf("decompressed %s payload is not %d records: %v", f.codec, f.recordCount, err)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[0]); err != nil {
				t.Fatalf("kmsg cannot read the first record: %v", err)
			}
			if len(r.Value) == 0 {
				t.Fatal("first record has no value")
			}
			if f.codec == None {
				return
			}
			theirs, err := kgo.DefaultDecompressor().Decompress(f.payload, kgo.CompressionCodecType(f.codec))
			if err != nil {
				t.Fatalf("franz-go: %v", err)
			}
			if !bytes.Equal(out, theirs) {
				t.Fatal("franz-go decompressed different bytes")
			}
			// Recompressing and decoding again gives the same records.
			again, err := Compress(f.codec, nil, out)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decompress(f.codec, nil, again, len(out))
			if err != nil || !bytes.Equal(back, out) {
				t.Fatalf("recompressed round trip: %v", err)
			}
		})
	}
	for _, c := range allCodecs {
		if !seen[c] {
			t.Errorf("no fixture for %s", c)
		}
	}
}

// TestFixtureSnappyFramings checks that both snappy framings are covered by
// real data: librdkafka's raw block and the Java client's xerial stream.
func TestFixtureSnappyFramings(t *testing.T) {
	var raw, xerial bool
	for _, f := range loadFixtures(t) {
		if f.codec == Snappy {
			if bytes.HasPrefix(f.payload, xerialMagic) {
				xerial = true
			} else {
				raw = true
			}
		}
	}
	if !raw || !xerial {
		t.Fatalf("snappy fixtures: raw %v, xerial %v; want both", raw, xerial)
	}
}

// TestCompressFormat pins the bytes Kafka's Java producer writes.
func TestCompressFormat(t *testing.T) {
	src := recordLike(100<<10, 7)

	t.Run("snappy", func(t *testing.T) {
		comp, _ := Compress(Snappy, nil, src)
		want := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
		if !bytes.HasPrefix(comp, want) {
			t.Fatalf("header % x, want % x", comp[:16], want)
		}
		var sizes []int
		for rest := comp[16:]; len(rest) > 0; {
			n := int(binary.BigEndian.Uint32(rest))
			// Each block is standard snappy, not an s2 extension.
			blk, err := snappy.DecodeStrict(nil, rest[4:4+n])
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(blk))
			rest = rest[4+n:]
		}
		want2 := []int{32 << 10, 32 << 10, 32 << 10, 100<<10 - 96<<10}
		if fmt.Sprint(sizes) != fmt.Sprint(want2) {
			t.Fatalf("block sizes %v, want %v", sizes, want2)
		}
		if empty, _ := Compress(Snappy, nil, nil); !bytes.Equal(empty, want) {
			t.Fatalf("empty input gives % x, want the header only", empty)
		}
	})

	t.Run("lz4", func(t *testing.T) {
		for range 3 { // pooled writers must keep the options
			comp, err := Compress(LZ4, nil, src)
			if err != nil {
				t.Fatal(err)
			}
			// magic, FLG 0x60 (version 1, independent blocks), BD 0x40
			// (64 KiB), header checksum 0x82: as Kafka and librdkafka write.
			if want := []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82}; !bytes.HasPrefix(comp, want) {
				t.Fatalf("header % x, want % x", comp[:7], want)
			}
			if end := comp[len(comp)-4:]; !bytes.Equal(end, []byte{0, 0, 0, 0}) {
				t.Fatalf("frame ends % x, want the end mark with no content checksum", end)
			}
		}
	})

	t.Run("gzip", func(t *testing.T) {
		comp, _ := Compress(Gzip, nil, src)
		if !bytes.HasPrefix(comp, []byte{0x1f, 0x8b, 8}) {
			t.Fatalf("header % x", comp[:3])
		}
	})

	t.Run("zstd", func(t *testing.T) {
		for _, s := range [][]byte{src, nil} {
			comp, _ := Compress(Zstd, nil, s)
			if !bytes.HasPrefix(comp, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
				t.Fatalf("%d bytes: frame starts % x", len(s), comp)
			}
		}
	})
}

// TestDecodeOtherWriters decodes forms other producers write.
func TestDecodeOtherWriters(t *testing.T) {
	src := recordLike(300<<10, 3)

	check := func(t *testing.T, c Codec, comp []byte) {
		t.Helper()
		out, err := Decompress(c, nil, comp, len(src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, src) {
			t.Fatal("decoded different bytes")
		}
	}

	t.Run("raw snappy", func(t *testing.T) {
		check(t, Snappy, snappy.Encode(nil, src))
	})
	t.Run("concatenated xerial streams", func(t *testing.T) {
		a, _ := Compress(Snappy, nil, src[:1000])
		both, _ := Compress(Snappy, a, src[1000:])
		check(t, Snappy, both)
	})
	t.Run("lz4 library defaults (4 MiB blocks, content checksum)", func(t *testing.T) {
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if err := zw.Apply(lz4.SizeOption(uint64(len(src)))); err != nil {
			t.Fatal(err)
		}
		zw.Write(src)
		zw.Close()
		check(t, LZ4, buf.Bytes())
	})
	t.Run("zstd stream without content size", func(t *testing.T) {
		var buf bytes.Buffer
		zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		zw.Write(src)
		zw.Close()
		var h zstd.Header
		if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
			t.Fatalf("want a frame without content size: %+v %v", h, err)
		}
		check(t, Zstd, buf.Bytes())
	})
	t.Run("zstd two frames", func(t *testing.T) {
		a, _ := Compress(Zstd, nil, src[:5000])
		both, _ := Compress(Zstd, a, src[5000:])
		check(t, Zstd, both)
	})
	t.Run("lz4 two frames", func(t *testing.T) {
		// Unlike zstd and gzip, Kafka reads one lz4 frame
		// (KafkaLZ4BlockInputStream ends at its end mark): a second
		// frame is refused, not read.
		a, _ := Compress(LZ4, nil, src[:5000])
		both, _ := Compress(LZ4, a, src[5000:])
		if _, err := Decompress(LZ4, nil, both, len(src)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("gzip two members", func(t *testing.T) {
		a, _ := Compress(Gzip, nil, src[:5000])
		both, _ := Compress(Gzip, a, src[5000:])
		check(t, Gzip, both)
	})
}

func TestXXH32(t *testing.T) {
	// Published xxHash32 (seed 0) values.
	for in, want := range map[string]uint32{"": 0x02cc5d05, "a": 0x550d7456, "abc": 0x32d153ff} {
		if got := xxh32Short([]byte(in)); got != want {
			t.Errorf("xxh32(%q) = %#x, want %#x", in, got, want)
		}
	}
	// And the header checksum the lz4 library computes, for every
	// descriptor length up to the largest one (FLG, BD, content size).
	for _, size := range []uint64{0, 1, 1 << 40} {
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		zw.Apply(lz4.SizeOption(size))
		zw.Close()
		b := buf.Bytes()
		n := 7
		if size > 0 {
			n = 15
		}
		if got, want := lz4HeaderChecksum(b[4:n-1]), b[n-1]; got != want {
			t.Errorf("content size %d: header checksum %#x, library wrote %#x", size, got, want)
		}
	}
}

// TestLZ4Kafka3160 decodes a frame whose header checksum covers the magic
// number too, as Kafka's Java client wrote for magic 0 messages.
func TestLZ4Kafka3160(t *testing.T) {
	src := recordLike(10000, 1)
	comp, _ := Compress(LZ4, nil, src)
	broken := bytes.Clone(comp)
	broken[6] = lz4HeaderChecksum(broken[:6])
	if broken[6] == comp[6] {
		t.Fatal("test needs the two checksums to differ")
	}
	out, err := Decompress(LZ4, nil, broken, len(src))
	if err != nil || !bytes.Equal(out, src) {
		t.Fatalf("broken-checksum frame: %v", err)
	}
	// Any other wrong checksum is corruption.
	bad := bytes.Clone(comp)
	bad[6] = ^(comp[6] ^ broken[6]) ^ comp[6]
	if bad[6] == comp[6] || bad[6] == broken[6] {
		bad[6] = comp[6] + broken[6] + 1
	}
	if _, err := Decompress(LZ4, nil, bad, len(src)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong header checksum: err = %v, want ErrCorrupt", err)
	}
}

func TestCorrupt(t *testing.T) {
	src := recordLike(200<<10, 9)
	for _, c := range allCodecs[1:] {
		comp, err := Compress(c, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string][]byte{
			"empty":         nil,
			"truncated":     comp[:len(comp)/2],
			"one byte":      comp[:1],
			"garbage":       bytes.Repeat([]byte{0xa5}, 64),
			"trailing junk": append(bytes.Clone(comp), 1, 2, 3),
		}
		flipped := bytes.Clone(comp)
		flipped[len(flipped)/2] ^= 0xff
		for name, in := range cases {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				out, err := Decompress(c, []byte("x"), in, len(src)+10)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Codec != c || ce.Reason == "" {
					t.Fatalf("err %v is not a *CorruptError naming %s", err, c)
				}
				if string(out) != "x" {
					t.Fatalf("dst changed on error: %q", out)
				}
			})
		}
		t.Run(c.String()+"/flipped", func(t *testing.T) {
			// A flipped byte must not go unnoticed unless the codec has
			// no integrity check over that byte (snappy, lz4 without
			// checksums); then it must at least not panic.
			out, err := Decompress(c, nil, flipped, len(src)+10)
			if err == nil && bytes.Equal(out, src) {
				t.Fatal("flipped byte decoded to the original")
			}
			if err == nil && (c == Gzip || c == Zstd) {
				t.Fatal("checksummed codec accepted a flipped byte")
			}
		})
	}
	if _, err := Decompress(Codec(5), nil, []byte{1}, 10); !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 5: err = %v", err)
	}
	if _, err := Compress(Codec(7), nil, []byte{1}); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("compress codec 7: err = %v", err)
	}
	for _, c := range allCodecs {
		comp, _ := Compress(c, nil, src)
		if out, err := Decompress(c, nil, comp, math.MaxInt); err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s with maxOut MaxInt: %v", c, err)
		}
		if _, err := Decompress(c, nil, comp, -1); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s with negative maxOut: err = %v, want ErrTooLarge", c, err)
		}
	}
	if _, err := Decompress(None, nil, []byte{1, 2}, 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("none over limit: err = %v", err)
	}
}

// TestBomb decompresses 100 MiB of zeros with a 1 MiB limit and checks that
// the refusal comes without allocating anything like 100 MiB.
func TestBomb(t *testing.T) {
	const (
		big    = 100 << 20
		maxOut = 1 << 20
	)
	zeros := make([]byte, big)
	bombs := map[string]struct {
		c    Codec
		data []byte
	}{}
	for _, c := range allCodecs[1:] {
		comp, err := Compress(c, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		bombs[c.String()] = struct {
			c    Codec
			data []byte
		}{c, comp}
	}
	bombs["raw snappy"] = struct {
		c    Codec
		data []byte
	}{Snappy, snappy.Encode(nil, zeros)}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	zw.Write(zeros)
	zw.Close()
	bombs["zstd without content size"] = struct {
		c    Codec
		data []byte
	}{Zstd, buf.Bytes()}
	var gz bytes.Buffer
	gw := kgzip.NewWriter(&gz)
	gw.Write(zeros)
	gw.Close()
	bombs["gzip (library writer)"] = struct {
		c    Codec
		data []byte
	}{Gzip, gz.Bytes()}
	zeros = nil

	for name, b := range bombs {
		t.Run(name, func(t *testing.T) {
			// Warm the pools so their one-off allocations are not counted.
			small, _ := Compress(b.c, nil, []byte("warm"))
			if _, err := Decompress(b.c, nil, small, 10); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decompress(b.c, nil, b.data, maxOut)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("refused %d-byte payload after allocating %d bytes", len(b.data), alloc)
			if alloc > 4*maxOut && !raceEnabled { // pooled decoders may be rebuilt under -race
				t.Fatalf("allocated %d bytes refusing a %d-byte bomb with limit %d", alloc, len(b.data), maxOut)
			}
		})
	}
}

// TestDecompressAllocs checks that decoding into a buffer with room
// allocates (almost) nothing once the pools are warm.
func TestDecompressAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	src := recordLike(256<<10, 5)
	for _, c := range allCodecs {
		comp, _ := Compress(c, nil, src)
		dst := make([]byte, 0, len(src))
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := Decompress(c, dst[:0], comp, len(src)); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2 {
			t.Errorf("%s: %.0f allocations per decompress into a sized buffer", c, allocs)
		}
	}
}
