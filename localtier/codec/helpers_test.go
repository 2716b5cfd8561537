package codec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

// recordLike returns n bytes that compress like Kafka record data: keys and
// JSON-ish values from a small vocabulary mixed with random digits.
func recordLike(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"order", "customer", "status", "shipped", "amount", "EUR", "warehouse", "id", "true", "false"}
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = fmt.Appendf(b, `{"%s":%d,"%s":"%s-%08x"}`, words[r.IntN(len(words))], r.IntN(1e6),
			words[r.IntN(len(words))], words[r.IntN(len(words))], r.Uint32())
	}
	return b[:n]
}

// fixture is one rskafka record batch split at the 61-byte header.
type fixture struct {
	name        string
	batch       []byte
	codec       Codec
	recordCount int32
	payload     []byte
}

const batchHeaderLen = 61

func loadFixtures(tb testing.TB) []fixture {
	tb.Helper()
	paths, err := filepath.Glob("../../testdata/fixtures/rskafka/*.batch.bin")
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatal("no rskafka fixtures found")
	}
	var fs []fixture
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		if len(b) < batchHeaderLen {
			tb.Fatalf("%s: %d bytes, shorter than a batch header", p, len(b))
		}
		if got, want := int(binary.BigEndian.Uint32(b[8:12])), len(b)-12; got != want {
			tb.Fatalf("%s: batchLength %d, file holds %d bytes after it", p, got, want)
		}
		if b[16] != 2 {
			tb.Fatalf("%s: magic %d, want 2", p, b[16])
		}
		fs = append(fs, fixture{
			name:        filepath.Base(p),
			batch:       b,
			codec:       Codec(binary.BigEndian.Uint16(b[21:23]) & 7),
			recordCount: int32(binary.BigEndian.Uint32(b[57:61])),
			payload:     b[batchHeaderLen:],
		})
	}
	return fs
}

// walkRecords checks that recs is exactly count records, each a zig-zag
// varint length followed by that many bytes, and returns the records.
func walkRecords(recs []byte, count int32) ([][]byte, error) {
	var out [][]byte
	for i := int32(0); i < count; i++ {
		l, n := binary.Varint(recs)
		if n <= 0 {
			return nil, fmt.Errorf("record %d: bad length varint", i)
		}
		if l <= 0 || l > int64(len(recs)-n) {
			return nil, fmt.Errorf("record %d: length %d, %d bytes remain", i, l, len(recs)-n)
		}
		out = append(out, recs[:n+int(l)])
		recs = recs[n+int(l):]
	}
	if len(recs) != 0 {
		return nil, fmt.Errorf("%d bytes after %d records", len(recs), count)
	}
	return out, nil
}
