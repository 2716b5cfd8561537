package remotetier

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/policy"
)

// TestBrokerSourcePolicy: with the per-topic policy set, the partitions of a topic it does
// not tier are never listed, so never uploaded (internal topics included), while the
// policy's tiered topics are listed as before.
func TestBrokerSourcePolicy(t *testing.T) {
	dir := t.TempDir()
	brokerdir.CopyTree(t, spooldirFixture, dir)
	upRollBroker(t, dir)
	view, err := localtier.OpenBrokerView(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) *int64 { return &v }
	no := false
	tests := []struct {
		name  string
		rules []policy.Rule
		want  string // sorted topics listed
	}{
		{name: "one_topic", rules: []policy.Rule{{Match: "test10", RetentionMs: i64(1000)}}, want: "test10"},
		{name: "glob_and_exclusion", rules: []policy.Rule{{Match: "docker-connect-status", Tier: &no}, {Match: "docker-connect-*"}},
			want: "docker-connect-configs docker-connect-offsets"},
		{name: "internal_by_name", rules: []policy.Rule{{Match: "__consumer_offsets"}, {Match: "test*"}}, want: "__consumer_offsets test10"},
		{name: "star_skips_internal", rules: []policy.Rule{{Match: "*", Tier: &no}, {Match: "__consumer_offsets"}}, want: "__consumer_offsets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol, err := policy.New(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			src := NewBrokerSource(view, nil)
			src.Tiered = pol.Tiered
			parts, err := src.Partitions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, p := range parts {
				seen[p.Topic] = true
			}
			var topics []string
			for tp := range seen {
				topics = append(topics, tp)
			}
			sort.Strings(topics)
			if got := strings.Join(topics, " "); got != tt.want {
				t.Errorf("listed %q, want %q", got, tt.want)
			}
		})
	}

	// Without rules the policy tiers every non-internal topic: no __consumer_offsets.
	pol, _ := policy.New(nil)
	src := NewBrokerSource(view, nil)
	all, err := src.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	src.Tiered = pol.Tiered
	parts, err := src.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	internal := 0
	for _, p := range all {
		if strings.HasPrefix(p.Topic, "__") {
			internal++
		}
	}
	if internal == 0 || len(parts) != len(all)-internal {
		t.Fatalf("no rules: %d listed of %d (%d internal)", len(parts), len(all), internal)
	}
	for _, p := range parts {
		if strings.HasPrefix(p.Topic, "__") {
			t.Errorf("internal partition %s-%d listed without a rule naming it", p.Topic, p.Partition)
		}
	}
}
