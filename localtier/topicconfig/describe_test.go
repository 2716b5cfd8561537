package topicconfig

import (
	"maps"
	"slices"
	"testing"
)

func TestDescribe(t *testing.T) {
	overrides := map[string]string{
		"cleanup.policy":   "delete, compact",
		"segment.bytes":    " 1048576",
		"retention.ms":     "604800000", // equal to the default, still an override
		"compression.type": "uncompressed",
	}
	entries, err := Describe(overrides)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(Names()) {
		t.Fatalf("%d entries, want %d", len(entries), len(Names()))
	}
	got := map[string]Entry{}
	for i, e := range entries {
		if i > 0 && entries[i-1].Name >= e.Name {
			t.Fatalf("entries not sorted by name at %s", e.Name)
		}
		got[e.Name] = e
	}
	want := []Entry{
		{"cleanup.policy", "compact,delete", false},
		{"segment.bytes", "1048576", false},
		{"retention.ms", "604800000", false},
		{"compression.type", "none", false},
		{"segment.ms", "604800000", true},
		{"local.retention.ms", "-2", true},
		{"min.cleanable.dirty.ratio", "0.5", true},
		{"max.compaction.lag.ms", "9223372036854775807", true},
		{"remote.storage.enable", "false", true},
	}
	for _, w := range want {
		if got[w.Name] != w {
			t.Errorf("entry %s = %+v, want %+v", w.Name, got[w.Name], w)
		}
	}
	nDefault := 0
	for _, e := range entries {
		if e.IsDefault {
			nDefault++
		}
	}
	if nDefault != len(entries)-len(overrides) {
		t.Errorf("%d default entries, want %d", nDefault, len(entries)-len(overrides))
	}
	if _, ok := got[InternalSegmentBytesConfig]; ok {
		t.Error("internal.segment.bytes listed without an override")
	}

	entries, err = Describe(map[string]string{InternalSegmentBytesConfig: "4096"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(entries, Entry{InternalSegmentBytesConfig, "4096", false}) {
		t.Errorf("overridden internal.segment.bytes not listed: %+v", entries)
	}

	if _, err := Describe(map[string]string{"segment.bytes": "1"}); err == nil {
		t.Error("Describe accepted an invalid override")
	}
}

func TestMerge(t *testing.T) {
	base := map[string]string{"retention.ms": "1000", "segment.bytes": "1048576", "cleanup.policy": "compact"}
	baseCopy := maps.Clone(base)
	got := Merge(base,
		map[string]string{"retention.ms": "2000", "max.message.bytes": "100", "segment.ms": "5"},
		[]string{"segment.bytes", "segment.ms", "not.there"})
	want := map[string]string{"retention.ms": "2000", "cleanup.policy": "compact", "max.message.bytes": "100"}
	if !maps.Equal(got, want) {
		t.Fatalf("Merge = %v, want %v", got, want)
	}
	if !maps.Equal(base, baseCopy) {
		t.Fatalf("Merge modified base: %v", base)
	}
	if got := Merge(nil, nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("Merge(nil,nil,nil) = %#v, want empty non-nil map", got)
	}
}
