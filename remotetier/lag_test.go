package remotetier

import (
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
)

func TestPartitionLag(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	segs := []LagSegment{
		{BaseOffset: 0, NextOffset: 100, Size: 1000, MaxTimestamp: 9_000_000},
		{BaseOffset: 100, NextOffset: 200, Size: 2000, MaxTimestamp: 9_500_000},
		{BaseOffset: 200, NextOffset: 300, Size: 3000, MaxTimestamp: 9_900_000},
		{BaseOffset: 300, NextOffset: 350, Size: 500, MaxTimestamp: 9_990_000, Active: true},
	}
	cfg := func(policy topicconfig.Policy, ms, bytes int64) topicconfig.Config {
		c := topicconfig.Defaults()
		c.CleanupPolicy, c.RetentionMs, c.RetentionBytes = policy, ms, bytes
		return c
	}
	del := topicconfig.Policy{Delete: true}
	tests := []struct {
		name     string
		segs     []LagSegment
		uploaded int64
		cfg      topicconfig.Config
		want     Lag
	}{
		{name: "nothing_uploaded", segs: segs, uploaded: 0, cfg: cfg(del, 2_000_000, -1),
			want: Lag{LocalBytes: 6500, Bytes: 6000, Segments: 3, OldestBase: 0, HeadroomMs: 1_000_000, HeadroomBytes: NoLimit}},
		{name: "partly_uploaded", segs: segs, uploaded: 100, cfg: cfg(del, 2_000_000, 4000),
			want: Lag{LocalBytes: 6500, Bytes: 5000, Segments: 2, OldestBase: 100, HeadroomMs: 1_500_000, HeadroomBytes: 500}},
		{name: "all_uploaded", segs: segs, uploaded: 300, cfg: cfg(del, 1, 1),
			want: Lag{LocalBytes: 6500, OldestBase: -1, HeadroomMs: NoLimit, HeadroomBytes: NoLimit}},
		{name: "overdue", segs: segs, uploaded: 0, cfg: cfg(del, 500_000, 100),
			want: Lag{LocalBytes: 6500, Bytes: 6000, Segments: 3, OldestBase: 0, HeadroomMs: 0, HeadroomBytes: 0}},
		{name: "compact_never_deletes", segs: segs, uploaded: 0, cfg: cfg(topicconfig.Policy{Compact: true}, 1, 1),
			want: Lag{LocalBytes: 6500, Bytes: 6000, Segments: 3, OldestBase: 0, HeadroomMs: NoLimit, HeadroomBytes: NoLimit}},
		{name: "no_time_retention", segs: segs, uploaded: 200, cfg: cfg(del, -1, 10_000),
			want: Lag{LocalBytes: 6500, Bytes: 3000, Segments: 1, OldestBase: 200, HeadroomMs: NoLimit, HeadroomBytes: 9500}},
		{name: "no_timestamp", segs: []LagSegment{{BaseOffset: 0, NextOffset: 1, Size: 10, MaxTimestamp: -1}, {BaseOffset: 1, NextOffset: 1, Active: true}},
			cfg: cfg(del, 1000, -1), want: Lag{LocalBytes: 10, Bytes: 10, Segments: 1, OldestBase: 0, HeadroomMs: NoLimit, HeadroomBytes: NoLimit}},
		{name: "empty", cfg: cfg(del, 1, 1), want: Lag{OldestBase: -1, HeadroomMs: NoLimit, HeadroomBytes: NoLimit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PartitionLag(tt.segs, tt.uploaded, tt.cfg, now); got != tt.want {
				t.Errorf("PartitionLag = %+v, want %+v", got, tt.want)
			}
		})
	}
}
