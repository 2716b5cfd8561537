// Package policy decides, per topic, whether the sidecar tiers it and with which remote
// retention: the sidecar.topics rules of the configuration (DESIGN.md, "Sidecar policy").
//
// Rules are tried in order and the first whose match accepts the topic wins; a topic no rule
// matches is not tiered. A match is a glob (path.Match syntax: *, ?, [a-z]) over the whole
// topic name. Internal topics (names starting with "__": __consumer_offsets,
// __transaction_state, __cluster_metadata) are matched only by a rule naming them exactly, so
// "*" never tiers them. With no rules at all, every non-internal topic is tiered and nothing is
// deleted remotely (retention -1/-1); the sidecar logs a WARN saying so at start-up.
//
// Decide is pure: no I/O, no clock.
package policy

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Unlimited is the retention value meaning "no limit" (Kafka's -1).
const Unlimited int64 = -1

// Rule is one sidecar.topics entry.
type Rule struct {
	// Match is the topic name or glob.
	Match string `yaml:"match" json:"match"`
	// Tier is false to keep matching topics out of the bucket; nil (omitted) means true.
	Tier *bool `yaml:"tier,omitempty" json:"tier,omitempty"`
	// RetentionMs is the remote (total) retention by age in milliseconds; nil (omitted) or -1
	// keeps everything.
	RetentionMs *int64 `yaml:"retention.ms,omitempty" json:"retention.ms,omitempty"`
	// RetentionBytes is the remote (total) retention by size per partition in bytes; nil
	// (omitted) or -1 keeps everything.
	RetentionBytes *int64 `yaml:"retention.bytes,omitempty" json:"retention.bytes,omitempty"`
}

// Tiered reports whether the rule tiers what it matches (Tier omitted or true).
func (r Rule) Tiered() bool { return r.Tier == nil || *r.Tier }

// String is the rule as a flow mapping, for messages and `tiered sidecar plan`.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{match: %q", r.Match)
	if r.Tier != nil {
		fmt.Fprintf(&b, ", tier: %t", *r.Tier)
	}
	if r.RetentionMs != nil {
		fmt.Fprintf(&b, ", retention.ms: %d", *r.RetentionMs)
	}
	if r.RetentionBytes != nil {
		fmt.Fprintf(&b, ", retention.bytes: %d", *r.RetentionBytes)
	}
	b.WriteString("}")
	return b.String()
}

// Problem is one invalid rule field, by its key inside the rule ("match", "retention.ms", ...).
type Problem struct {
	Rule  int    // index in the rule list
	Field string // key inside the rule
	Msg   string
}

func (p Problem) Error() string { return fmt.Sprintf("[%d].%s: %s", p.Rule, p.Field, p.Msg) }

// Validate reports every invalid rule: an empty or malformed match, retention below -1,
// retention on a rule that does not tier, and a rule an earlier identical match shadows.
func Validate(rules []Rule) []Problem {
	var out []Problem
	first := map[string]int{}
	for i, r := range rules {
		switch {
		case r.Match == "":
			out = append(out, Problem{i, "match", "must not be empty (a topic name or a glob such as logs-*)"})
		case !validGlob(r.Match):
			out = append(out, Problem{i, "match", fmt.Sprintf("%q is not a valid glob (syntax: *, ?, [a-z], \\ escapes)", r.Match)})
		default:
			if j, dup := first[r.Match]; dup {
				out = append(out, Problem{i, "match", fmt.Sprintf("%q never applies: rule [%d] has the same match and comes first", r.Match, j)})
			} else {
				first[r.Match] = i
			}
		}
		for _, f := range []struct {
			key string
			v   *int64
		}{{"retention.ms", r.RetentionMs}, {"retention.bytes", r.RetentionBytes}} {
			if f.v == nil {
				continue
			}
			if *f.v < Unlimited {
				out = append(out, Problem{i, f.key, fmt.Sprintf("must be -1 (keep everything) or >= 0 (got %d)", *f.v)})
			} else if !r.Tiered() {
				out = append(out, Problem{i, f.key, "has no effect on a rule with tier: false (remove one of them)"})
			}
		}
	}
	return out
}

func validGlob(p string) bool {
	_, err := path.Match(p, "")
	return !errors.Is(err, path.ErrBadPattern)
}

// Decision is what the policy says about one topic.
type Decision struct {
	// Tiered is true when the topic's partitions are uploaded.
	Tiered bool `json:"tiered"`
	// Rule is the index of the rule that decided, -1 when none did (no rules, no match, or an
	// internal topic no rule names).
	Rule int `json:"rule"`
	// Match is that rule's match ("" when Rule is -1).
	Match string `json:"match,omitempty"`
	// Reason says why, in words (e.g. `rule [1] {match: "logs-*"}`, "no rule matches").
	Reason string `json:"reason"`
	// RetentionMs and RetentionBytes are the remote retention of a tiered topic; -1 keeps
	// everything. Both are -1 for a topic that is not tiered.
	RetentionMs    int64 `json:"retention_ms"`
	RetentionBytes int64 `json:"retention_bytes"`
}

// Reasons Decide gives when no rule decided.
const (
	ReasonNoRules  = "no sidecar.topics rules: every non-internal topic is tiered, nothing deleted remotely"
	ReasonInternal = "internal topic (__*): tiered only when a rule names it exactly"
	ReasonNoMatch  = "no rule matches"
)

// Policy is a validated rule list.
type Policy struct {
	rules []Rule
}

// New returns the policy of rules, or the errors.Join of its problems.
func New(rules []Rule) (*Policy, error) {
	if ps := Validate(rules); len(ps) > 0 {
		errs := make([]error, len(ps))
		for i, p := range ps {
			errs[i] = fmt.Errorf("sidecar.topics%w", p)
		}
		return nil, errors.Join(errs...)
	}
	return &Policy{rules: append([]Rule(nil), rules...)}, nil
}

// HasRules reports whether any rule was configured (without rules, everything non-internal
// is tiered and never deleted remotely: the start-up WARN's case).
func (p *Policy) HasRules() bool { return len(p.rules) > 0 }

// Rules returns a copy of the rules.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// IsInternal reports whether topic is internal (its name starts with "__").
func IsInternal(topic string) bool { return strings.HasPrefix(topic, "__") }

// Decide returns the decision for topic.
func (p *Policy) Decide(topic string) Decision {
	internal := IsInternal(topic)
	if len(p.rules) == 0 {
		if internal {
			return notTiered(ReasonInternal)
		}
		return Decision{Tiered: true, Rule: -1, Reason: ReasonNoRules, RetentionMs: Unlimited, RetentionBytes: Unlimited}
	}
	for i, r := range p.rules {
		if internal {
			if r.Match != topic {
				continue
			}
		} else if ok, _ := path.Match(r.Match, topic); !ok {
			continue
		}
		d := Decision{Tiered: r.Tiered(), Rule: i, Match: r.Match, Reason: fmt.Sprintf("rule [%d] %s", i, r),
			RetentionMs: Unlimited, RetentionBytes: Unlimited}
		if d.Tiered {
			if r.RetentionMs != nil {
				d.RetentionMs = *r.RetentionMs
			}
			if r.RetentionBytes != nil {
				d.RetentionBytes = *r.RetentionBytes
			}
		}
		return d
	}
	if internal {
		return notTiered(ReasonInternal)
	}
	return notTiered(ReasonNoMatch)
}

// Tiered is Decide(topic).Tiered, for filters.
func (p *Policy) Tiered(topic string) bool { return p.Decide(topic).Tiered }

func notTiered(reason string) Decision {
	return Decision{Rule: -1, Reason: reason, RetentionMs: Unlimited, RetentionBytes: Unlimited}
}

// ParseTopicsFlag turns the --topics shorthand ("orders,logs-*") into rules that tier each
// listed topic or glob with no remote deletion. Blank items are an error.
func ParseTopicsFlag(s string) ([]Rule, error) {
	var rules []Rule
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("--topics item %d is empty (want e.g. 'orders,logs-*')", i+1)
		}
		rules = append(rules, Rule{Match: item})
	}
	return rules, nil
}
