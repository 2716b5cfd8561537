package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTopicCreateAlterDescribe(t *testing.T) {
	dir := t.TempDir()
	res := mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "orders", "--partitions", "3",
		"--config", "cleanup.policy=compact,delete", "--config", "compression.type=zstd")
	if res.stdout != "Created topic orders with 3 partition(s).\n" {
		t.Fatalf("create printed %q", res.stdout)
	}
	text := mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "orders").stdout
	for _, want := range []string{
		"Topic: orders\tPartitionCount: 3",
		"Partition: 2\tLogStartOffset: 0\tLogEndOffset: 0\tSegments: 1\tSize: 0",
		"cleanup.policy=compact,delete (override)",
		"compression.type=zstd (override)",
		"retention.ms=604800000 (default)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("describe lacks %q:\n%s", want, text)
		}
	}
	res = mustRun(t, "", "topic", "alter", "--data-dir", dir, "--topic", "orders", "--config", "retention.ms=1000", "--delete-config", "compression.type")
	if !strings.Contains(res.stdout, "set retention.ms=1000, deleted compression.type") {
		t.Fatalf("alter printed %q", res.stdout)
	}
	var desc topicJSON
	if err := json.Unmarshal([]byte(mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "orders", "--json").stdout), &desc); err != nil {
		t.Fatal(err)
	}
	got := map[string]configJSON{}
	for _, c := range desc.Configs {
		got[c.Name] = c
	}
	if c := got["retention.ms"]; c.Value != "1000" || c.IsDefault || c.Source != "override" {
		t.Errorf("retention.ms = %+v", c)
	}
	if c := got["compression.type"]; c.Value != "producer" || !c.IsDefault || c.Source != "default" {
		t.Errorf("compression.type = %+v", c)
	}
	if len(desc.Partitions) != 3 || desc.Topic != "orders" {
		t.Errorf("describe JSON %+v", desc)
	}
	// Without --topic: every topic.
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "audit")
	var all struct{ Topics []topicJSON }
	if err := json.Unmarshal([]byte(mustRun(t, "", "topic", "describe", "--data-dir", dir, "--json").stdout), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Topics) != 2 || all.Topics[0].Topic != "audit" || all.Topics[1].Topic != "orders" {
		t.Fatalf("all topics: %+v", all.Topics)
	}
	// create --json prints the description.
	var created topicJSON
	if err := json.Unmarshal([]byte(mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "j", "--json").stdout), &created); err != nil || created.Topic != "j" {
		t.Fatalf("create --json: %+v %v", created, err)
	}
}

func TestTopicErrors(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "t")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"exists", []string{"topic", "create", "--topic", "t"}, `topic "t" already exists`},
		{"bad_name", []string{"topic", "create", "--topic", "a/b"}, "a/b"},
		{"unknown_config", []string{"topic", "create", "--topic", "u", "--config", "no.such=1"}, "no.such"},
		{"bad_value", []string{"topic", "create", "--topic", "u", "--config", "retention.ms=soon"}, "retention.ms"},
		{"bad_combination", []string{"topic", "create", "--topic", "u", "--config", "retention.ms=1000", "--config", "local.retention.ms=2000"}, "local.retention.ms"},
		{"alter_unknown_topic", []string{"topic", "alter", "--topic", "nope", "--config", "retention.ms=1"}, `unknown topic "nope"`},
		{"alter_bad_value", []string{"topic", "alter", "--topic", "t", "--config", "cleanup.policy=sometimes"}, "cleanup.policy"},
		{"delete_unknown_config", []string{"topic", "alter", "--topic", "t", "--delete-config", "no.such"}, "unknown topic config"},
		{"describe_unknown_topic", []string{"topic", "describe", "--topic", "nope"}, `unknown topic "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, tt.args[:2]...), append([]string{"--data-dir", dir}, tt.args[2:]...)...)
			res := run(t, "", args...)
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q, want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
	if res := run(t, "", "topic", "describe", "--data-dir", dir+"/missing"); res.code != ExitError || !strings.Contains(res.stderr, "does not exist") {
		t.Fatalf("describe of a missing data dir: exit %d stderr %q", res.code, res.stderr)
	}
}

// TestTopicAlterSetAndDeleteSameKey: --config k=v with --delete-config k is
// contradictory (Kafka refuses duplicate keys in one IncrementalAlterConfigs);
// it must be a usage error that changes nothing, not "set k=v, deleted k"
// with the set silently dropped.
func TestTopicAlterSetAndDeleteSameKey(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "t", "--config", "retention.ms=1000")
	res := run(t, "", "topic", "alter", "--data-dir", dir, "--topic", "t", "--config", "retention.ms=777", "--delete-config", "retention.ms")
	if res.code != ExitUsage || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, "retention.ms") {
		t.Fatalf("exit %d stdout %q stderr %q, want 2 naming retention.ms", res.code, res.stdout, res.stderr)
	}
	text := mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "t").stdout
	if !strings.Contains(text, "retention.ms=1000 (override)") {
		t.Fatalf("the refused alter changed the topic:\n%s", text)
	}
}
