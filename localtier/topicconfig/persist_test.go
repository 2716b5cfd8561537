package topicconfig

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestOverridesRoundTrip(t *testing.T) {
	cases := []map[string]string{
		nil,
		{},
		{"cleanup.policy": "compact,delete"},
		{"segment.bytes": "1048576", "retention.ms": "-1", "a\"b\\c": "<&>\n\t\u00e9", "": ""},
	}
	for _, m := range cases {
		data := EncodeOverrides(m)
		if !bytes.Equal(data, EncodeOverrides(maps.Clone(m))) {
			t.Fatalf("encoding not deterministic for %v", m)
		}
		got, err := DecodeOverrides(data)
		if err != nil {
			t.Fatalf("DecodeOverrides(%s) = %v", data, err)
		}
		if len(got) != len(m) || !maps.Equal(got, m) {
			t.Fatalf("round trip of %v gave %v", m, got)
		}
	}
	want := `{"version":1,"overrides":{"cleanup.policy":"compact","retention.ms":"-1"}}` + "\n"
	if got := string(EncodeOverrides(map[string]string{"retention.ms": "-1", "cleanup.policy": "compact"})); got != want {
		t.Fatalf("EncodeOverrides = %q, want %q", got, want)
	}
}

func TestDecodeOverridesRejects(t *testing.T) {
	cases := map[string]string{
		"empty":              ``,
		"not_object":         `[]`,
		"truncated":          `{"version":1,"overrides":{"a":"b"`,
		"missing_version":    `{"overrides":{}}`,
		"missing_overrides":  `{"version":1}`,
		"version_2":          `{"version":2,"overrides":{}}`,
		"version_1_0":        `{"version":1.0,"overrides":{}}`,
		"version_string":     `{"version":"1","overrides":{}}`,
		"unknown_field":      `{"version":1,"overrides":{},"x":1}`,
		"duplicate_version":  `{"version":1,"version":1,"overrides":{}}`,
		"duplicate_override": `{"version":1,"overrides":{"a":"1","a":"2"}}`,
		"duplicate_section":  `{"version":1,"overrides":{},"overrides":{}}`,
		"number_value":       `{"version":1,"overrides":{"segment.bytes":1048576}}`,
		"null_value":         `{"version":1,"overrides":{"a":null}}`,
		"overrides_null":     `{"version":1,"overrides":null}`,
		"trailing_object":    `{"version":1,"overrides":{}}{}`,
		"trailing_garbage":   `{"version":1,"overrides":{}} x`,
		"too_big":            `{"version":1,"overrides":{"a":"` + strings.Repeat("x", MaxOverridesFileBytes) + `"}}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := DecodeOverrides([]byte(in))
			var ce *CorruptOverridesError
			if !errors.As(err, &ce) {
				t.Fatalf("DecodeOverrides = %v, %v; want *CorruptOverridesError", m, err)
			}
		})
	}
	// White space and key order are free.
	m, err := DecodeOverrides([]byte(" { \"overrides\" : { \"b\" : \"2\" , \"a\":\"1\" } ,\n\"version\" : 1 }\n\n"))
	if err != nil || !maps.Equal(m, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("DecodeOverrides = %v, %v", m, err)
	}
}

// FuzzDecodeOverrides: no panic; whatever decodes re-encodes to bytes that decode to the same map.
func FuzzDecodeOverrides(f *testing.F) {
	f.Add(EncodeOverrides(map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}))
	f.Add(EncodeOverrides(nil))
	f.Add([]byte(`{"version":1,"overrides":{"a":"\u00e9\ud800"}}`))
	f.Add([]byte(`{"version":1,"overrides":{"a":"1","a":"2"}}`))
	f.Add([]byte(`{"version":1e0,"overrides":{}}`))
	f.Add([]byte(`{"overrides":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeOverrides(data)
		if err != nil {
			var ce *CorruptOverridesError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not *CorruptOverridesError", err)
			}
			return
		}
		again, err := DecodeOverrides(EncodeOverrides(m))
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("re-encode of %v decoded to %v, %v", m, again, err)
		}
	})
}
