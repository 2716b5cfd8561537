package manifest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"
)

// TestReviewDecodeErrorNamesPosition: a root damaged in the middle (a
// flipped byte deep in a large object, a field of the wrong type) is a
// *CorruptManifestError naming the key and the byte position of the
// damage, so an operator can find it in a manifest of hundreds of KB.
func TestReviewDecodeErrorNamesPosition(t *testing.T) {
	good, err := os.ReadFile("testdata/root-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ManifestKey(testPrefix, testTopic, testPart)
	if err != nil {
		t.Fatal(err)
	}
	syntax := bytes.Clone(good)
	at := bytes.LastIndex(syntax, []byte(`"upload_time_ms":`))
	syntax[at] = '!'
	typ := bytes.Clone(good)
	at2 := bytes.LastIndex(typ, []byte(`"record_count":`)) + len(`"record_count":`)
	typ = append(append(append([]byte{}, typ[:at2]...), `"x",`...), typ[bytes.IndexByte(typ[at2:], ',')+at2+1:]...)
	for name, c := range map[string]struct {
		data []byte
		at   int
	}{"syntax": {syntax, at}, "type": {typ, at2}} {
		_, err := DecodeRoot(key, c.data)
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Fatalf("%s: %v, want a *CorruptManifestError naming %s", name, err, key)
		}
		found := false
		for d := -4; d <= 4; d++ {
			found = found || bytes.Contains([]byte(ce.Reason), []byte(strconv.Itoa(c.at+d)))
		}
		if !found {
			t.Errorf("%s: %q does not name the position of the damage (byte %d)", name, ce.Reason, c.at)
		}
	}
}
