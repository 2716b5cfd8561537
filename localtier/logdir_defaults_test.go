package localtier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestLogDirTopicDefaults: broker-wide topic defaults sit between Kafka's
// defaults and each topic's overrides, validate together with them, stay
// "default" in describe, and ReloadTopicConfigs applies new defaults and the
// override files on disk, or nothing when any topic would be invalid.
func TestLogDirTopicDefaults(t *testing.T) {
	dir := t.TempDir()
	d, _, err := OpenLogDir(vfs.Default, dir, LogDirOptions{TopicDefaults: map[string]string{"retention.ms": "100000", "segment.ms": "7000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tp, err := d.CreateTopic("t", 1, map[string]string{"segment.ms": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if c := tp.Partitions[0].Config(); c.RetentionMs != 100000 || c.SegmentMs != 5000 {
		t.Fatalf("config %d/%d: want the broker's retention.ms and the topic's segment.ms", c.RetentionMs, c.SegmentMs)
	}
	// local.retention.ms is checked against the broker-wide retention.ms.
	if _, err := d.CreateTopic("bad", 1, map[string]string{"local.retention.ms": "200000"}); err == nil || !strings.Contains(err.Error(), "retention.ms") {
		t.Fatalf("local.retention.ms over the broker's retention.ms: %v", err)
	}
	desc, err := d.DescribeTopic("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range desc.Configs {
		switch e.Name {
		case "retention.ms":
			if e.Value != "100000" || !e.IsDefault {
				t.Fatalf("retention.ms %+v: want the broker default, marked default", e)
			}
		case "segment.ms":
			if e.Value != "5000" || e.IsDefault {
				t.Fatalf("segment.ms %+v: want the override", e)
			}
		}
	}

	// An override written behind the log dir's back (another tool) and new
	// broker defaults take effect on reload.
	if err := os.WriteFile(filepath.Join(dir, metaDir, "topics", "t.json"), topicconfig.EncodeOverrides(map[string]string{"segment.ms": "6000"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReloadTopicConfigs(map[string]string{"retention.ms": "300000"}); err != nil {
		t.Fatal(err)
	}
	if c := tp.Partitions[0].Config(); c.RetentionMs != 300000 || c.SegmentMs != 6000 {
		t.Fatalf("after reload: %d/%d", c.RetentionMs, c.SegmentMs)
	}
	// Defaults that make a topic invalid change nothing.
	if err := d.ReloadTopicConfigs(map[string]string{"segment.bytes": "5"}); err == nil {
		t.Fatal("reload accepted an invalid broker default")
	}
	if c := tp.Partitions[0].Config(); c.RetentionMs != 300000 || d.TopicDefaults()["retention.ms"] != "300000" {
		t.Fatalf("a refused reload changed the config: %d %v", c.RetentionMs, d.TopicDefaults())
	}
}
