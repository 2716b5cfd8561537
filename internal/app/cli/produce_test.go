package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/internal/app/daemon"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

func TestProduceConsumeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := strings.Join([]string{
		`{"key":"k1","value":"hello","timestamp":1000,"headers":[{"key":"h1","value":"v1"},{"key":"h2","value":null}]}`,
		``, // blank lines are skipped
		`{"key":"k1","value":null,"timestamp":1001}`,
		`{"key_b64":"/wABgA==","value_b64":"3q2+7w==","timestamp":1002}`,
		`{"value":"no key, no timestamp"}`,
	}, "\n")
	res := mustRun(t, in, "produce", "--data-dir", dir, "--topic", "events")
	if !strings.Contains(res.stderr, "4 records in 1 batches to 1 partition(s) of events (0: offsets 0-3)") {
		t.Fatalf("summary %q", res.stderr)
	}
	out := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "events", "--partition", "0")
	want := []string{
		`{"partition":0,"offset":0,"timestamp":1000,"key":"k1","value":"hello","headers":[{"key":"h1","value":"v1"},{"key":"h2","value":null}]}`,
		`{"partition":0,"offset":1,"timestamp":1001,"key":"k1","value":null,"headers":[]}`,
		`{"partition":0,"offset":2,"timestamp":1002,"key_b64":"/wABgA==","value_b64":"3q2+7w==","headers":[]}`,
		`{"partition":0,"offset":3,"timestamp":1700000000000,"key":null,"value":"no key, no timestamp","headers":[]}`,
	}
	if got := lines(out.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("consume printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// consume output is valid produce input: feeding it back appends copies.
	mustRun(t, out.stdout, "produce", "--data-dir", dir, "--topic", "events")
	again := lines(mustRun(t, "", "consume", "--data-dir", dir, "--topic", "events", "--partition", "0", "--from-offset", "4").stdout)
	if len(again) != 4 || !strings.Contains(again[2], `"offset":6`) || !strings.Contains(again[2], `"key_b64":"/wABgA=="`) {
		t.Fatalf("re-produced records: %v", again)
	}
}

func TestProduceInvalidLineAppendsNothing(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"bad_json", "{\"value\":\"a\"}\n{\"value\":\"b\"}\n{\"value\": oops}\n", "line 3: invalid JSON"},
		{"unknown_field", "{\"value\":\"a\"}\n{\"vaule\":\"b\"}\n", `line 2: unknown field "vaule"`},
		{"not_an_object", "{\"value\":\"a\"}\n\n\"text\"\n", "line 3: expected a JSON object"},
		{"bad_base64", "{\"value_b64\":\"%%%\"}\n", "line 1: value_b64 is not valid base64"},
		{"last_line_without_newline", "{\"value\":\"a\"}\n{", "line 2: invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "t")
			res := run(t, tt.input, "produce", "--data-dir", dir, "--topic", "t")
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) || !strings.Contains(res.stderr, "nothing was written") {
				t.Fatalf("exit %d stderr %q, want 1 and one line with %q", res.code, res.stderr, tt.want)
			}
			if got := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "t", "--partition", "0").stdout; got != "" {
				t.Fatalf("records were appended: %s", got)
			}
		})
	}
}

func TestProduceInvalidLineDoesNotAutoCreate(t *testing.T) {
	dir := t.TempDir()
	if res := run(t, "{\"value\":1}\n", "produce", "--data-dir", dir, "--topic", "fresh"); res.code != ExitError {
		t.Fatalf("exit %d", res.code)
	}
	if _, err := os.Stat(filepath.Join(dir, "fresh-0")); !os.IsNotExist(err) {
		t.Fatalf("topic was created by a failed produce: %v", err)
	}
}

func TestProduceCompactedTopicNeedsKeys(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "c", "--config", "cleanup.policy=compact")
	res := run(t, "{\"key\":\"a\",\"value\":\"1\"}\n{\"value\":\"2\"}\n", "produce", "--data-dir", dir, "--topic", "c")
	if res.code != ExitError || !strings.Contains(res.stderr, "line 2: topic c is compacted") {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
	if got := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "c", "--partition", "0").stdout; got != "" {
		t.Fatalf("records were appended: %s", got)
	}
}

func TestProduceTooLargeForMaxMessageBytes(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "small", "--config", "max.message.bytes=200")
	in := "{\"value\":\"ok\"}\n" + `{"value":"` + strings.Repeat("x", 300) + "\"}\n"
	res := run(t, in, "produce", "--data-dir", dir, "--topic", "small", "--partition", "0")
	if res.code != ExitError || !strings.Contains(res.stderr, "exceeds max.message.bytes (200)") {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
	if got := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "small", "--partition", "0").stdout; got != "" {
		t.Fatalf("records were appended: %s", got)
	}
}

// TestProduceTimestampOutOfRange: a timestamp of 2^63-1 (or more than
// message.timestamp.after.max.ms ahead) is Kafka's INVALID_TIMESTAMP; the
// whole input is refused.
func TestProduceTimestampOutOfRange(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "ts")
	in := "{\"value\":\"ok\"}\n{\"value\":\"late\",\"timestamp\":9223372036854775807}\n"
	res := run(t, in, "produce", "--data-dir", dir, "--topic", "ts", "--partition", "0")
	if res.code != ExitError || !strings.Contains(res.stderr, "line 2: INVALID_TIMESTAMP") || !strings.Contains(res.stderr, "Timestamp 9223372036854775807") ||
		!strings.Contains(res.stderr, "message.timestamp.after.max.ms") {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
	if got := mustRun(t, "", "consume", "--data-dir", dir, "--topic", "ts", "--partition", "0").stdout; got != "" {
		t.Fatalf("records were appended: %s", got)
	}
	// The bound is a topic config: raised, the same input is accepted.
	mustRun(t, "", "topic", "alter", "--data-dir", dir, "--topic", "ts", "--config", "message.timestamp.after.max.ms=9223372036854775807")
	mustRun(t, in, "produce", "--data-dir", dir, "--topic", "ts", "--partition", "0")
}

// TestProduceKeyPlacement: keyed records land where Kafka's default
// partitioner (franz-go's Kafka-compatible hasher as oracle) puts them.
func TestProduceKeyPlacement(t *testing.T) {
	dir := t.TempDir()
	const parts = 7
	mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "keys", "--partitions", fmt.Sprint(parts))
	var in strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, "{\"key\":\"customer-%d\",\"value\":\"%d\"}\n", i, i)
	}
	mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", "keys")
	oracle := kgo.StickyKeyPartitioner(nil).ForTopic("keys")
	seen := 0
	for p := 0; p < parts; p++ {
		for _, l := range lines(mustRun(t, "", "consume", "--data-dir", dir, "--topic", "keys", "--partition", fmt.Sprint(p)).stdout) {
			var rec struct{ Key string }
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatal(err)
			}
			if want := oracle.Partition(&kgo.Record{Key: []byte(rec.Key)}, parts); want != p {
				t.Fatalf("key %q is in partition %d, Kafka's partitioner says %d", rec.Key, p, want)
			}
			seen++
		}
	}
	if seen != 200 {
		t.Fatalf("consumed %d records, want 200", seen)
	}
}

// TestProduceBatching: batches hold at most BatchSize bytes of
// uncompressed batch (a lone bigger record excepted), keyless records fill
// one partition's batch before moving to the next, and the topic's
// compression.type is the batches' codec.
func TestProduceBatching(t *testing.T) {
	for _, comp := range []struct {
		config string
		codec  codec.Codec
	}{{"producer", codec.None}, {"lz4", codec.LZ4}, {"zstd", codec.Zstd}, {"gzip", codec.Gzip}, {"snappy", codec.Snappy}} {
		t.Run(comp.config, func(t *testing.T) {
			dir := t.TempDir()
			mustRun(t, "", "topic", "create", "--data-dir", dir, "--topic", "b", "--partitions", "2", "--config", "compression.type="+comp.config)
			var in strings.Builder
			for i := 0; i < 300; i++ { // ~300 × 230 bytes ≈ 69 KB: several batches
				fmt.Fprintf(&in, "{\"value\":\"%04d-%s\",\"timestamp\":%d}\n", i, strings.Repeat("v", 220), 5000+i)
			}
			fmt.Fprintf(&in, "{\"value\":\"%s\",\"timestamp\":9000}\n", strings.Repeat("L", 20000)) // alone in a batch
			mustRun(t, in.String(), "produce", "--data-dir", dir, "--topic", "b")
			var dec record.Decoder
			total, batches := 0, 0
			for p := 0; p < 2; p++ {
				for _, b := range segmentBatches(t, segPath(dir, "b", p)) {
					batches++
					if b.Codec() != comp.codec {
						t.Fatalf("batch codec %v, want %v", b.Codec(), comp.codec)
					}
					recs, err := dec.Records(b)
					if err != nil {
						t.Fatal(err)
					}
					total += len(recs)
					var enc record.Encoder
					raw, err := enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), recs)
					if err != nil {
						t.Fatal(err)
					}
					if len(recs) > 1 && len(raw) > BatchSize {
						t.Fatalf("batch of %d records is %d bytes uncompressed, over %d", len(recs), len(raw), BatchSize)
					}
					if len(recs) > 1 && len(raw)+250 <= BatchSize && b.NextOffset() != lastOffset(t, dir, p) {
						t.Fatalf("a non-final batch of %d bytes had room for another record", len(raw))
					}
				}
			}
			if total != 301 || batches < 6 {
				t.Fatalf("%d records in %d batches", total, batches)
			}
			// Keyless records spread over both partitions, a batch at a time.
			for p := 0; p < 2; p++ {
				if lastOffset(t, dir, p) == 0 {
					t.Fatalf("partition %d got no keyless records", p)
				}
			}
			if res := mustRun(t, "", "inspect", "segment", segPath(dir, "b", 0), "--no-records"); !strings.Contains(res.stdout, "compresscodec: "+comp.codec.String()) {
				t.Fatalf("inspect does not show codec %v:\n%s", comp.codec, res.stdout)
			}
		})
	}
}

// lastOffset is the log end offset of partition p of topic b.
func lastOffset(t *testing.T, dir string, p int) int64 {
	t.Helper()
	bs := segmentBatches(t, segPath(dir, "b", p))
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].NextOffset()
}

func TestProduceAutoCreate(t *testing.T) {
	dir := t.TempDir()
	if res := run(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "auto", "--no-auto-create"); res.code != ExitError || !strings.Contains(res.stderr, `unknown topic "auto"`) {
		t.Fatalf("--no-auto-create: exit %d stderr %q", res.code, res.stderr)
	}
	if res := run(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "auto", "--partition", "2"); res.code != ExitError || !strings.Contains(res.stderr, "partition 2 does not exist") {
		t.Fatalf("--partition 2 on a missing topic: exit %d stderr %q", res.code, res.stderr)
	}
	mustRun(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "auto")
	desc := mustRun(t, "", "topic", "describe", "--data-dir", dir, "--topic", "auto", "--json")
	var got topicJSON
	if err := json.Unmarshal([]byte(desc.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Partitions) != 1 || got.Partitions[0].LogEndOffset != 1 {
		t.Fatalf("auto-created topic: %+v", got.Partitions)
	}
	for _, c := range got.Configs {
		if !c.IsDefault {
			t.Fatalf("auto-created topic has override %+v", c)
		}
	}
	if res := run(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "auto", "--partition", "1"); res.code != ExitError || !strings.Contains(res.stderr, "unknown topic or partition auto-1") {
		t.Fatalf("--partition 1 of a 1-partition topic: exit %d stderr %q", res.code, res.stderr)
	}
	if res := run(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "bad/name"); res.code != ExitError {
		t.Fatalf("invalid topic name: exit %d stderr %q", res.code, res.stderr)
	}
}

func TestProduceEmptyInput(t *testing.T) {
	dir := t.TempDir()
	res := mustRun(t, "\n\n", "produce", "--data-dir", dir, "--topic", "none")
	if !strings.Contains(res.stderr, "produced 0 records") {
		t.Fatalf("stderr %q", res.stderr)
	}
}

// TestDataDirLocked: a second holder of the data dir gets one clear line.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res := run(t, "{\"value\":\"a\"}\n", "produce", "--data-dir", dir, "--topic", "t")
	if res.code != ExitError || !strings.Contains(res.stderr, "in use by another tiered process") || len(lines(res.stderr)) != 1 {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
}

// TestDataDirHeldNamesHolder: every command that opens a data dir serve
// holds names the holder (pid, HTTP address) and says what to do: the URL
// to give --server (produce, topic) or --fetch (consume), or, for the work
// serve does itself (compact, retention, upload), its HTTP API and that it
// must be stopped first. One helper (holderHint) says it for all.
func TestDataDirHeldNamesHolder(t *testing.T) {
	dir := t.TempDir()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := daemon.Holder{PID: os.Getpid(), Command: "tiered serve", HTTP: "127.0.0.1:18080", Started: time.Unix(1_700_000_000, 0)}
	data, _ := json.Marshal(h)
	if err := os.WriteFile(filepath.Join(dir, daemon.LockFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	holder := fmt.Sprintf("tiered serve (pid %d, http 127.0.0.1:18080", os.Getpid())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--data-dir", dir, "--topic", "t"}, "use --server http://127.0.0.1:18080 instead of --data-dir"},
		{[]string{"topic", "create", "--data-dir", dir, "--topic", "u"}, "use --server http://127.0.0.1:18080 instead of --data-dir"},
		{[]string{"topic", "alter", "--data-dir", dir, "--topic", "t", "--config", "retention.ms=1000"}, "use --server http://127.0.0.1:18080"},
		{[]string{"consume", "--data-dir", dir, "--topic", "t", "--partition", "0"}, "use --fetch http://127.0.0.1:18080 instead of --data-dir"},
		{[]string{"compact", "--data-dir", dir}, "its HTTP API: http://127.0.0.1:18080); stop it"},
		{[]string{"retention", "--data-dir", dir}, "its HTTP API: http://127.0.0.1:18080); stop it"},
		{[]string{"upload", "--data-dir", dir, "--bucket", "file://" + t.TempDir()}, "its HTTP API: http://127.0.0.1:18080); stop it"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			res := run(t, "{\"value\":\"a\"}\n", tc.args...)
			if res.code != ExitError || len(lines(res.stderr)) != 1 {
				t.Fatalf("exit %d stderr %q", res.code, res.stderr)
			}
			for _, want := range []string{"in use by another tiered process", holder, tc.want} {
				if !strings.Contains(res.stderr, want) {
					t.Fatalf("stderr %q does not say %q", res.stderr, want)
				}
			}
		})
	}
}
