package topicconfig

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// kind is the Kafka ConfigDef type of a config; it decides parsing and the "Not a number of
// type X" wording.
type kind uint8

const (
	kindInt    kind = iota // Java int: 32-bit
	kindLong               // Java long
	kindDouble             // Java double
	kindBool
	kindList   // cleanup.policy
	kindString // one of a fixed set
)

func (k kind) String() string {
	switch k {
	case kindInt:
		return "INT"
	case kindLong:
		return "LONG"
	case kindDouble:
		return "DOUBLE"
	case kindBool:
		return "BOOLEAN"
	case kindList:
		return "LIST"
	default:
		return "STRING"
	}
}

// def describes one config: its name, type, bounds and where it lives in Config.
type def struct {
	name     string
	kind     kind
	internal bool // accepted, but not listed by Names/Describe unless overridden

	// Integer bounds (kindInt, kindLong). hasMin false means no lower bound.
	hasMin bool
	min    int64
	// minIfSet: the lower bound applies only to non-zero values (internal.segment.bytes,
	// where 0 means unset). Parse still refuses an explicit 0.
	minIfSet bool

	// Double bounds (kindDouble): [dmin, dmax].
	dmin, dmax float64

	// Allowed values (kindString), in the order error messages list them, and a synonym map
	// applied by Parse.
	allowed  []string
	synonyms map[string]string

	i64 func(*Config) *int64
	f64 func(*Config) *float64
	b   func(*Config) *bool
	str func(*Config) *string
	pol func(*Config) *Policy
}

// defs lists every config, sorted by name.
var defs = []def{
	{name: CleanupPolicyConfig, kind: kindList, pol: func(c *Config) *Policy { return &c.CleanupPolicy }},
	{name: CompressionTypeConfig, kind: kindString,
		allowed:  []string{CompressionUncompressed, CompressionZstd, CompressionLZ4, CompressionSnappy, CompressionGzip, CompressionProducer, CompressionNone},
		synonyms: map[string]string{CompressionUncompressed: CompressionNone},
		str:      func(c *Config) *string { return &c.CompressionType }},
	{name: DeleteRetentionMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.DeleteRetentionMs }},
	{name: FileDeleteDelayMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.FileDeleteDelayMs }},
	{name: FlushMessagesConfig, kind: kindLong, hasMin: true, min: 1, i64: func(c *Config) *int64 { return &c.FlushMessages }},
	{name: FlushMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.FlushMs }},
	{name: IndexIntervalBytesConfig, kind: kindInt, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.IndexIntervalBytes }},
	{name: InternalSegmentBytesConfig, kind: kindInt, internal: true, hasMin: true, min: MinInternalSegmentBytes, minIfSet: true,
		i64: func(c *Config) *int64 { return &c.InternalSegmentBytes }},
	{name: LocalRetentionBytesConfig, kind: kindLong, hasMin: true, min: -2, i64: func(c *Config) *int64 { return &c.LocalRetentionBytes }},
	{name: LocalRetentionMsConfig, kind: kindLong, hasMin: true, min: -2, i64: func(c *Config) *int64 { return &c.LocalRetentionMs }},
	{name: MaxCompactionLagMsConfig, kind: kindLong, hasMin: true, min: 1, i64: func(c *Config) *int64 { return &c.MaxCompactionLagMs }},
	{name: MaxMessageBytesConfig, kind: kindInt, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.MaxMessageBytes }},
	{name: MessageTimestampAfterMaxMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.MessageTimestampAfterMaxMs }},
	{name: MessageTimestampBeforeMaxMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.MessageTimestampBeforeMaxMs }},
	{name: MessageTimestampTypeConfig, kind: kindString, allowed: []string{CreateTime, LogAppendTime},
		str: func(c *Config) *string { return &c.MessageTimestampType }},
	{name: MinCleanableDirtyRatioConfig, kind: kindDouble, dmin: 0, dmax: 1, f64: func(c *Config) *float64 { return &c.MinCleanableDirtyRatio }},
	{name: MinCompactionLagMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.MinCompactionLagMs }},
	{name: RemoteStorageEnableConfig, kind: kindBool, b: func(c *Config) *bool { return &c.RemoteStorageEnable }},
	{name: RetentionBytesConfig, kind: kindLong, i64: func(c *Config) *int64 { return &c.RetentionBytes }},
	{name: RetentionMsConfig, kind: kindLong, hasMin: true, min: -1, i64: func(c *Config) *int64 { return &c.RetentionMs }},
	{name: SegmentBytesConfig, kind: kindInt, hasMin: true, min: MinSegmentBytes, i64: func(c *Config) *int64 { return &c.SegmentBytes }},
	{name: SegmentIndexBytesConfig, kind: kindInt, hasMin: true, min: MinSegmentIndexBytes, i64: func(c *Config) *int64 { return &c.SegmentIndexBytes }},
	{name: SegmentJitterMsConfig, kind: kindLong, hasMin: true, min: 0, i64: func(c *Config) *int64 { return &c.SegmentJitterMs }},
	{name: SegmentMsConfig, kind: kindLong, hasMin: true, min: 1, i64: func(c *Config) *int64 { return &c.SegmentMs }},
}

func lookup(name string) *def {
	i, ok := slices.BinarySearchFunc(defs, name, func(d def, n string) int { return strings.Compare(d.name, n) })
	if !ok {
		return nil
	}
	return &defs[i]
}

// Names lists every public topic config name, sorted. internal.segment.bytes is accepted by
// Parse but not listed.
func Names() []string {
	out := make([]string, 0, len(defs))
	for i := range defs {
		if !defs[i].internal {
			out = append(out, defs[i].name)
		}
	}
	return out
}

// set parses raw into c's field, with Kafka's ConfigDef parsing rules, and checks the value's
// own bounds. On error c is left unchanged.
func (d *def) set(c *Config, raw string) error {
	v := javaTrim(raw)
	bad := func(reason string) error {
		return &InvalidConfigError{Name: d.name, Value: raw, Reason: reason}
	}
	switch d.kind {
	case kindInt, kindLong:
		bits := 64
		if d.kind == kindInt {
			bits = 32
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad("Not a number of type " + d.kind.String())
		}
		if d.minIfSet && n == 0 {
			return &InvalidConfigError{Name: d.name, Value: "0", Reason: "Value must be at least " + formatInt(d.min)}
		}
		*d.i64(c) = n
	case kindDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil && !isRangeErr(err) {
			return bad("Not a number of type " + d.kind.String())
		}
		*d.f64(c) = f
	case kindBool:
		switch {
		case strings.EqualFold(v, "true"):
			*d.b(c) = true
		case strings.EqualFold(v, "false"):
			*d.b(c) = false
		default:
			return bad("Expected value to be either true or false")
		}
	case kindList:
		p, err := parsePolicy(v)
		if err != nil {
			return err
		}
		*d.pol(c) = p
	case kindString:
		if !slices.Contains(d.allowed, v) {
			return &InvalidConfigError{Name: d.name, Value: v, Reason: "String must be one of: " + strings.Join(d.allowed, ", ")}
		}
		if s, ok := d.synonyms[v]; ok {
			v = s
		}
		*d.str(c) = v
	}
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// parsePolicy parses a cleanup.policy list the way Kafka's ConfigDef does: trimmed, empty means
// the empty list, otherwise split at commas with surrounding whitespace. Every element must be
// "compact" or "delete" (case-sensitive); duplicates are tolerated.
func parsePolicy(v string) (Policy, error) {
	var p Policy
	if v == "" {
		return p, nil
	}
	for _, e := range strings.Split(v, ",") {
		switch e = javaTrim(e); e {
		case "compact":
			p.Compact = true
		case "delete":
			p.Delete = true
		default:
			return Policy{}, &InvalidConfigError{Name: CleanupPolicyConfig, Value: e, Reason: "String must be one of: compact, delete"}
		}
	}
	return p, nil
}

// check validates c's field against d's bounds. Integer bounds use Kafka's Range messages; an
// INT config must also fit a Java int.
func (d *def) check(c *Config) error {
	switch d.kind {
	case kindInt, kindLong:
		n := *d.i64(c)
		if d.minIfSet && n == 0 {
			return nil
		}
		if d.hasMin && n < d.min {
			return &InvalidConfigError{Name: d.name, Value: formatInt(n), Reason: "Value must be at least " + formatInt(d.min)}
		}
		if d.kind == kindInt && n > math.MaxInt32 {
			return &InvalidConfigError{Name: d.name, Value: formatInt(n), Reason: "Value must be no more than " + formatInt(math.MaxInt32)}
		}
	case kindDouble:
		f := *d.f64(c)
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return &InvalidConfigError{Name: d.name, Value: formatDouble(f), Reason: "Value must be a finite number"}
		case f < d.dmin:
			return &InvalidConfigError{Name: d.name, Value: formatDouble(f), Reason: "Value must be at least " + formatBound(d.dmin)}
		case f > d.dmax:
			return &InvalidConfigError{Name: d.name, Value: formatDouble(f), Reason: "Value must be no more than " + formatBound(d.dmax)}
		}
	case kindString:
		if v := *d.str(c); !slices.Contains(d.allowed, v) {
			return &InvalidConfigError{Name: d.name, Value: v, Reason: "String must be one of: " + strings.Join(d.allowed, ", ")}
		}
	}
	return nil
}

// format returns c's value of d as Kafka prints it.
func (d *def) format(c *Config) string {
	switch d.kind {
	case kindInt, kindLong:
		return formatInt(*d.i64(c))
	case kindDouble:
		return formatDouble(*d.f64(c))
	case kindBool:
		return strconv.FormatBool(*d.b(c))
	case kindList:
		return d.pol(c).String()
	default:
		return *d.str(c)
	}
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// formatDouble prints like Java's Double.toString for the values a ratio takes: always with a
// fraction ("1.0", "0.5").
func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// formatBound prints a Range bound as Kafka does for between(0, 1): Integer bounds print
// without a fraction.
func formatBound(f float64) string {
	if f == math.Trunc(f) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
