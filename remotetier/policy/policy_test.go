package policy

import (
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }
func boolp(v bool) *bool { return &v }

// The DESIGN.md example policy.
var designRules = []Rule{
	{Match: "orders", RetentionMs: i64(7776000000), RetentionBytes: i64(-1)},
	{Match: "logs-*", RetentionMs: i64(2592000000)},
	{Match: "scratch-*", Tier: boolp(false)},
	{Match: "__consumer_offsets"},
	{Match: "*", RetentionBytes: i64(1 << 30)},
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name   string
		rules  []Rule
		topic  string
		want   Decision
		reason string // substring of Reason
	}{
		{name: "exact", rules: designRules, topic: "orders",
			want: Decision{Tiered: true, Rule: 0, Match: "orders", RetentionMs: 7776000000, RetentionBytes: -1}, reason: `rule [0] {match: "orders"`},
		{name: "glob", rules: designRules, topic: "logs-app",
			want: Decision{Tiered: true, Rule: 1, Match: "logs-*", RetentionMs: 2592000000, RetentionBytes: -1}, reason: "rule [1]"},
		{name: "glob_needs_whole_name", rules: designRules[:3], topic: "xlogs-app",
			want: Decision{Rule: -1, RetentionMs: -1, RetentionBytes: -1}, reason: ReasonNoMatch},
		{name: "tier_false", rules: designRules, topic: "scratch-1",
			want: Decision{Rule: 2, Match: "scratch-*", RetentionMs: -1, RetentionBytes: -1}, reason: "tier: false"},
		{name: "first_match_wins", rules: designRules, topic: "logs-*x",
			want: Decision{Tiered: true, Rule: 1, Match: "logs-*", RetentionMs: 2592000000, RetentionBytes: -1}},
		{name: "catch_all", rules: designRules, topic: "payments",
			want: Decision{Tiered: true, Rule: 4, Match: "*", RetentionMs: -1, RetentionBytes: 1 << 30}},
		{name: "internal_named_exactly", rules: designRules, topic: "__consumer_offsets",
			want: Decision{Tiered: true, Rule: 3, Match: "__consumer_offsets", RetentionMs: -1, RetentionBytes: -1}},
		{name: "internal_not_by_glob", rules: designRules, topic: "__transaction_state",
			want: Decision{Rule: -1, RetentionMs: -1, RetentionBytes: -1}, reason: ReasonInternal},
		{name: "internal_not_by_prefix_glob", rules: []Rule{{Match: "__*"}}, topic: "__consumer_offsets",
			want: Decision{Rule: -1, RetentionMs: -1, RetentionBytes: -1}, reason: ReasonInternal},
		{name: "no_rules_tiers_all", topic: "orders",
			want: Decision{Tiered: true, Rule: -1, RetentionMs: -1, RetentionBytes: -1}, reason: ReasonNoRules},
		{name: "no_rules_not_internal", topic: "__cluster_metadata",
			want: Decision{Rule: -1, RetentionMs: -1, RetentionBytes: -1}, reason: ReasonInternal},
		{name: "class_glob", rules: []Rule{{Match: "t[0-9]"}}, topic: "t7",
			want: Decision{Tiered: true, Rule: 0, Match: "t[0-9]", RetentionMs: -1, RetentionBytes: -1}},
		{name: "zero_retention", rules: []Rule{{Match: "a", RetentionMs: i64(0), RetentionBytes: i64(0)}}, topic: "a",
			want: Decision{Tiered: true, Rule: 0, Match: "a", RetentionMs: 0, RetentionBytes: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Decide(tt.topic)
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", got.Reason, tt.reason)
			}
			got.Reason = ""
			if got != tt.want {
				t.Errorf("Decide(%q) = %+v, want %+v", tt.topic, got, tt.want)
			}
			if p.Tiered(tt.topic) != tt.want.Tiered {
				t.Errorf("Tiered(%q) disagrees with Decide", tt.topic)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		want  []string // Problem.Error() substrings, in order
	}{
		{name: "ok", rules: designRules},
		{name: "empty_match", rules: []Rule{{}}, want: []string{"[0].match: must not be empty"}},
		{name: "bad_glob", rules: []Rule{{Match: "a"}, {Match: "logs-["}}, want: []string{`[1].match: "logs-[" is not a valid glob`}},
		{name: "retention_below_minus_one", rules: []Rule{{Match: "a", RetentionMs: i64(-2), RetentionBytes: i64(-5)}},
			want: []string{"[0].retention.ms: must be -1", "[0].retention.bytes: must be -1"}},
		{name: "retention_without_tier", rules: []Rule{{Match: "a", Tier: boolp(false), RetentionMs: i64(1)}},
			want: []string{"[0].retention.ms: has no effect on a rule with tier: false"}},
		{name: "shadowed", rules: []Rule{{Match: "a*"}, {Match: "b"}, {Match: "a*"}},
			want: []string{`[2].match: "a*" never applies: rule [0]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Validate(tt.rules)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %v, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("problem %d %q, want %q", i, got[i].Error(), w)
				}
			}
			if _, err := New(tt.rules); (err != nil) != (len(tt.want) > 0) {
				t.Errorf("New: %v", err)
			} else if err != nil && !strings.Contains(err.Error(), "sidecar.topics[") {
				t.Errorf("New's error %q lacks the key path", err)
			}
		})
	}
}

func TestParseTopicsFlag(t *testing.T) {
	rules, err := ParseTopicsFlag(" orders, logs-* ")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].Match != "orders" || rules[1].Match != "logs-*" || !rules[0].Tiered() ||
		rules[0].RetentionMs != nil || rules[1].RetentionBytes != nil {
		t.Fatalf("rules %+v", rules)
	}
	for _, bad := range []string{"", "a,,b", "a,"} {
		if _, err := ParseTopicsFlag(bad); err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("ParseTopicsFlag(%q): %v", bad, err)
		}
	}
}
