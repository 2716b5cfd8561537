package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCheckpointIsOutput: a checkpoint path naming the output file
// (or the temporary the checkpoint is written through) is refused before
// anything is written. Before, the job ran and reported success while each
// checkpoint replaced the output (the file ended holding only the
// checkpoint) or truncated it.
func TestReplayCheckpointIsOutput(t *testing.T) {
	src := NewCatalogReplaySource(oneCatalog{newLegacyPartition(t)})
	dir := t.TempDir()
	for name, paths := range map[string][2]string{
		"same":           {filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "a.jsonl")},
		"same_uncleaned": {filepath.Join(dir, "b.jsonl"), filepath.Join(dir, ".", "x", "..", "b.jsonl")},
		"tmp_is_output":  {filepath.Join(dir, "c.tmp"), filepath.Join(dir, "c")},
	} {
		out, cp := paths[0], paths[1]
		_, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 1000, To: 1200,
			OutPath: out, CheckpointPath: cp})
		if err == nil || !strings.Contains(err.Error(), "would overwrite the output") {
			b, _ := os.ReadFile(out)
			t.Errorf("%s: err %v; output now %.80q", name, err, b)
			continue
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output touched: %v", name, err)
		}
	}
}
