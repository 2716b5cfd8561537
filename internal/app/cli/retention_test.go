package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetentionCommand: three rolled segments of old records are deleted by
// retention.ms; the dry run reports them and changes nothing.
func TestRetentionCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// The Runner's clock is 1_700_000_000_000; a day is 86_400_000 ms.
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "logs", "--config", "segment.ms=1000", "--config", "retention.ms=86400000")
	var in strings.Builder
	for i := 0; i < 4; i++ {
		// Each line is 2 s after the previous one: every append rolls (segment.ms=1000).
		fmt.Fprintf(&in, `{"key":"k%d","value":"v","timestamp":%d}`+"\n", i, 1_600_000_000_000+int64(i)*2000)
		mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", "logs")
		in.Reset()
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "logs-0", "*.log"))
	if len(segs) != 4 {
		t.Fatalf("%d segments, want 4", len(segs))
	}
	res := mustRun(t, "", "retention", "--data-dir", dir, "--dry-run", "--json")
	var rep struct {
		DryRun   bool `json:"dry_run"`
		Segments []struct {
			BaseOffset int64  `json:"base_offset"`
			Reason     string `json:"reason"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("json report %q: %v", res.stdout, err)
	}
	if !rep.DryRun || len(rep.Segments) != 3 || rep.Segments[0].Reason != "retention.ms" {
		t.Fatalf("dry run report %+v", rep)
	}
	if after, _ := filepath.Glob(filepath.Join(dir, "logs-0", "*.log")); len(after) != 4 {
		t.Fatalf("dry run deleted files: %d left", len(after))
	}
	res = mustRun(t, "", "retention", "--data-dir", dir)
	if !strings.Contains(res.stdout, "retention.ms") {
		t.Fatalf("report %q", res.stdout)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "logs-0", "*.log"))
	if len(after) != 1 || filepath.Base(after[0]) != "00000000000000000003.log" {
		t.Fatalf("segments left: %v", after)
	}
	out := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "logs", "--partition", "0").stdout
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"offset":3`) {
		t.Fatalf("consume after retention: %q", out)
	}
	if res := run(t, "", "retention", "--data-dir", dir, "--topic", "nope"); res.code != 1 || !strings.Contains(res.stderr, "nope") {
		t.Fatalf("unknown topic: %+v", res)
	}
	if res := run(t, "", "retention", "--data-dir", dir, "--bogus"); res.code != 2 || strings.Count(res.stderr, "\n") != 1 {
		t.Fatalf("bad flag: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs-0", "00000000000000000000.log.deleted")); err == nil {
		t.Fatal(".deleted file left behind")
	}
}

// TestRetentionUnknownTopicWithBucket: an unknown --topic with --bucket is
// reported once, as without --bucket, not once per pass ("unknown topic
// "nope"; unknown topic "nope""), and no pass runs.
func TestRetentionUnknownTopicWithBucket(t *testing.T) {
	dir, bucket := rolledWithBucket(t, 2)
	res := run(t, "", "retention", "--data-dir", dir, "--topic", "nope", "--bucket", fileURL(bucket))
	if res.code != 1 || strings.Count(res.stderr, `unknown topic "nope"`) != 1 || len(lines(res.stderr)) != 1 {
		t.Fatalf("retention --topic nope --bucket: exit %d, stderr %q; want exit 1 naming the topic once", res.code, res.stderr)
	}
}
