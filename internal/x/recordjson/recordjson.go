// Package recordjson owns the JSON-lines shape in which tiered prints and
// reads Kafka records (DESIGN "Records as JSON lines"):
//
//	{"partition": 0, "offset": 5, "timestamp": 1700000000000,
//	 "key": "text" | null, "value": "text" | null,
//	 "headers": [{"key": "k", "value": "v" | null}]}
//
// Bytes that are not valid UTF-8 are written as base64 (standard alphabet,
// padded) under "key_b64" / "value_b64" (and, in headers, "key_b64" /
// "value_b64") instead of "key" / "value". A null value is a tombstone.
// "partition" and "offset" appear only in output; input accepts them and
// ignores them so that consume output can be fed back to produce.
package recordjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tiered/tiered/localtier/record"
)

// Line is one decoded input line.
type Line struct {
	Key   []byte // nil: null key
	Value []byte // nil: null value (tombstone)
	// Timestamp is the CreateTime in ms; meaningful only when HasTimestamp.
	Timestamp    int64
	HasTimestamp bool
	Headers      []record.Header
}

type headerIn struct {
	Key      *string         `json:"key"`
	KeyB64   *string         `json:"key_b64"`
	Value    json.RawMessage `json:"value"`
	ValueB64 *string         `json:"value_b64"`
}

type lineIn struct {
	Key       json.RawMessage `json:"key"`
	KeyB64    *string         `json:"key_b64"`
	Value     json.RawMessage `json:"value"`
	ValueB64  *string         `json:"value_b64"`
	Timestamp *json.Number    `json:"timestamp"`
	Headers   []headerIn      `json:"headers"`
	// Accepted and ignored, so that consume output can be produced again.
	Offset    json.RawMessage `json:"offset"`
	Partition json.RawMessage `json:"partition"`
}

// Decode parses one JSON line (without its newline). Unknown fields, a
// field given both as text and as base64, a non-integer or negative
// timestamp, and input that is not valid UTF-8 are errors. A missing "value"
// is null, like an explicit null; a missing "timestamp" leaves HasTimestamp
// false.
func Decode(line []byte) (Line, error) {
	var out Line
	if !utf8.Valid(line) {
		return out, errors.New("line is not valid UTF-8 (put binary data in key_b64/value_b64)")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var in lineIn
	if err := dec.Decode(&in); err != nil {
		return out, errors.New(jsonErrText(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, errors.New("invalid JSON: unexpected data after the record object")
	}
	var err error
	if out.Key, err = field("key", in.Key, in.KeyB64); err != nil {
		return out, err
	}
	if out.Value, err = field("value", in.Value, in.ValueB64); err != nil {
		return out, err
	}
	if in.Timestamp != nil {
		ts, err := in.Timestamp.Int64()
		if err != nil || ts < 0 {
			return out, fmt.Errorf("timestamp %s is not a non-negative integer number of milliseconds", in.Timestamp.String())
		}
		out.Timestamp, out.HasTimestamp = ts, true
	}
	for i, h := range in.Headers {
		var k []byte
		switch {
		case h.Key != nil && h.KeyB64 != nil:
			return out, fmt.Errorf("header %d has both key and key_b64", i)
		case h.Key != nil:
			k = []byte(*h.Key)
		case h.KeyB64 != nil:
			if k, err = base64.StdEncoding.DecodeString(*h.KeyB64); err != nil {
				return out, fmt.Errorf("header %d: key_b64 is not valid base64: %v", i, err)
			}
		default:
			return out, fmt.Errorf("header %d has no key (header keys cannot be null)", i)
		}
		v, err := field(fmt.Sprintf("header %d value", i), h.Value, h.ValueB64)
		if err != nil {
			return out, err
		}
		out.Headers = append(out.Headers, record.Header{Key: k, Value: v})
	}
	return out, nil
}

// field decodes a nullable text field and its base64 alternative.
func field(name string, text json.RawMessage, b64 *string) ([]byte, error) {
	isNull := text == nil || string(text) == "null"
	if b64 != nil {
		if !isNull {
			return nil, fmt.Errorf("%s is given both as text and as base64", name)
		}
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_b64 is not valid base64: %v", name, err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	if isNull {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, fmt.Errorf("%s must be a string or null, not %s", name, text)
	}
	return []byte(s), nil
}

// jsonErrText shortens encoding/json's messages to what a user can act on.
func jsonErrText(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		if ute.Field == "" {
			return fmt.Sprintf("expected a JSON object, found %s", ute.Value)
		}
		return fmt.Sprintf("field %q must not be %s", ute.Field, ute.Value)
	}
	if errors.Is(err, io.EOF) {
		return "invalid JSON: empty input"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: unexpected end of line"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return msg + " (allowed: key, key_b64, value, value_b64, timestamp, headers)"
	}
	return "invalid JSON: " + msg
}

// AppendLine appends r as one JSON line (with a trailing newline) to dst:
// the shape consume prints, "partition" and "offset" first.
func AppendLine(dst []byte, partition int32, r *record.Record) []byte {
	dst = append(dst, `{"partition":`...)
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, ',')
	dst = appendBody(dst, r)
	return append(dst, '}', '\n')
}

// AppendObject appends r as a JSON object without "partition" and without a
// newline (for reports that embed records).
func AppendObject(dst []byte, r *record.Record) []byte {
	dst = append(dst, '{')
	dst = appendBody(dst, r)
	return append(dst, '}')
}

func appendBody(dst []byte, r *record.Record) []byte {
	dst = append(dst, `"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp, 10)
	dst = append(dst, ',')
	dst = appendField(dst, "key", r.Key)
	dst = append(dst, ',')
	dst = appendField(dst, "value", r.Value)
	dst = append(dst, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if h.Key == nil {
			h.Key = []byte{} // a header key is never null
		}
		dst = appendField(dst, "key", h.Key)
		dst = append(dst, ',')
		dst = appendField(dst, "value", h.Value)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendField appends "name":"text", "name":null or "name_b64":"..." for b.
func appendField(dst []byte, name string, b []byte) []byte {
	switch {
	case b == nil:
		dst = AppendString(dst, name)
		return append(dst, ":null"...)
	case utf8.Valid(b):
		dst = AppendString(dst, name)
		dst = append(dst, ':')
		return AppendString(dst, string(b))
	default:
		dst = AppendString(dst, name+"_b64")
		dst = append(dst, ':', '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s, which must be valid UTF-8, as a JSON string.
// Unlike encoding/json it does not escape <, > and &.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
