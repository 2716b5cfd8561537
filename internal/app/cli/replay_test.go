package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

const (
	replayTS0   = int64(1_700_000_000_000) // record i has timestamp replayTS0 + 10*i
	replayParts = 3
)

// replayData is a topic built with the local tier (small batches, 2 KiB
// segments) and uploaded to a file:// bucket.
type replayData struct {
	bucketURL string
	// lines[p] are the consume-shaped lines of every record of partition p;
	// ts[p][i] the timestamp of lines[p][i] (offset i).
	lines [replayParts][]string
	ts    [replayParts][]int64
}

func newReplayData(t *testing.T, records int) *replayData {
	t.Helper()
	return newReplayDataID(t, records, "")
}

// newReplayDataID is newReplayData with the topic under topicID ("" =
// none), as a broker's partition.metadata gives it.
func newReplayDataID(t *testing.T, records int, topicID string) *replayData {
	t.Helper()
	rd := &replayData{bucketURL: fileURL(filepath.Join(t.TempDir(), "bucket"))}
	rd.upload(t, records, topicID, "event")
	return rd
}

// upload builds topic events in a new log dir, its values tagged tag, and
// uploads it to rd's bucket under topicID: a topicID other than the
// bucket's current one is the topic deleted and re-created under the same
// name. rd's lines become the new topic's.
func (rd *replayData) upload(t *testing.T, records int, topicID, tag string) {
	t.Helper()
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.CreateTopic("events", replayParts, map[string]string{"internal.segment.bytes": "2048", "remote.storage.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	rd.lines, rd.ts = [replayParts][]string{}, [replayParts][]int64{}
	var enc record.Encoder
	for p := int32(0); p < replayParts; p++ {
		l, err := d.Partition("events", p)
		if err != nil {
			t.Fatal(err)
		}
		n := records + int(p)*17
		for start := 0; start < n; start += 4 {
			var recs []record.Record
			for i := start; i < min(start+4, n); i++ {
				r := record.Record{Offset: int64(i - start), Timestamp: replayTS0 + 10*int64(i),
					Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s %d of partition %d %s", tag, i, p, strings.Repeat("x", i%40)))}
				if i%9 == 0 {
					r.Value = []byte{0xff, byte(i)}
				}
				recs = append(recs, r)
			}
			b, err := enc.AppendBatch(nil, record.NewBatchSpec(0, []codec.Codec{codec.None, codec.Gzip, codec.LZ4}[p]), recs)
			if err != nil {
				t.Fatal(err)
			}
			info, err := l.Append(b)
			if err != nil {
				t.Fatal(err)
			}
			for k := range recs {
				recs[k].Offset = info.FirstOffset + int64(k)
				rd.lines[p] = append(rd.lines[p], string(recordjson.AppendLine(nil, p, &recs[k])))
				rd.ts[p] = append(rd.ts[p], recs[k].Timestamp)
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	loc, err := objstore.ParseURL(rd.bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(loc.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := loc.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var src remotetier.Source = remotetier.NewLocalSource(d, vfs.Default)
	if topicID != "" {
		src = fetchkit.WithTopicID(src, topicID)
	}
	u, err := remotetier.NewUploader(b, src, remotetier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := u.RunOnce(context.Background()); err != nil || rep.UploadedSegments == 0 {
		t.Fatalf("upload: %v %+v", err, rep)
	}
}

// want is the expected jsonl output for [from, to) over partitions ps
// (timestamps grow with offsets, so the ListOffsets range is the records
// with from <= ts < to).
func (rd *replayData) want(from, to int64, ps ...int32) string {
	var b strings.Builder
	for _, p := range ps {
		for i, l := range rd.lines[p] {
			if rd.ts[p][i] >= from && rd.ts[p][i] < to {
				b.WriteString(l)
			}
		}
	}
	return b.String()
}

func rfc(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// serveFetch serves the bucket over HTTP in-process (the --fetch path).
func serveFetch(t *testing.T, bucketURL string) string {
	t.Helper()
	return serveFetchWith(t, bucketURL, fetchcache.RemoteCatalogOptions{})
}

// serveFetchWith is serveFetch with the catalog's options.
func serveFetchWith(t *testing.T, bucketURL string, o fetchcache.RemoteCatalogOptions) string {
	t.Helper()
	loc, err := objstore.ParseURL(bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loc.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := fetchcache.NewRemoteCatalog(b, o)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Listen(server.ServerOptions{Catalog: cat, HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = b.Close()
	})
	return "http://" + srv.HTTPAddr().String()
}

func TestReplayCommand(t *testing.T) {
	rd := newReplayData(t, 150)
	fetch := serveFetch(t, rd.bucketURL)
	from, to := replayTS0+255, replayTS0+1234
	for _, src := range [][]string{{"--bucket", rd.bucketURL}, {"--fetch", fetch}} {
		t.Run(src[0][2:], func(t *testing.T) {
			dir := t.TempDir()
			// All partitions, to a file.
			out := filepath.Join(dir, "all.jsonl")
			res := mustRun(t, "", append([]string{"replay", "--topic", "events", "--from", rfc(from), "--to", rfc(to), "--out", out}, src...)...)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if want := rd.want(from, to, 0, 1, 2); string(got) != want {
				t.Fatalf("all partitions: %d bytes, want %d", len(got), len(want))
			}
			if res.stdout != "" || !strings.Contains(res.stderr, "done: ") || len(lines(res.stderr)) != 1 {
				t.Fatalf("stdout %q stderr %q", res.stdout, res.stderr)
			}
			if _, err := os.Stat(out + ".checkpoint"); err != nil {
				t.Fatalf("default checkpoint: %v", err)
			}
			// One partition to stdout, times as epoch ms, with a rate.
			res = mustRun(t, "", append([]string{"replay", "--topic", "events", "--partition", "2", "--from", fmt.Sprint(from),
				"--to", fmt.Sprint(to), "--rate", "10M"}, src...)...)
			if want := rd.want(from, to, 2); res.stdout != want {
				t.Fatalf("stdout: %d bytes, want %d", len(res.stdout), len(want))
			}
			// Raw: whole batches covering the range, CRCs intact.
			raw := filepath.Join(dir, "p1.raw")
			mustRun(t, "", append([]string{"replay", "--topic", "events", "--partition", "1", "--from", rfc(from), "--to", rfc(to),
				"--format", "raw", "--out", raw}, src...)...)
			data, err := os.ReadFile(raw)
			if err != nil {
				t.Fatal(err)
			}
			it := record.NewIter(data)
			it.Verify = true
			var first, last int64 = -1, -1
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				if first < 0 {
					first = b.BaseOffset()
				}
				if b.BaseOffset() != last+1 && last >= 0 {
					t.Fatalf("raw batches not contiguous: %d after %d", b.BaseOffset(), last)
				}
				last = b.LastOffset()
			}
			startOff, endOff := int64(26), int64(124) // ts 255 → record 26; 1234 → 124
			if it.Err() != nil || it.Pos() != len(data) || first > startOff || first <= startOff-4 || last < endOff-1 || last >= endOff+3 {
				t.Fatalf("raw: err %v, %d of %d bytes, offsets %d-%d for the range [%d, %d)", it.Err(), it.Pos(), len(data), first, last, startOff, endOff)
			}
		})
	}
}

func TestReplayCommandErrors(t *testing.T) {
	rd := newReplayData(t, 20)
	dir := t.TempDir()
	ok := []string{"--bucket", rd.bucketURL, "--topic", "events", "--from", rfc(replayTS0), "--to", rfc(replayTS0 + 100)}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no_source", []string{"--topic", "events", "--from", "1", "--to", "2"}, ExitUsage, "give --fetch URL or --bucket URL"},
		{"both_sources", append(ok, "--fetch", "http://127.0.0.1:1"), ExitUsage, "cannot be used together"},
		{"no_topic", []string{"--bucket", rd.bucketURL, "--from", "1", "--to", "2"}, ExitUsage, "--topic"},
		{"no_from", []string{"--bucket", rd.bucketURL, "--topic", "events", "--to", "2"}, ExitUsage, "missing required flag --from"},
		{"bad_time", append(ok, "--to", "yesterday"), ExitUsage, `--to "yesterday" is not an RFC 3339 time`},
		{"to_before_from", append(ok, "--to", rfc(replayTS0-1)), ExitUsage, "must be after --from"},
		{"bad_rate", append(ok, "--rate", "fast"), ExitUsage, "--rate"},
		{"bad_format", append(ok, "--format", "xml"), ExitUsage, "--format"},
		{"bad_partition", append(ok, "--partition", "-3"), ExitUsage, "--partition"},
		{"unknown_flag", append(ok, "--speed", "1"), ExitUsage, "unknown flag --speed"},
		{"bad_fetch_url", []string{"--fetch", "ftp://x", "--topic", "events", "--from", "1", "--to", "2"}, ExitUsage, "--fetch"},
		{"resume_stdout", append(ok, "--resume"), ExitUsage, "--resume with output to stdout needs --checkpoint"},
		{"resume_no_checkpoint", append(ok, "--resume", "--out", filepath.Join(dir, "o")), ExitError, "no replay checkpoint at " + filepath.Join(dir, "o.checkpoint") + ": nothing to resume"},
		{"unknown_topic", append(ok, "--topic", "nope"), ExitError, `unknown topic "nope"`},
		{"unknown_partition", append(ok, "--partition", "7"), ExitError, "unknown partition 7"},
		{"raw_all_partitions", append(ok, "--format", "raw"), ExitError, "raw output holds one partition"},
		{"checkpoint_is_output", append(ok, "--out", filepath.Join(dir, "same"), "--checkpoint", filepath.Join(dir, "same")), ExitError, "would overwrite the output"},
		{"fetch_unreachable", []string{"--fetch", "http://127.0.0.1:1", "--topic", "events", "--from", "1", "--to", "2"}, ExitError, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", append([]string{"replay"}, tc.args...)...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.msg) || len(lines(res.stderr)) != 1 || !strings.HasPrefix(res.stderr, "tiered replay: ") {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q on one line", res.code, res.stderr, tc.code, tc.msg)
			}
		})
	}
}

// replayKillRuns is how many times the process test kills a replay.
func replayKillRuns() int {
	if v, err := strconv.Atoi(os.Getenv("TIERED_REPLAY_KILL_RUNS")); err == nil && v > 0 {
		return v
	}
	return 5
}

// checkpointBytes reads output_bytes from a checkpoint file (-1: none yet).
func checkpointBytes(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	var cp struct {
		OutputBytes int64 `json:"output_bytes"`
	}
	if json.Unmarshal(data, &cp) != nil {
		return -1
	}
	return cp.OutputBytes
}

// TestReplayProcessKillAndResume runs the built binary at a low rate,
// kills it (-9, then SIGINT) after its checkpoint moved, resumes, and
// checks that the output holds every record of the range exactly once, in
// order.
func TestReplayProcessKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "tiered")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/tiered").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rd := newReplayData(t, 400)
	from, to := replayTS0+15, replayTS0+3_900
	want := rd.want(from, to, 0, 1, 2)

	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "events.jsonl")
			cpFile := out + ".checkpoint"
			kills := replayKillRuns()
			if sig == syscall.SIGINT {
				kills = 2
			}
			// About 60 KB of batches; each run delivers well under 1 s
			// worth before it is interrupted, so the data outlasts the runs.
			rate := max(1000, 48_000/(kills+1))
			args := []string{"replay", "--bucket", rd.bucketURL, "--topic", "events", "--from", rfc(from), "--to", rfc(to),
				"--out", out, "--rate", strconv.Itoa(rate)}
			prev := int64(-1)
			for i := 0; i < kills; i++ {
				a := args
				if i > 0 {
					a = append(a, "--resume")
				}
				cmd := exec.Command(bin, a...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				deadline := time.Now().Add(15 * time.Second)
				var err error
				finished := false
			poll:
				for checkpointBytes(cpFile) <= prev {
					select {
					case err = <-exited:
						finished = true
						break poll
					case <-time.After(20 * time.Millisecond):
					}
					if time.Now().After(deadline) {
						_ = cmd.Process.Kill()
						<-exited
						t.Fatalf("run %d: the checkpoint did not move past %d; stderr %s", i, prev, stderr.String())
					}
				}
				if finished {
					if err != nil || i == 0 {
						t.Fatalf("run %d ended before it was interrupted: %v; stderr %s", i, err, stderr.String())
					}
					t.Logf("run %d finished before it was interrupted; checking the output", i)
					break
				}
				prev = checkpointBytes(cpFile)
				time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
				// What reached the file before the signal: a SIGINT's
				// checkpoint must cover it (the checkpoint itself need not
				// move when no batch arrived since the last one).
				var written int64
				if fi, err := os.Stat(out); err == nil {
					written = fi.Size()
				}
				_ = cmd.Process.Signal(sig)
				err = <-exited
				switch sig {
				case syscall.SIGKILL:
					if err == nil {
						t.Fatalf("run %d: exit 0 after kill -9", i)
					}
				case syscall.SIGINT:
					if err != nil || !strings.Contains(stderr.String(), "interrupted after") || !strings.Contains(stderr.String(), "--resume") {
						t.Fatalf("run %d: SIGINT gave %v, stderr %q", i, err, stderr.String())
					}
					if got := checkpointBytes(cpFile); got < prev || got < written {
						t.Fatalf("run %d: checkpoint at %d after SIGINT, was %d with %d bytes written", i, got, prev, written)
					}
					fi, err := os.Stat(out)
					if err != nil || fi.Size() != checkpointBytes(cpFile) {
						t.Fatalf("run %d: after SIGINT the output (%v, %v) matches no checkpoint (%d)", i, fi, err, checkpointBytes(cpFile))
					}
				}
				prev = checkpointBytes(cpFile)
			}
			res, err := exec.Command(bin, append(args, "--resume", "--rate", "0")...).CombinedOutput()
			if err != nil {
				t.Fatalf("final resume: %v\n%s", err, res)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				checkOnce(t, string(got))
				t.Fatalf("after %d interruptions: %d bytes, want %d", kills, len(got), len(want))
			}
			if sig == syscall.SIGKILL {
				reliability.Record(t, "process crash: kill -9 of tiered replay, then --resume", kills, len(lines(want)), 0)
			}
		})
	}
}

// checkOnce reports the first repeated or missing offset of a jsonl output.
func checkOnce(t *testing.T, out string) {
	t.Helper()
	next := map[int32]int64{}
	for i, l := range lines(out) {
		var r struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d: %v: %.100s", i, err, l)
		}
		if n, ok := next[r.Partition]; ok && r.Offset != n {
			t.Fatalf("line %d: partition %d offset %d, want %d (repeated or lost)", i, r.Partition, r.Offset, n)
		}
		next[r.Partition] = r.Offset + 1
	}
}

// TestReplayResumeRecreatedTopic: replay --resume after the topic was
// deleted and re-created under the same name exits 1 with one line naming
// both topic IDs and saying to start without --resume, through --bucket as
// through --fetch, and leaves the output as it was. Before, the checkpoint
// had no topic ID and the resume carried on at its offsets in the new
// topic, mixing two topics' records in one output.
func TestReplayResumeRecreatedTopic(t *testing.T) {
	const oldID, newID = "o3Bx6y0QQxyxS2FrDcDiOw", "Vtqh-_aLSpGn3jK4dGnv8A"
	for _, srcFlag := range []string{"--bucket", "--fetch"} {
		t.Run(srcFlag[2:], func(t *testing.T) {
			rd := newReplayDataID(t, 60, oldID)
			src := func() []string { // a fetch service started now, as after the re-creation
				if srcFlag == "--bucket" {
					return []string{srcFlag, rd.bucketURL}
				}
				return []string{srcFlag, serveFetch(t, rd.bucketURL)}
			}
			out := filepath.Join(t.TempDir(), "events.jsonl")
			args := []string{"replay", "--topic", "events", "--from", fmt.Sprint(replayTS0), "--to", fmt.Sprint(replayTS0 + 1_000_000), "--out", out}
			mustRun(t, "", append(args, src()...)...)
			// Back to the replay's first checkpoint, as a crash just after
			// it leaves it.
			fetchkit.EditJSONFile(t, out+".checkpoint", func(cp map[string]any) {
				if cp["topic_id"] != oldID {
					t.Fatalf("checkpoint topic_id %v, want %s", cp["topic_id"], oldID)
				}
				cp["complete"], cp["output_bytes"], cp["records"], cp["batch_bytes"] = false, 0, 0, 0
				for _, r := range cp["ranges"].([]any) {
					r.(map[string]any)["next"] = r.(map[string]any)["start"]
				}
			})
			before, _ := os.ReadFile(out)

			rd.upload(t, 80, newID, "recreated")
			res := run(t, "", append(append(args, "--resume"), src()...)...)
			if res.code != ExitError || len(lines(res.stderr)) != 1 || !strings.HasPrefix(res.stderr, "tiered replay: ") {
				t.Fatalf("exit %d, stderr %q; want exit %d with one line", res.code, res.stderr, ExitError)
			}
			for _, want := range []string{oldID, newID, "re-created", "without --resume"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("stderr %q does not say %q", res.stderr, want)
				}
			}
			if after, _ := os.ReadFile(out); string(after) != string(before) {
				t.Fatalf("the refused resume changed the output: %d bytes, then %d", len(before), len(after))
			}
		})
	}
}
