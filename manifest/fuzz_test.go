package manifest

import (
	"bytes"
	"os"
	"testing"
)

func fuzzSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(bytes.Replace(b, []byte(`"version":1`), []byte(`"version":2`), 1))
		f.Add(bytes.Replace(b, []byte(`"base_offset":`), []byte(`"base_offset":9`), 1))
	}
	f.Add([]byte(`{"version":1,"kind":"partition","segments":[{"base_offset":99999999999999999999}]}`))
	f.Add([]byte(`{"version":1,"kind":"segments","segments":[` + string(bytes.Repeat([]byte("{},"), 100)) + `{}]}`))
	f.Add([]byte(`{}`))
}

// FuzzDecodeRoot: DecodeRoot never panics; whatever it accepts is valid,
// encodes, and decodes back to the same encoding. Input is capped at
// MaxEncodedBytes before parsing, so allocation is bounded by the input.
func FuzzDecodeRoot(f *testing.F) {
	fuzzSeeds(f, "root-v1.json")
	key, err := ManifestKey(testPrefix, testTopic, testPart)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeRoot(key, data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest is invalid: %v", err)
		}
		enc, err := EncodeRoot(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		m2, err := DecodeRoot(key, enc)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		enc2, _ := EncodeRoot(m2)
		if !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
		// Lookups on whatever was accepted must not panic.
		_, _ = m.LocateOffset(m.LogStartOffset)
		_, _ = m.LocateTimestamp(0)
		_ = Reconcile(m, Range{Base: 0, Last: m.NextOffset()})
	})
}

// FuzzDecodeSub: as FuzzDecodeRoot for sub-manifests.
func FuzzDecodeSub(f *testing.F) {
	fuzzSeeds(f, "sub-v1.json")
	root, err := os.ReadFile("testdata/root-v1.json")
	if err != nil {
		f.Fatal(err)
	}
	rk, _ := ManifestKey(testPrefix, testTopic, testPart)
	m, err := DecodeRoot(rk, root)
	if err != nil {
		f.Fatal(err)
	}
	key := m.Sealed[0].Key
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSub(key, data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded sub-manifest is invalid: %v", err)
		}
		if _, err := EncodeSub(s); err != nil {
			t.Fatalf("decoded sub-manifest does not encode: %v", err)
		}
		_, _ = s.FindOffset(0)
		_, _ = s.FindTimestamp(0)
	})
}
