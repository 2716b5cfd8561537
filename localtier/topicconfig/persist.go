package topicconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// overridesVersion is the only override-file version written and read.
const overridesVersion = 1

// MaxOverridesFileBytes bounds what DecodeOverrides accepts; a real file is a few hundred bytes.
const MaxOverridesFileBytes = 1 << 20

// CorruptOverridesError reports an override file that cannot be decoded.
type CorruptOverridesError struct {
	Reason string
	Err    error // the underlying JSON error, if any
}

func (e *CorruptOverridesError) Error() string {
	if e.Err != nil {
		return "corrupt topic config overrides: " + e.Reason + ": " + e.Err.Error()
	}
	return "corrupt topic config overrides: " + e.Reason
}

// Is makes errors.Is(err, kafkaerr.ErrCorrupt) true.
func (e *CorruptOverridesError) Is(target error) bool { return target == kafkaerr.ErrCorrupt }

func (e *CorruptOverridesError) Unwrap() error { return e.Err }

// EncodeOverrides returns the override file for a topic: one line of JSON,
// {"version":1,"overrides":{...}} with keys sorted, so equal maps give equal bytes. A nil or
// empty map encodes as an empty object. Names and values are stored as given.
func EncodeOverrides(overrides map[string]string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"version":1,"overrides":{`)
	for i, k := range sortedKeys(overrides) {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(&buf, k)
		buf.WriteByte(':')
		writeJSONString(&buf, overrides[k])
	}
	buf.WriteString("}}\n")
	return buf.Bytes()
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, err := json.Marshal(s)
	if err != nil {
		// json.Marshal of a string cannot fail (invalid UTF-8 becomes U+FFFD).
		panic(fmt.Sprintf("marshal string: %v", err))
	}
	buf.Write(b)
}

// DecodeOverrides reads a file written by EncodeOverrides. It is strict: exactly one object
// with "version" 1 and an "overrides" object of string values, no other fields, no duplicate
// names, nothing after it but white space. It does not check names or values (Parse does).
// Every failure is a *CorruptOverridesError.
func DecodeOverrides(data []byte) (map[string]string, error) {
	if len(data) > MaxOverridesFileBytes {
		return nil, &CorruptOverridesError{Reason: fmt.Sprintf("file is %d bytes, more than %d", len(data), MaxOverridesFileBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	corrupt := func(reason string, err error) (map[string]string, error) {
		return nil, &CorruptOverridesError{Reason: reason, Err: err}
	}
	if err := expectDelim(dec, '{'); err != nil {
		return corrupt("expected an object", err)
	}
	var (
		version     json.Number
		haveVersion bool
		out         map[string]string
	)
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return corrupt("field name", err)
		}
		switch key {
		case "version":
			if haveVersion {
				return corrupt(`duplicate field "version"`, nil)
			}
			tok, err := dec.Token()
			if err != nil {
				return corrupt("version", err)
			}
			n, ok := tok.(json.Number)
			if !ok {
				return corrupt(fmt.Sprintf("version is %T, not a number", tok), nil)
			}
			version, haveVersion = n, true
		case "overrides":
			if out != nil {
				return corrupt(`duplicate field "overrides"`, nil)
			}
			if out, err = decodeStringMap(dec); err != nil {
				return corrupt("overrides", err)
			}
		default:
			return corrupt(fmt.Sprintf("unknown field %q", key), nil)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return corrupt("unterminated object", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return corrupt("data after the object", err)
	}
	if !haveVersion {
		return corrupt(`missing field "version"`, nil)
	}
	if version.String() != "1" {
		return corrupt(fmt.Sprintf("unsupported version %s (want %d)", version, overridesVersion), nil)
	}
	if out == nil {
		return corrupt(`missing field "overrides"`, nil)
	}
	return out, nil
}

// decodeStringMap reads one JSON object of string values, refusing duplicate names.
func decodeStringMap(dec *json.Decoder) (map[string]string, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for dec.More() {
		k, err := stringToken(dec)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("duplicate name %q", k)
		}
		v, err := stringToken(dec)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		out[k] = v
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	return out, nil
}

func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("got %v, want a string", tok)
	}
	return s, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("got %v, want %v", tok, want)
	}
	return nil
}
