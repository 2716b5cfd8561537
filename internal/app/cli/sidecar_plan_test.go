package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/policy"
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

// TestSidecarPlanKRaft: plan takes the broker's configs and deletions from the log dir's
// KRaft metadata log: a topic's retention.ms override sets its broker retention and
// headroom, a cluster-wide default applies to the others, and a deleted topic is listed.
func TestSidecarPlanKRaft(t *testing.T) {
	logDir := brokerdir.Rolled(t, filepath.Join(t.TempDir(), "kafka"))
	fooID, err := localtier.ReadPartitionMetadata(vfs.Default, filepath.Join(logDir, "foo-0"))
	if err != nil {
		t.Fatal(err)
	}
	brokerdir.CopyTree(t, filepath.Join(logDir, "foo-0"), filepath.Join(logDir, "bar-0"))
	barID := localtier.TopicID{9: 9}
	if err := localtier.WritePartitionMetadata(vfs.Default, filepath.Join(logDir, "bar-0"), barID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(logDir, kraft.MetadataDir)); err != nil {
		t.Fatal(err)
	}
	l, err := kraftlog.Create(logDir)
	if err != nil {
		t.Fatal(err)
	}
	goneID := localtier.TopicID{5: 5}
	for _, batch := range [][]kraft.Record{
		{kraftlog.BrokerConfig("", "log.retention.hours", kraftlog.Value("48"))},
		{kraftlog.Topic("foo", fooID), kraftlog.Partition(fooID, 0, 1, 4, 1), kraftlog.TopicConfig("foo", "retention.ms", kraftlog.Value("3600000"))},
		{kraftlog.Topic("bar", barID), kraftlog.Partition(barID, 0, 1, 0, 1)},
		{kraftlog.Topic("gone", goneID), kraftlog.Partition(goneID, 0, 1, 0, 1)},
		{kraftlog.RemoveTopic(goneID)},
	} {
		if _, err := l.Append(batch...); err != nil {
			t.Fatal(err)
		}
	}
	res := mustRun(t, "", "sidecar", "plan", "--kafka-log-dir", logDir, "--json")
	var rep planReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Source != "kraft-metadata-log" || len(rep.Topics) != 2 {
		t.Fatalf("plan %+v", rep)
	}
	bar, foo := rep.Topics[0], rep.Topics[1]
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := view.Segments("foo", 0)
	if err != nil {
		t.Fatal(err)
	}
	const now = 1_700_000_000_000
	if foo.BrokerRetentionMs != 3600000 || foo.HeadroomMs != segs[0].MaxTimestamp+3600000-now || foo.TopicID != fooID.String() {
		t.Errorf("foo %+v", foo)
	}
	if bar.BrokerRetentionMs != 48*3600000 || bar.HeadroomMs != segs[0].MaxTimestamp+48*3600000-now || bar.TopicID != barID.String() {
		t.Errorf("bar %+v", bar)
	}
	want := []planDeleted{{Topic: "gone", TopicID: goneID.String(), MetadataOffset: l.Next() - 1, DeletedAtMs: l.LastTimestamp()}}
	if !reflect.DeepEqual(rep.Deleted, want) {
		t.Errorf("deleted %+v, want %+v", rep.Deleted, want)
	}
	text := mustRun(t, "", "sidecar", "plan", "--kafka-log-dir", logDir).stdout
	if !strings.Contains(text, "deleted: gone "+goneID.String()+" at metadata offset "+strconv.FormatInt(l.Next()-1, 10)+", 2023-11-14T22:13:20Z") {
		t.Errorf("text lacks the deletion:\n%s", text)
	}
}

// noList is a bucket reader that fails the test on a LIST and counts GETs.
type noList struct {
	objstore.BucketReader
	t    *testing.T
	gets int
}

func (b *noList) List(context.Context, string, func(objstore.ObjectInfo) error) error {
	b.t.Error("sidecar plan listed the bucket")
	return nil
}

func (b *noList) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.gets++
	return b.BucketReader.Get(ctx, key)
}

// TestPlanReadsManifestsOnly: the uploaded bytes come from one GET of each partition's root
// manifest, never a LIST.
func TestPlanReadsManifestsOnly(t *testing.T) {
	logDir := brokerdir.Rolled(t, filepath.Join(t.TempDir(), "kafka"))
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := objstore.Open(context.Background(), "mem://plan-no-list")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	u, err := remotetier.NewUploader(mem, remotetier.NewBrokerSource(view, nil), remotetier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := &noList{BucketReader: mem, t: t}
	snap := &brokermeta.Snapshot{Topics: map[string]*brokermeta.Topic{}}
	pol, _ := policy.New(nil)
	rep, err := buildPlan(context.Background(), view, snap, pol.Decide, b, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	// The topic object (which lineage is served: s15-ident's topic identity), then the
	// partition's root manifest.
	if b.gets != 2 || len(rep.Topics) != 1 || rep.Topics[0].UploadedBytes <= 0 {
		t.Errorf("%d GETs for one partition (want the topic object and the root), plan %+v", b.gets, rep.Topics)
	}
}
