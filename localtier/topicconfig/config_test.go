package topicconfig

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// errMessages unpacks an errors.Join of *InvalidConfigError into their messages.
func errMessages(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range unjoin(err) {
		var ice *InvalidConfigError
		if !errors.As(e, &ice) {
			t.Fatalf("error %v (%T) is not an *InvalidConfigError", e, e)
		}
		out = append(out, e.Error())
	}
	return out
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestDefaultsMatchKafka(t *testing.T) {
	c := Defaults()
	want := map[string]string{
		"cleanup.policy":         "delete",
		"compression.type":       "producer",
		"delete.retention.ms":    "86400000",
		"file.delete.delay.ms":   "60000",
		"flush.messages":         "9223372036854775807",
		"flush.ms":               "9223372036854775807",
		"index.interval.bytes":   "4096",
		"local.retention.bytes":  "-2",
		"local.retention.ms":     "-2",
		"max.compaction.lag.ms":  "9223372036854775807",
		"max.message.bytes":      "1048588",
		"message.timestamp.type": "CreateTime",
		// Kafka 4.0 (KIP-1030): at most an hour ahead, any age behind.
		"message.timestamp.after.max.ms":  "3600000",
		"message.timestamp.before.max.ms": "9223372036854775807",
		"min.cleanable.dirty.ratio":       "0.5",
		"min.compaction.lag.ms":           "0",
		"remote.storage.enable":           "false",
		"retention.bytes":                 "-1",
		"retention.ms":                    "604800000",
		"segment.bytes":                   "1073741824",
		"segment.index.bytes":             "10485760",
		"segment.jitter.ms":               "0",
		"segment.ms":                      "604800000",
	}
	if got := Names(); len(got) != len(want) {
		t.Fatalf("Names() = %v, want %d names", got, len(want))
	}
	for _, name := range Names() {
		d := lookup(name)
		if got := d.format(&c); got != want[name] {
			t.Errorf("default %s = %q, want %q", name, got, want[name])
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v", err)
	}
	p, err := Parse(nil)
	if err != nil || p != c {
		t.Fatalf("Parse(nil) = %+v, %v; want defaults", p, err)
	}
	if c.EffectiveLocalRetentionMs() != DefaultRetentionMs || c.EffectiveLocalRetentionBytes() != -1 {
		t.Errorf("effective local retention = %d ms / %d bytes", c.EffectiveLocalRetentionMs(), c.EffectiveLocalRetentionBytes())
	}
	if c.EffectiveSegmentBytes() != 1<<30 {
		t.Errorf("EffectiveSegmentBytes = %d", c.EffectiveSegmentBytes())
	}
}

// TestParseEachConfig sets one config at a time: valid values (including both boundaries) must
// come back in Kafka's printed form, invalid ones must give Kafka's exact message.
func TestParseEachConfig(t *testing.T) {
	type valid struct{ in, want string }
	type invalid struct{ in, msg string }
	cases := []struct {
		name    string
		valid   []valid
		invalid []invalid
	}{
		{"cleanup.policy",
			[]valid{{"delete", "delete"}, {"compact", "compact"}, {"compact,delete", "compact,delete"},
				{"delete,compact", "compact,delete"}, {" compact , delete ", "compact,delete"}, {"", ""}, {"delete,delete", "delete"}},
			[]invalid{{"foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"},
				{"Compact", "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"},
				{"delete,", "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete"}}},
		{"compression.type",
			[]valid{{"producer", "producer"}, {"none", "none"}, {"uncompressed", "none"}, {"gzip", "gzip"},
				{"snappy", "snappy"}, {"lz4", "lz4"}, {" zstd ", "zstd"}},
			[]invalid{{"brotli", "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer, none"},
				{"GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer, none"}}},
		{"delete.retention.ms",
			[]valid{{"0", "0"}, {"9223372036854775807", "9223372036854775807"}},
			[]invalid{{"-1", "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"},
				{"9223372036854775808", "Invalid value 9223372036854775808 for configuration delete.retention.ms: Not a number of type LONG"}}},
		{"file.delete.delay.ms",
			[]valid{{"0", "0"}, {"1000", "1000"}},
			[]invalid{{"-1", "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0"}}},
		{"flush.messages",
			[]valid{{"1", "1"}, {"9223372036854775807", "9223372036854775807"}},
			[]invalid{{"0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"}}},
		{"flush.ms",
			[]valid{{"0", "0"}, {"1000", "1000"}},
			[]invalid{{"-1", "Invalid value -1 for configuration flush.ms: Value must be at least 0"}}},
		{"index.interval.bytes",
			[]valid{{"0", "0"}, {"2147483647", "2147483647"}},
			[]invalid{{"-1", "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0"},
				{"2147483648", "Invalid value 2147483648 for configuration index.interval.bytes: Not a number of type INT"}}},
		{"internal.segment.bytes",
			[]valid{{"14", "14"}, {"1024", "1024"}},
			[]invalid{{"13", "Invalid value 13 for configuration internal.segment.bytes: Value must be at least 14"},
				{"0", "Invalid value 0 for configuration internal.segment.bytes: Value must be at least 14"}}},
		{"local.retention.bytes",
			[]valid{{"-2", "-2"}, {"-1", "-1"}, {"0", "0"}},
			[]invalid{{"-3", "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2"}}},
		{"local.retention.ms",
			[]valid{{"-2", "-2"}, {"0", "0"}, {"604800000", "604800000"}}, // -1: see TestCrossFieldRules
			[]invalid{{"-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"},
				{"1h", "Invalid value 1h for configuration local.retention.ms: Not a number of type LONG"}}},
		{"max.compaction.lag.ms",
			[]valid{{"1", "1"}, {"9223372036854775807", "9223372036854775807"}},
			[]invalid{{"0", "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"}}},
		{"max.message.bytes",
			[]valid{{"0", "0"}, {"2147483647", "2147483647"}},
			[]invalid{{"-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"},
				{"1.5", "Invalid value 1.5 for configuration max.message.bytes: Not a number of type INT"}}},
		{"message.timestamp.after.max.ms",
			[]valid{{"0", "0"}, {"3600000", "3600000"}, {"9223372036854775807", "9223372036854775807"}},
			[]invalid{{"-1", "Invalid value -1 for configuration message.timestamp.after.max.ms: Value must be at least 0"}}},
		{"message.timestamp.before.max.ms",
			[]valid{{"0", "0"}, {"86400000", "86400000"}},
			[]invalid{{"-1", "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"},
				{"1d", "Invalid value 1d for configuration message.timestamp.before.max.ms: Not a number of type LONG"}}},
		{"message.timestamp.type",
			[]valid{{"CreateTime", "CreateTime"}, {"LogAppendTime", "LogAppendTime"}},
			[]invalid{{"createtime", "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"}}},
		{"min.cleanable.dirty.ratio",
			[]valid{{"0", "0.0"}, {"1", "1.0"}, {"0.25", "0.25"}, {" 0.75 ", "0.75"}, {"1e-1", "0.1"}},
			[]invalid{{"-0.01", "Invalid value -0.01 for configuration min.cleanable.dirty.ratio: Value must be at least 0"},
				{"1.01", "Invalid value 1.01 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
				{"half", "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"},
				{"NaN", "Invalid value NaN for configuration min.cleanable.dirty.ratio: Value must be a finite number"},
				{"1e400", "Invalid value Infinity for configuration min.cleanable.dirty.ratio: Value must be a finite number"}}},
		{"min.compaction.lag.ms",
			[]valid{{"0", "0"}, {"1000", "1000"}},
			[]invalid{{"-1", "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0"}}},
		{"remote.storage.enable",
			[]valid{{"true", "true"}, {"FALSE", "false"}, {" True ", "true"}},
			[]invalid{{"yes", "Invalid value yes for configuration remote.storage.enable: Expected value to be either true or false"},
				{"1", "Invalid value 1 for configuration remote.storage.enable: Expected value to be either true or false"}}},
		{"retention.bytes",
			[]valid{{"-1", "-1"}, {"-5", "-5"}, {"0", "0"}, {"1099511627776", "1099511627776"}},
			[]invalid{{"", "Invalid value  for configuration retention.bytes: Not a number of type LONG"}}},
		{"retention.ms",
			[]valid{{"-1", "-1"}, {"0", "0"}, {"+100", "100"}},
			[]invalid{{"-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"}}},
		{"segment.bytes",
			[]valid{{"1048576", "1048576"}, {"2147483647", "2147483647"}},
			[]invalid{{"1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"},
				{"-5", "Invalid value -5 for configuration segment.bytes: Value must be at least 1048576"},
				{"2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"},
				{"1GB", "Invalid value 1GB for configuration segment.bytes: Not a number of type INT"}}},
		{"segment.index.bytes",
			[]valid{{"4", "4"}, {"10485760", "10485760"}},
			[]invalid{{"3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"}}},
		{"segment.jitter.ms",
			[]valid{{"0", "0"}, {"60000", "60000"}},
			[]invalid{{"-1", "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"}}},
		{"segment.ms",
			[]valid{{"1", "1"}, {"9223372036854775807", "9223372036854775807"}},
			[]invalid{{"0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"}}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			d := lookup(tc.name)
			if d == nil {
				t.Fatalf("unknown config %s", tc.name)
			}
			for _, v := range tc.valid {
				c, err := Parse(map[string]string{tc.name: v.in})
				if err != nil {
					t.Errorf("Parse(%s=%q) = %v", tc.name, v.in, err)
					continue
				}
				if got := d.format(&c); got != v.want {
					t.Errorf("Parse(%s=%q) gives %q, want %q", tc.name, v.in, got, v.want)
				}
				if err := c.Validate(); err != nil {
					t.Errorf("Validate after Parse(%s=%q) = %v", tc.name, v.in, err)
				}
			}
			for _, v := range tc.invalid {
				_, err := Parse(map[string]string{tc.name: v.in})
				msgs := errMessages(t, err)
				if len(msgs) != 1 || msgs[0] != v.msg {
					t.Errorf("Parse(%s=%q) errors = %q, want [%q]", tc.name, v.in, msgs, v.msg)
				}
				var ice *InvalidConfigError
				if !errors.As(err, &ice) || ice.Name != tc.name {
					t.Errorf("Parse(%s=%q): error not reported against the config: %v", tc.name, v.in, err)
				}
			}
		})
	}
	for i := range defs {
		if !seen[defs[i].name] {
			t.Errorf("config %s has no test case", defs[i].name)
		}
	}
}

func TestParseUnknownName(t *testing.T) {
	_, err := Parse(map[string]string{"foo": "1", "segment.bytes": "1048576"})
	msgs := errMessages(t, err)
	if len(msgs) != 1 || msgs[0] != "Unknown topic config name: foo" {
		t.Fatalf("errors = %q", msgs)
	}
	var ice *InvalidConfigError
	if !errors.As(err, &ice) || !ice.Unknown() || ice.Name != "foo" {
		t.Fatalf("not an unknown-name error: %#v", ice)
	}
	// Broker-level synonyms are not topic configs.
	if _, err := Parse(map[string]string{"log.retention.ms": "1"}); err == nil {
		t.Fatal("log.retention.ms accepted as a topic config")
	}
}

func TestCrossFieldRules(t *testing.T) {
	cases := []struct {
		name      string
		overrides map[string]string
		msgs      []string
	}{
		{"local ms equal to retention", map[string]string{"retention.ms": "1000", "local.retention.ms": "1000"}, nil},
		{"local ms below retention", map[string]string{"retention.ms": "1000", "local.retention.ms": "0"}, nil},
		{"local ms above retention", map[string]string{"retention.ms": "1000", "local.retention.ms": "1001"},
			[]string{"Invalid value 1001 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"}},
		{"local ms above default retention", map[string]string{"local.retention.ms": "604800001"},
			[]string{"Invalid value 604800001 for configuration local.retention.ms: Value must not be more than retention.ms property value: 604800000"}},
		{"local ms -1 with limited retention", map[string]string{"local.retention.ms": "-1"},
			[]string{"Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 604800000."}},
		{"local ms anything with unlimited retention", map[string]string{"retention.ms": "-1", "local.retention.ms": "9223372036854775807"}, nil},
		{"local ms -1 with unlimited retention", map[string]string{"retention.ms": "-1", "local.retention.ms": "-1"}, nil},
		{"local bytes with unlimited retention", map[string]string{"local.retention.bytes": "1000"}, nil},
		{"local bytes equal", map[string]string{"retention.bytes": "1000", "local.retention.bytes": "1000"}, nil},
		{"local bytes above retention", map[string]string{"retention.bytes": "1000", "local.retention.bytes": "1001"},
			[]string{"Invalid value 1001 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 1000"}},
		{"local bytes -1 with limited retention", map[string]string{"retention.bytes": "0", "local.retention.bytes": "-1"},
			[]string{"Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set as 0."}},
		{"compaction lags equal", map[string]string{"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}, nil},
		{"min lag above max lag", map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
			[]string{"conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"}},
		{"remote with delete", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "delete"}, nil},
		{"remote with empty policy", map[string]string{"remote.storage.enable": "true", "cleanup.policy": ""}, nil},
		// Unlike Kafka, tiered tiers compacted topics (see crossCheck).
		{"remote with compact", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}, nil},
		{"remote with compact,delete", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "delete,compact"}, nil},
		{"compact without remote", map[string]string{"cleanup.policy": "compact"}, nil},
		// A rule with an invalid input is not checked: only the input's own problem is reported.
		{"unparsable retention skips local rule", map[string]string{"retention.ms": "x", "local.retention.ms": "604800001"},
			[]string{"Invalid value x for configuration retention.ms: Not a number of type LONG"}},
		{"out of range min lag skips lag rule", map[string]string{"min.compaction.lag.ms": "-1", "max.compaction.lag.ms": "0"},
			[]string{"Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1",
				"Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.overrides)
			got := errMessages(t, err)
			if strings.Join(got, "\n") != strings.Join(tc.msgs, "\n") {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.msgs, "\n"))
			}
			// Validate on the parsed Config reports the same when every value parsed.
			if err == nil {
				if verr := c.Validate(); verr != nil {
					t.Fatalf("Validate = %v after a clean Parse", verr)
				}
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse(map[string]string{
		"segment.bytes":         "-5",
		"zzz":                   "1",
		"cleanup.policy":        "compact",
		"remote.storage.enable": "true",
		"retention.ms":          "1000",
		"local.retention.ms":    "2000",
		"compression.type":      "brotli",
		"aaa":                   "",
		"min.compaction.lag.ms": "10",
		"max.compaction.lag.ms": "5",
	})
	want := []string{
		"Unknown topic config name: aaa",
		"Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer, none",
		"Invalid value -5 for configuration segment.bytes: Value must be at least 1048576",
		"Unknown topic config name: zzz",
		"conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
		"Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000",
	}
	got := errMessages(t, err)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The joined message lists them one per line.
	if n := strings.Count(err.Error(), "\n"); n != len(want)-1 {
		t.Fatalf("joined message has %d newlines, want %d", n, len(want)-1)
	}
}

func TestValidateCodeBuiltConfig(t *testing.T) {
	c := Defaults()
	c.SegmentBytes = 100
	c.IndexIntervalBytes = math.MaxInt32 + 1
	c.MinCleanableDirtyRatio = math.NaN()
	c.CompressionType = "brotli"
	c.MessageTimestampType = ""
	c.LocalRetentionBytes = 10
	c.RetentionBytes = 5
	want := []string{
		"Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer, none",
		"Invalid value 2147483648 for configuration index.interval.bytes: Value must be no more than 2147483647",
		"Invalid value  for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
		"Invalid value NaN for configuration min.cleanable.dirty.ratio: Value must be a finite number",
		"Invalid value 100 for configuration segment.bytes: Value must be at least 1048576",
		"Invalid value 10 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 5",
	}
	got := errMessages(t, c.Validate())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Small segments for tests go through internal.segment.bytes, which passes Validate.
	small := Defaults()
	small.InternalSegmentBytes = 1024
	if err := small.Validate(); err != nil {
		t.Fatalf("internal.segment.bytes=1024: %v", err)
	}
	if small.EffectiveSegmentBytes() != 1024 {
		t.Fatalf("EffectiveSegmentBytes = %d", small.EffectiveSegmentBytes())
	}
	small.InternalSegmentBytes = 13
	if got := errMessages(t, small.Validate()); len(got) != 1 ||
		got[0] != "Invalid value 13 for configuration internal.segment.bytes: Value must be at least 14" {
		t.Fatalf("internal.segment.bytes=13: %q", got)
	}
	// "uncompressed", Kafka's own spelling, is valid on a hand-built Config too.
	u := Defaults()
	u.CompressionType = CompressionUncompressed
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestEffectiveValues(t *testing.T) {
	c, err := Parse(map[string]string{"retention.ms": "5000", "retention.bytes": "7000",
		"local.retention.ms": "-2", "local.retention.bytes": "3000"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.EffectiveLocalRetentionMs(); got != 5000 {
		t.Errorf("EffectiveLocalRetentionMs = %d, want 5000", got)
	}
	if got := c.EffectiveLocalRetentionBytes(); got != 3000 {
		t.Errorf("EffectiveLocalRetentionBytes = %d, want 3000", got)
	}
	c.LocalRetentionMs = -1
	if got := c.EffectiveLocalRetentionMs(); got != -1 {
		t.Errorf("EffectiveLocalRetentionMs(-1) = %d", got)
	}

	seg := Defaults()
	seg.SegmentMs = 1000
	seg.MaxCompactionLagMs = 500
	if got := seg.MaxSegmentMs(); got != 1000 {
		t.Errorf("delete policy MaxSegmentMs = %d, want segment.ms", got)
	}
	seg.CleanupPolicy = Policy{Compact: true}
	if got := seg.MaxSegmentMs(); got != 500 {
		t.Errorf("compact policy MaxSegmentMs = %d, want max.compaction.lag.ms", got)
	}
}

func TestPolicyString(t *testing.T) {
	for p, want := range map[Policy]string{
		{Delete: true}: "delete", {Compact: true}: "compact", {Delete: true, Compact: true}: "compact,delete", {}: "",
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", p, got, want)
		}
		// The printed form parses back to the same policy.
		c, err := Parse(map[string]string{"cleanup.policy": want})
		if err != nil || c.CleanupPolicy != p {
			t.Errorf("Parse(%q) = %+v, %v", want, c.CleanupPolicy, err)
		}
	}
}

func TestCompressionCodec(t *testing.T) {
	cases := []struct {
		in    string
		codec int8
		keep  bool
		ok    bool
	}{
		{"producer", 0, true, true}, {"none", 0, false, true}, {"uncompressed", 0, false, true},
		{"gzip", 1, false, true}, {"snappy", 2, false, true}, {"lz4", 3, false, true}, {"zstd", 4, false, true},
		{"brotli", 0, false, false},
	}
	for _, tc := range cases {
		c := Config{CompressionType: tc.in}
		codec, keep, ok := c.CompressionCodec()
		if codec != tc.codec || keep != tc.keep || ok != tc.ok {
			t.Errorf("%s: got (%d,%v,%v), want (%d,%v,%v)", tc.in, codec, keep, ok, tc.codec, tc.keep, tc.ok)
		}
	}
}

func TestNamesSortedAndKnown(t *testing.T) {
	names := Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("Names not sorted: %v", names)
		}
	}
	for i := 1; i < len(defs); i++ {
		if defs[i-1].name >= defs[i].name {
			t.Fatalf("defs not sorted at %s", defs[i].name)
		}
	}
	for _, n := range names {
		if n == InternalSegmentBytesConfig {
			t.Fatal("Names lists the internal config")
		}
	}
}

// FuzzParse: any overrides either parse to a Config that validates, or give only
// *InvalidConfigError problems; never a panic.
func FuzzParse(f *testing.F) {
	f.Add("segment.bytes", "1048576", "cleanup.policy", "compact,delete")
	f.Add("min.cleanable.dirty.ratio", "0x1p-2", "local.retention.ms", "-1")
	f.Add("retention.ms", " -1 ", "remote.storage.enable", "TRUE")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		c, err := Parse(map[string]string{k1: v1, k2: v2})
		if err != nil {
			errMessages(t, err)
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted %q=%q %q=%q but Validate says %v", k1, v1, k2, v2, err)
		}
	})
}
