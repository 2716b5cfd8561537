package brokermeta

import (
	"testing"

	"github.com/tiered/tiered/localtier/topicconfig"
)

func TestTopicDefaultsSynonyms(t *testing.T) {
	tests := []struct {
		name   string
		broker map[string]string
		want   map[string]string
	}{
		{name: "hours", broker: map[string]string{"log.retention.hours": "2"}, want: map[string]string{"retention.ms": "7200000"}},
		{name: "minutes_over_hours", broker: map[string]string{"log.retention.hours": "2", "log.retention.minutes": "3"}, want: map[string]string{"retention.ms": "180000"}},
		{name: "ms_first", broker: map[string]string{"log.retention.hours": "2", "log.retention.ms": "5"}, want: map[string]string{"retention.ms": "5"}},
		{name: "plain", broker: map[string]string{"log.cleanup.policy": "compact", "log.segment.bytes": "1048576", "message.max.bytes": "10", "num.partitions": "3"},
			want: map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "max.message.bytes": "10"}},
		{name: "bad_unit_passed_on", broker: map[string]string{"log.roll.hours": "x"}, want: map[string]string{"segment.ms": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TopicDefaults(tt.broker)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestEffective(t *testing.T) {
	c, err := effective("t", map[string]string{"log.retention.hours": "1", "log.cleanup.policy": "compact"},
		map[string]string{"cleanup.policy": "delete", "min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.RetentionMs != 3600000 || c.CleanupPolicy != (topicconfig.Policy{Delete: true}) || c.SegmentBytes != topicconfig.DefaultSegmentBytes {
		t.Errorf("effective %+v", c)
	}
	if _, err := effective("orders", nil, map[string]string{"retention.ms": "soon"}); err == nil {
		t.Error("an unparsable override was accepted")
	}
}
