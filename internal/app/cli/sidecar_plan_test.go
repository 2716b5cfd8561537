package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestSidecarPlan: `tiered sidecar plan` over a copy of a real KRaft broker's log dir (foo
// with one rolled segment; a second topic scratch) says which topic is tiered by which
// rule, with its topic ID, the broker's retention, local and uploaded bytes, lag and
// headroom — before and after an upload — in JSON and text.
func TestSidecarPlan(t *testing.T) {
	root := t.TempDir()
	logDir := brokerdir.Rolled(t, filepath.Join(root, "kafka"))
	brokerdir.CopyTree(t, filepath.Join(logDir, "foo-0"), filepath.Join(logDir, "scratch-0"))
	scratchID := localtier.TopicID{7: 7}
	if err := localtier.WritePartitionMetadata(vfs.Default, filepath.Join(logDir, "scratch-0"), scratchID); err != nil {
		t.Fatal(err)
	}
	bucketURL := "file://" + filepath.Join(root, "bucket")
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	fooID, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(logDir, "foo-0"))
	if err != nil {
		t.Fatal(err)
	}
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := view.Segments("foo", 0)
	if err != nil {
		t.Fatal(err)
	}
	seg0 := segs[0]
	const now, week = 1_700_000_000_000, 604800000 // run's clock; Kafka's default retention.ms

	plan := func() planReport {
		t.Helper()
		res := mustRun(t, "", "sidecar", "plan", "--kafka-log-dir", logDir, "--bucket", bucketURL, "--topics", "foo,logs-*", "--json")
		var rep planReport
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("json: %v\n%s", err, res.stdout)
		}
		if rep.Source != "kraft-metadata-log" || len(rep.Topics) != 2 || rep.Topics[0].Topic != "foo" || rep.Topics[1].Topic != "scratch" {
			t.Fatalf("plan %+v", rep)
		}
		return rep
	}
	rep := plan()
	foo, scratch := rep.Topics[0], rep.Topics[1]
	wantFoo := planTopic{Topic: "foo", TopicID: fooID.String(), Tiered: true, Rule: 0, RemoteRetentionMs: -1, RemoteRetentionBytes: -1,
		CleanupPolicy: "delete", BrokerRetentionMs: week, BrokerRetentionBytes: -1,
		LocalBytes: seg0.Size, UploadedBytes: 0, LagBytes: seg0.Size, LagSegments: 1,
		HeadroomMs: seg0.MaxTimestamp + week - now, HeadroomBytes: -1}
	if len(foo.Partitions) != 1 || foo.Partitions[0].OldestBase != 0 {
		t.Errorf("foo's partitions %+v", foo.Partitions)
	}
	foo.Partitions, foo.Reason = nil, ""
	if !reflect.DeepEqual(foo, wantFoo) {
		t.Errorf("foo before the upload:\n got %+v\nwant %+v", foo, wantFoo)
	}
	if scratch.Tiered || scratch.Reason != "no rule matches" || scratch.TopicID != scratchID.String() || scratch.LagSegments != 1 {
		t.Errorf("scratch %+v", scratch)
	}

	// Upload what the sidecar would (foo only), then plan again: uploaded, no lag.
	b, err := objstore.Open(context.Background(), bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	src := remotetier.NewBrokerSource(view, nil)
	src.Tiered = func(topic string) bool { return topic == "foo" }
	u, err := remotetier.NewUploader(b, src, remotetier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.Close()
	rep = plan()
	foo = rep.Topics[0]
	if foo.UploadedBytes != seg0.Size || foo.LagBytes != 0 || foo.LagSegments != 0 || foo.HeadroomMs != -1 || foo.Partitions[0].UploadedEnd != seg0.NextOffset {
		t.Errorf("foo after the upload: %+v", foo)
	}
	if rep.Topics[1].UploadedBytes != 0 {
		t.Errorf("scratch uploaded %d bytes", rep.Topics[1].UploadedBytes)
	}

	// Text, without a bucket.
	res := mustRun(t, "", "sidecar", "plan", "--kafka-log-dir", logDir, "--topics", "foo")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 5 || lines[0] != "source: kraft-metadata-log" || !strings.HasPrefix(lines[1], "bucket: -") {
		t.Fatalf("text:\n%s", res.stdout)
	}
	for i, want := range [][]string{
		{"TOPIC", "TIERED", "TOPIC_ID", "PARTITIONS", "REMOTE_RETENTION", "BROKER_RETENTION", "LOCAL_BYTES", "UPLOADED_BYTES", "LAG_BYTES", "LAG_SEGMENTS", "HEADROOM", "HEADROOM_BYTES", "WHY"},
		{"foo", "yes", fooID.String(), "1", "ms=-1,bytes=-1", "delete,ms=604800000,bytes=-1", strconv.FormatInt(seg0.Size, 10), "-", strconv.FormatInt(seg0.Size, 10), "1",
			(time.Duration(seg0.MaxTimestamp+week-now) * time.Millisecond).String(), "-", "rule", "[0]", `{match:`, `"foo"}`},
		{"scratch", "no", scratchID.String(), "1", "-", "delete,ms=604800000,bytes=-1", strconv.FormatInt(seg0.Size, 10), "-", strconv.FormatInt(seg0.Size, 10), "1", "3s", "-", "no", "rule", "matches"},
	} {
		got := strings.Fields(lines[2+i])
		if i == 2 {
			want[10] = got[10] // scratch's headroom: the same segment as foo's
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d:\n got %q\nwant %q", 2+i, got, want)
		}
	}

	// Usage errors.
	if res := run(t, "", "sidecar", "plan"); res.code != ExitUsage || !strings.Contains(res.stderr, "sidecar.kafka_log_dir") {
		t.Errorf("without a log dir: %d %s", res.code, res.stderr)
	}
	if res := run(t, "", "sidecar", "plan", "--kafka-log-dir", logDir, "--topics", "a,,b"); res.code != ExitUsage || !strings.Contains(res.stderr, "--topics item 2 is empty") {
		t.Errorf("bad --topics: %d %s", res.code, res.stderr)
	}
}
