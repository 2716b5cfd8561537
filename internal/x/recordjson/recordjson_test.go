package recordjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tiered/tiered/localtier/record"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Line
	}{
		{"text", `{"key":"k","value":"v","timestamp":12}`, Line{Key: []byte("k"), Value: []byte("v"), Timestamp: 12, HasTimestamp: true}},
		{"null_key_and_tombstone", `{"key":null,"value":null}`, Line{}},
		{"missing_value_is_null", `{"key":"k"}`, Line{Key: []byte("k")}},
		{"empty_strings_are_not_null", `{"key":"","value":""}`, Line{Key: []byte{}, Value: []byte{}}},
		{"b64", `{"key_b64":"/wA=","value_b64":""}`, Line{Key: []byte{0xff, 0}, Value: []byte{}}},
		{"headers", `{"value":"v","headers":[{"key":"a","value":"1"},{"key":"b","value":null},{"key_b64":"/w==","value_b64":"AA=="}]}`,
			Line{Value: []byte("v"), Headers: []record.Header{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b")}, {Key: []byte{0xff}, Value: []byte{0}}}}},
		{"consume_output_fields_ignored", `{"partition":3,"offset":9,"timestamp":1,"key":"k","value":"v","headers":[]}`, Line{Key: []byte("k"), Value: []byte("v"), Timestamp: 1, HasTimestamp: true}},
		{"null_timestamp_means_now", `{"value":"v","timestamp":null}`, Line{Value: []byte("v")}},
		{"escapes", `{"value":"a\"b\\c\n\u00e9\u2028"}`, Line{Value: []byte("a\"b\\c\né\u2028")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if !equalLine(got, tt.want) {
				t.Fatalf("Decode(%s) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

func equalLine(a, b Line) bool {
	if (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key) || (a.Value == nil) != (b.Value == nil) || !bytes.Equal(a.Value, b.Value) ||
		a.Timestamp != b.Timestamp || a.HasTimestamp != b.HasTimestamp || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		x, y := a.Headers[i], b.Headers[i]
		if !bytes.Equal(x.Key, y.Key) || (x.Value == nil) != (y.Value == nil) || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	return true
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"not_json", `{"key":`, "invalid JSON"},
		{"not_object", `[1,2]`, "expected a JSON object"},
		{"trailing", `{"value":"a"} {"value":"b"}`, "unexpected data after"},
		{"unknown_field", `{"vaule":"x"}`, `unknown field "vaule"`},
		{"key_number", `{"key":1}`, "key must be a string or null"},
		{"both_forms", `{"key":"a","key_b64":"YQ=="}`, "both as text and as base64"},
		{"bad_b64", `{"value_b64":"!!"}`, "value_b64 is not valid base64"},
		{"float_timestamp", `{"value":"a","timestamp":1.5}`, "timestamp 1.5"},
		{"negative_timestamp", `{"value":"a","timestamp":-3}`, "timestamp -3"},
		{"header_without_key", `{"headers":[{"value":"v"}]}`, "header 0 has no key"},
		{"header_value_number", `{"headers":[{"key":"k","value":2}]}`, "header 0 value must be a string or null"},
		{"invalid_utf8", "{\"value\":\"\xff\"}", "not valid UTF-8"},
		{"headers_not_array", `{"headers":{}}`, `field "headers" must not be object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode(%q) error = %v, want it to contain %q", tt.line, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestAppendLine(t *testing.T) {
	r := record.Record{Offset: 7, Timestamp: 99, Key: []byte{0xff, 0xfe}, Value: []byte("<a&b>\x01"),
		Headers: []record.Header{{Key: []byte("h"), Value: nil}, {Key: []byte("bin"), Value: []byte{0x80}}}}
	got := string(AppendLine(nil, 2, &r))
	want := `{"partition":2,"offset":7,"timestamp":99,"key_b64":"//4=","value":"<a&b>\u0001","headers":[{"key":"h","value":null},{"key":"bin","value_b64":"gA=="}]}` + "\n"
	if got != want {
		t.Fatalf("AppendLine:\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("not valid JSON")
	}
	tomb := record.Record{Offset: 1, Key: []byte("k")}
	if got := string(AppendObject(nil, &tomb)); got != `{"offset":1,"timestamp":0,"key":"k","value":null,"headers":[]}` {
		t.Fatalf("AppendObject tombstone = %s", got)
	}
}

// TestRoundTrip: what AppendLine prints, Decode reads back unchanged.
func TestRoundTrip(t *testing.T) {
	recs := []record.Record{
		{Timestamp: 1, Key: nil, Value: nil},
		{Timestamp: 2, Key: []byte{}, Value: []byte{}},
		{Timestamp: 3, Key: []byte{0, 0xff, 'a'}, Value: []byte("\"quoted\"\t\u2029 ü"), Headers: []record.Header{{Key: []byte("k"), Value: []byte{0xc3}}}},
	}
	for _, r := range recs {
		line := AppendLine(nil, 0, &r)
		got, err := Decode(bytes.TrimSpace(line))
		if err != nil {
			t.Fatalf("Decode(%s): %v", line, err)
		}
		want := Line{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, HasTimestamp: true, Headers: r.Headers}
		if !equalLine(got, want) {
			t.Fatalf("round trip of %s = %+v, want %+v", line, got, want)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts survives
// AppendLine → Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"key":"k","value":"v","timestamp":12}`, `{"key_b64":"/w==","value":null}`,
		`{"headers":[{"key":"a","value":null}]}`, `{"value":"\u2028\"\\"}`, `[]`, `{`, `{"timestamp":1e99}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Decode(data)
		if err != nil {
			return
		}
		r := record.Record{Timestamp: l.Timestamp, Key: l.Key, Value: l.Value, Headers: l.Headers}
		line := AppendLine(nil, 1, &r)
		if !json.Valid(line) {
			t.Fatalf("AppendLine wrote invalid JSON %q", line)
		}
		back, err := Decode(bytes.TrimSpace(line))
		if err != nil {
			t.Fatalf("Decode(AppendLine) = %v for %q", err, line)
		}
		l.HasTimestamp = true
		if !equalLine(back, l) {
			t.Fatalf("round trip changed %+v to %+v", l, back)
		}
	})
}
