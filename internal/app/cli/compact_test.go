package cli

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompactCommand: Kafka's documented example through the commands: K1,
// K2, K1, K3, K2, K3(tombstone)... keeps the latest per key, offsets stable.
func TestCompactCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "users", "--config", "cleanup.policy=compact",
		"--config", "segment.ms=1000", "--config", "delete.retention.ms=0")
	// Offsets 0-6: K1 V1, K2 V2, K1 V3, K1 V4, K3 V5, K2 V6, K3 null.
	lines := []string{`{"key":"K1","value":"V1"`, `{"key":"K2","value":"V2"`, `{"key":"K1","value":"V3"`,
		`{"key":"K1","value":"V4"`, `{"key":"K3","value":"V5"`, `{"key":"K2","value":"V6"`, `{"key":"K3","value":null`}
	var in strings.Builder
	for i, l := range lines {
		in.WriteString(l + `,"timestamp":` + strconv.FormatInt(1_600_000_000_000+int64(i), 10) + "}\n")
	}
	mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", "users")
	// A later record rolls the segment so the first one is cleanable.
	mustRun(t, `{"key":"K4","value":"V7","timestamp":1600000100000}`+"\n", "produce", "--data-dir", dir, "--topic", "users")
	res := mustRun(t, "", "compact", "--data-dir", dir, "--json")
	var rep struct {
		LogsCleaned int `json:"logs_cleaned"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || rep.LogsCleaned != 1 {
		t.Fatalf("report %q: %v", res.stdout, err)
	}
	out := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "users", "--partition", "0").stdout
	var offsets []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Offset int64   `json:"offset"`
			Key    string  `json:"key"`
			Value  *string `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, strconv.FormatInt(r.Offset, 10)+":"+r.Key)
	}
	// K1 V4 at 3, K2 V6 at 5, K3's tombstone at 6 (kept until its horizon is seen
	// passed by a later run), K4 at 7 in the active segment.
	if got := strings.Join(offsets, " "); got != "3:K1 5:K2 6:K3 7:K4" {
		t.Fatalf("after compaction: %s", got)
	}
	if res := run(t, "", "compact", "--data-dir", dir, "--topic", "nope"); res.code != 1 {
		t.Fatalf("unknown topic: %+v", res)
	}
}
