package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// damagedDataDir writes topic "t" with 4 segments of 10 records (values
// v0..v39) and truncates segment 0 in the middle of its 4th batch: the
// issue's case of a torn flushed segment with intact segments after it.
func damagedDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	now := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	l, err := d.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var enc record.Encoder
	var batchSize int
	for i := 0; i < 20; i++ {
		if i > 0 && i%5 == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		recs := []record.Record{{Offset: 0, Timestamp: 1_700_000_000_000, Value: []byte(fmt.Sprintf("v%d", 2*i))},
			{Offset: 1, Timestamp: 1_700_000_000_000, Value: []byte(fmt.Sprintf("v%d", 2*i+1))}}
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
		if err != nil {
			t.Fatal(err)
		}
		batchSize = len(b)
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Keep 3 whole batches (v0..v5) and half of the 4th.
	if err := os.Truncate(segPath(dir, "t", 0), int64(3*batchSize+batchSize/2)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dirSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == ".lock" {
			return err
		}
		b, err := os.ReadFile(path)
		sum := sha256.Sum256(b)
		out[path] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadOnlyCommandsLeaveDamagedDirUntouched: consume --data-dir, topic
// describe and inspect read a data dir with a torn segment without changing
// a byte of it, and consume continues at the next good segment.
func TestReadOnlyCommandsLeaveDamagedDirUntouched(t *testing.T) {
	dir := damagedDataDir(t)
	before := dirSums(t, dir)
	var want []string
	for i := 0; i < 40; i++ {
		if i < 6 || i >= 10 {
			want = append(want, fmt.Sprintf("v%d", i))
		}
	}
	res := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "t", "--partition", "0")
	if got := values(t, res.stdout); got != strings.Join(want, ",") {
		t.Fatalf("consume printed %s\nwant %s\nstderr %s", got, strings.Join(want, ","), res.stderr)
	}
	if !strings.Contains(res.stderr, "in memory") || !strings.Contains(res.stderr, "4 offsets skipped") {
		t.Fatalf("consume stderr %q does not say what recovery skipped", res.stderr)
	}
	res = mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "t", "--json")
	if !strings.Contains(res.stdout, `"log_end_offset": 40`) {
		t.Fatalf("describe: %s", res.stdout)
	}
	mustRun(t, "", "inspect", "segment", filepath.Join(dir, "t-0", localtier.FilenamePrefix(10)+localtier.LogSuffix))
	if after := dirSums(t, dir); !maps.Equal(before, after) {
		t.Fatalf("read-only commands changed the data dir:\nbefore %v\nafter  %v", before, after)
	}
	// A writing command recovers on disk by the same rule: only segment 0 loses its tail.
	mustRun(t, "", "retention", "--data-dir", dir)
	res = mustRun(t, "", "consume", "--data-dir", dir, "--topic", "t", "--partition", "0")
	if got := values(t, res.stdout); got != strings.Join(want, ",") {
		t.Fatalf("after on-disk recovery consume printed %s", got)
	}
}

// TestDataDirSilentCasesAreLoud: a topic config file gone makes every
// command refuse the data dir naming the file; a log start checkpoint past
// the log end is clamped with a warning naming the checkpoint.
func TestDataDirSilentCasesAreLoud(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "r", "--config", "remote.storage.enable=true")
	produceN(t, dir, "r", 0, 3)

	cp := filepath.Join(dir, localtier.LogStartOffsetCheckpoint)
	if err := os.WriteFile(cp, []byte("0\n1\nr 0 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "r", "--json")
	if !strings.Contains(res.stderr, "warning") || !strings.Contains(res.stderr, cp) || !strings.Contains(res.stdout, `"log_start_offset": 3`) {
		t.Fatalf("clamped log start: stdout %s stderr %q", res.stdout, res.stderr)
	}

	cfg := filepath.Join(dir, ".tiered", "topics", "r.json")
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"consume", "--data-dir", dir, "--topic", "r", "--partition", "0"},
		{"topic", "describe", "--data-dir", dir},
		{"retention", "--data-dir", dir},
	} {
		res := run(t, "", args...)
		if res.code != ExitError || !strings.Contains(res.stderr, cfg) || !strings.Contains(res.stderr, "missing") {
			t.Fatalf("tiered %s with the topic config gone: exit %d, stderr %q", strings.Join(args, " "), res.code, res.stderr)
		}
	}
}
