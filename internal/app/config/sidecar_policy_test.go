package config

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSidecarPolicyKeys: sidecar.topics, sidecar.deleted_topic_retention and --topics load
// from every layer, print, and reload to the same values.
func TestSidecarPolicyKeys(t *testing.T) {
	logDir := t.TempDir()
	file := writeFile(t, `
bucket: mem://tiered
sidecar:
  kafka_log_dir: `+logDir+`
  deleted_topic_retention: -1
  topics:
    - {match: "orders", retention.ms: 7776000000, retention.bytes: -1}
    - {match: "logs-*", retention.ms: 2592000000}
    - {match: "scratch-*", tier: false}
`)
	c := mustLoad(t, LoadOptions{File: file, Process: ProcessSidecar})
	if !c.Sidecar.DeletedTopicRetention.Keep() || c.Source("sidecar.deleted_topic_retention") != SourceFile {
		t.Errorf("deleted_topic_retention %v (%s)", c.Sidecar.DeletedTopicRetention, c.Source("sidecar.deleted_topic_retention"))
	}
	pol, err := c.Sidecar.Policy()
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"orders": "true 7776000000 -1", "logs-a": "true 2592000000 -1", "scratch-1": "false -1 -1", "other": "false -1 -1"} {
		d := pol.Decide(topic)
		if got := fmt.Sprintf("%t %d %d", d.Tiered, d.RetentionMs, d.RetentionBytes); got != want {
			t.Errorf("%s: %s, want %s", topic, got, want)
		}
	}
	var out bytes.Buffer
	if err := c.WriteYAML(&out, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deleted_topic_retention: -1 # file", "topics: # file", "match: logs-*", "retention.ms: 7776000000", "tier: false"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config print lacks %q:\n%s", want, out.String())
		}
	}
	c2 := mustLoad(t, LoadOptions{File: writeFile(t, out.String()), Process: ProcessSidecar})
	var p1, p2 bytes.Buffer
	_ = c.WriteYAML(&p1, false)
	_ = c2.WriteYAML(&p2, false)
	if p1.String() != p2.String() {
		t.Errorf("round trip differs:\n%s\n%s", p1.String(), p2.String())
	}

	// Defaults: 24h, no rules.
	d := mustLoad(t, LoadOptions{Process: ProcessSidecar, Flags: map[string]string{"bucket": "mem://b", "kafka-log-dir": logDir}})
	if d.Sidecar.DeletedTopicRetention != RetentionDuration(24*time.Hour) || len(d.Sidecar.Topics) != 0 {
		t.Errorf("defaults: %v %v", d.Sidecar.DeletedTopicRetention, d.Sidecar.Topics)
	}
	var def bytes.Buffer
	_ = d.WriteYAML(&def, true)
	if !strings.Contains(def.String(), "deleted_topic_retention: 24h0m0s # default") {
		t.Errorf("default print:\n%s", def.String())
	}

	// --topics replaces the file's rules; the environment sets the list as YAML; 0 = at once.
	c = mustLoad(t, LoadOptions{File: file, Process: ProcessSidecar,
		Env:   []string{"TIERED_SIDECAR_DELETED_TOPIC_RETENTION=0"},
		Flags: map[string]string{"topics": "orders, logs-*"}})
	if len(c.Sidecar.Topics) != 2 || c.Sidecar.Topics[1].Match != "logs-*" || c.Sidecar.Topics[0].RetentionMs != nil ||
		c.Source("sidecar.topics") != SourceFlag || c.Sidecar.DeletedTopicRetention != 0 || c.Sidecar.DeletedTopicRetention.Keep() {
		t.Errorf("--topics: %+v (%s), deleted %v", c.Sidecar.Topics, c.Source("sidecar.topics"), c.Sidecar.DeletedTopicRetention)
	}
	c = mustLoad(t, LoadOptions{Process: ProcessSidecar, Flags: map[string]string{"bucket": "mem://b", "kafka-log-dir": logDir},
		Env: []string{`TIERED_SIDECAR_TOPICS=[{match: a, retention.bytes: 10}]`}})
	if len(c.Sidecar.Topics) != 1 || *c.Sidecar.Topics[0].RetentionBytes != 10 || c.Source("sidecar.topics") != SourceEnv {
		t.Errorf("env topics: %+v", c.Sidecar.Topics)
	}
}

// TestSidecarPolicyProblems: each bad policy value is one problem at its key path.
func TestSidecarPolicyProblems(t *testing.T) {
	logDir := t.TempDir()
	cases := []struct {
		name, yaml string
		flags      map[string]string
		path, msg  string
		line       int
	}{
		{name: "retention_not_duration", yaml: "sidecar:\n  deleted_topic_retention: a day\n", path: "sidecar.deleted_topic_retention", line: 2, msg: "is not a duration or -1"},
		{name: "retention_negative", yaml: "sidecar:\n  deleted_topic_retention: -5m\n", path: "sidecar.deleted_topic_retention", line: 2, msg: "must be -1 (keep), 0 (remove at once)"},
		{name: "topics_not_list", yaml: "sidecar:\n  topics: orders\n", path: "sidecar.topics", line: 2, msg: "want a list, got a value"},
		{name: "rule_unknown_key", yaml: "sidecar:\n  topics:\n    - {match: a, retention_ms: 5}\n", path: "sidecar.topics[0].retention_ms", line: 3, msg: "unknown key (known: match, tier, retention.ms, retention.bytes)"},
		{name: "rule_no_match", yaml: "sidecar:\n  topics:\n    - {tier: true}\n", path: "sidecar.topics[0].match", line: 3, msg: "must not be empty"},
		{name: "rule_bad_glob", yaml: "sidecar:\n  topics:\n    - {match: a}\n    - {match: \"b[\"}\n", path: "sidecar.topics[1].match", line: 4, msg: "is not a valid glob"},
		{name: "rule_bad_tier", yaml: "sidecar:\n  topics:\n    - {match: a, tier: sometimes}\n", path: "sidecar.topics[0].tier", line: 3, msg: `"sometimes" is not true or false`},
		{name: "rule_bad_retention", yaml: "sidecar:\n  topics:\n    - {match: a, retention.ms: -7}\n", path: "sidecar.topics[0].retention.ms", line: 3, msg: "must be -1 (keep everything) or >= 0"},
		{name: "rule_retention_not_int", yaml: "sidecar:\n  topics:\n    - {match: a, retention.bytes: 1GB}\n", path: "sidecar.topics[0].retention.bytes", line: 3, msg: `"1GB" is not an integer`},
		{name: "rule_tier_false_retention", yaml: "sidecar:\n  topics:\n    - {match: a, tier: false, retention.ms: 5}\n", path: "sidecar.topics[0].retention.ms", line: 3, msg: "has no effect"},
		{name: "flag_empty_item", flags: map[string]string{"topics": "a,,b"}, path: "sidecar.topics", msg: "flag --topics: sidecar.topics: --topics item 2 is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := LoadOptions{Process: ProcessSidecar, Flags: map[string]string{"bucket": "mem://b", "kafka-log-dir": logDir}}
			for k, v := range tc.flags {
				opts.Flags[k] = v
			}
			if tc.yaml != "" {
				opts.File = writeFile(t, tc.yaml)
			}
			_, err := Load(opts)
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Path != tc.path || !strings.Contains(ps[0].Error(), tc.msg) {
				t.Fatalf("want one problem at %s containing %q, got:\n%v", tc.path, tc.msg, err)
			}
			if tc.line != 0 && ps[0].Line != tc.line {
				t.Errorf("problem %q at line %d, want %d", ps[0].Error(), ps[0].Line, tc.line)
			}
		})
	}
}
