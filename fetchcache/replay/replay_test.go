package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/server"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
)

// replayEnv is a three-partition topic uploaded to a memory bucket, read
// through a fetchcache.RemoteCatalog directly (the --bucket path) and through the HTTP
// API served by server.Listen (the --fetch path).
type replayEnv struct {
	e       *fetchkit.Env
	cat     *fetchcache.RemoteCatalog
	client  *httpapi.Client
	want    map[int32][]fetchkit.Rec // every record of each partition
	rawLogs map[int32][]byte         // every batch of each partition, as uploaded
}

const replayTopic = "replay"

func newReplayEnv(t *testing.T) *replayEnv {
	t.Helper()
	e := fetchkit.NewEnv(t)
	e.Topic(replayTopic, 3, map[string]string{"remote.storage.enable": "true"})
	codecs := []codec.Codec{codec.None, codec.Snappy, codec.Zstd}
	env := &replayEnv{e: e, want: map[int32][]fetchkit.Rec{}, rawLogs: map[int32][]byte{}}
	for p := int32(0); p < 3; p++ {
		l := e.Log(replayTopic, p)
		e.Produce(l, fetchkit.ProduceOpts{Codec: codecs[p], Per: 7}, fetchkit.GenRecs(180+int(p)*20, ts0, fmt.Sprintf("p%d", p)))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		env.want[p] = testrecs.FromLog(t, l)
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			res, err := l.Read(off, 1<<20, true)
			if err != nil {
				t.Fatal(err)
			}
			it := record.NewIter(res.Data)
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				if b.NextOffset() > off {
					env.rawLogs[p] = append(env.rawLogs[p], b...)
					off = b.NextOffset()
				}
			}
		}
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	cb, err := chunkcache.NewCachingBucket(mem, chunkcache.CacheOptions{ChunkBytes: 4096, MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cb.Close() })
	cat, err := fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.cat = cat
	srv, err := server.Listen(server.ServerOptions{Catalog: cat, HTTPAddr: "127.0.0.1:0", Logger: fetchkit.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, srv.Serve)
	hc := &http.Client{Transport: &http.Transport{}}
	env.client, err = httpapi.NewClient("http://"+srv.HTTPAddr().String(), hc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return env
}

func (env *replayEnv) sources() map[string]ReplaySource {
	return map[string]ReplaySource{"bucket": NewCatalogReplaySource(env.cat), "fetch": env.client}
}

// rangeOf applies the ListOffsets rule to the expected records: the first
// offset with a timestamp >= ts, else the log end.
func (env *replayEnv) rangeOf(p int32, from, to int64) (int64, int64) {
	recs := env.want[p]
	end := recs[len(recs)-1].Offset + 1
	at := func(ts int64) int64 {
		for _, r := range recs {
			if r.Timestamp >= ts {
				return r.Offset
			}
		}
		return end
	}
	return at(from), at(to)
}

// wantJSONL is the expected JSON-lines output of partitions ps over the
// time range, in consume's shape.
func (env *replayEnv) wantJSONL(from, to int64, ps ...int32) string {
	var out []byte
	for _, p := range ps {
		start, end := env.rangeOf(p, from, to)
		for _, r := range env.want[p] {
			if r.Offset >= start && r.Offset < end {
				rec := record.Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: r.Headers}
				out = recordjson.AppendLine(out, p, &rec)
			}
		}
	}
	return string(out)
}

// A time range cutting batches in the middle: ts0+10*i is record i's time.
const (
	replayFrom = ts0 + 333
	replayTo   = ts0 + 1507
)

func TestReplayJSONLEqualsOffsetRange(t *testing.T) {
	env := newReplayEnv(t)
	for name, src := range env.sources() {
		for _, tc := range []struct {
			name      string
			partition int32
			from, to  int64
			want      []int32
		}{
			{"one_partition", 1, replayFrom, replayTo, []int32{1}},
			{"all_partitions", ReplayAllPartitions, replayFrom, replayTo, []int32{0, 1, 2}},
			{"to_past_end", 2, replayFrom, ts0 + 1_000_000, []int32{2}},
			{"from_past_end", 0, ts0 + 1_000_000, ts0 + 2_000_000, []int32{0}},
			{"whole_log", 0, 0, ts0 + 1_000_000, []int32{0}},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out.jsonl")
				cp, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: replayTopic, Partition: tc.partition,
					From: tc.from, To: tc.to, OutPath: out, FetchBytes: 700})
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				want := env.wantJSONL(tc.from, tc.to, tc.want...)
				if string(got) != want {
					t.Fatalf("output differs: got %d bytes, %d lines; want %d bytes, %d lines\nfirst got line: %.200s\nfirst want line: %.200s",
						len(got), bytes.Count(got, []byte("\n")), len(want), strings.Count(want, "\n"), firstLine(string(got)), firstLine(want))
				}
				if !cp.Complete || cp.OutputBytes != int64(len(got)) || int(cp.Records) != strings.Count(want, "\n") {
					t.Fatalf("checkpoint %+v after %d bytes", cp, len(got))
				}
				saved, err := ReadReplayCheckpoint(out + ReplayCheckpointSuffix)
				if err != nil || !saved.Complete || len(saved.Ranges) != len(tc.want) {
					t.Fatalf("saved checkpoint %+v, %v", saved, err)
				}
				for _, r := range saved.Ranges {
					start, end := env.rangeOf(r.Partition, tc.from, tc.to)
					if r.Start != start || r.End != end || r.Next != end {
						t.Fatalf("range %+v, want [%d, %d)", r, start, end)
					}
				}
			})
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func TestReplayToStdout(t *testing.T) {
	env := newReplayEnv(t)
	var buf bytes.Buffer
	cp, err := Replay(context.Background(), ReplayOptions{Source: env.client, Topic: replayTopic, Partition: ReplayAllPartitions,
		From: replayFrom, To: replayTo, Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != env.wantJSONL(replayFrom, replayTo, 0, 1, 2) || !cp.Complete {
		t.Fatalf("stdout output differs (%d bytes)", buf.Len())
	}
}

// TestReplayRawWholeBatches: raw output is exactly the uploaded batches that
// overlap the range, byte for byte.
func TestReplayRawWholeBatches(t *testing.T) {
	env := newReplayEnv(t)
	for name, src := range env.sources() {
		t.Run(name, func(t *testing.T) {
			const p = 1
			out := filepath.Join(t.TempDir(), "out.raw")
			if _, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: replayTopic, Partition: p,
				From: replayFrom, To: replayTo, OutPath: out, Format: ReplayRaw}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			start, end := env.rangeOf(p, replayFrom, replayTo)
			var want []byte
			it := record.NewIter(env.rawLogs[p])
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				if b.NextOffset() > start && b.BaseOffset() < end {
					want = append(want, b...)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("raw output: %d bytes, want %d", len(got), len(want))
			}
			first := record.Batch(got[:record.LogOverhead+int(record.Batch(got).Length())])
			if first.BaseOffset() == start {
				t.Fatalf("test range should start inside a batch (start %d)", start)
			}
		})
	}
}

func TestReplayRawRefusesSeveralPartitions(t *testing.T) {
	env := newReplayEnv(t)
	_, err := Replay(context.Background(), ReplayOptions{Source: env.client, Topic: replayTopic, Partition: ReplayAllPartitions,
		From: replayFrom, To: replayTo, OutPath: filepath.Join(t.TempDir(), "o"), Format: ReplayRaw})
	if err == nil || !strings.Contains(err.Error(), "raw output holds one partition") {
		t.Fatalf("err %v", err)
	}
}

func TestReplayUnknownTopic(t *testing.T) {
	env := newReplayEnv(t)
	for name, src := range env.sources() {
		for _, p := range []int32{ReplayAllPartitions, 7} {
			_, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "nope", Partition: p,
				From: replayFrom, To: replayTo, Stdout: &bytes.Buffer{}})
			var ue *fetchcache.UnknownTopicOrPartitionError
			if !errors.As(err, &ue) {
				t.Fatalf("%s partition %d: err %v", name, p, err)
			}
		}
		_, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: replayTopic, Partition: 9,
			From: replayFrom, To: replayTo, Stdout: &bytes.Buffer{}})
		var ue *fetchcache.UnknownTopicOrPartitionError
		if !errors.As(err, &ue) || ue.Partition != 9 {
			t.Fatalf("%s unknown partition: err %v", name, err)
		}
	}
}

// fakeClock advances only when the job sleeps.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	c.sleeps++
	return ctx.Err()
}

// TestReplayRate measures the delivered record-batch bytes per second of
// the injected clock: within ±10% of --rate, for rates below and above one
// fetch.
func TestReplayRate(t *testing.T) {
	env := newReplayEnv(t)
	for _, rate := range []int64{2000, 5000, 10_000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			var last ReplayProgress
			cp, err := Replay(context.Background(), ReplayOptions{Source: NewCatalogReplaySource(env.cat), Topic: replayTopic,
				Partition: ReplayAllPartitions, From: 0, To: ts0 + 1_000_000, Stdout: &bytes.Buffer{}, Rate: rate,
				FetchBytes: 8000, Now: clk.Now, Sleep: clk.Sleep, Progress: func(p ReplayProgress) { last = p }})
			if err != nil {
				t.Fatal(err)
			}
			var all int64
			for _, data := range env.rawLogs {
				all += int64(len(data))
			}
			if cp.BatchBytes != all || last.BatchBytes != all || !last.Done || last.OffsetsDone != last.OffsetsTotal {
				t.Fatalf("delivered %d batch bytes (progress %+v), the log holds %d", cp.BatchBytes, last, all)
			}
			elapsed := clk.slept.Seconds()
			if elapsed < 2 {
				t.Fatalf("run of %.2fs is too short to measure", elapsed)
			}
			got := float64(all) / elapsed
			if got < 0.9*float64(rate) || got > 1.1*float64(rate) {
				t.Fatalf("measured %.0f B/s over %.1fs, want %d ±10%%", got, elapsed, rate)
			}
		})
	}
	clk := &fakeClock{now: time.Unix(1000, 0)}
	if _, err := Replay(context.Background(), ReplayOptions{Source: env.client, Topic: replayTopic, Partition: 0,
		From: 0, To: ts0 + 1_000_000, Stdout: &bytes.Buffer{}, Now: clk.Now, Sleep: clk.Sleep}); err != nil || clk.sleeps != 0 {
		t.Fatalf("unlimited replay slept %d times (err %v)", clk.sleeps, err)
	}
}

// cancellingSource cancels the job's context after n reads: an interrupt
// (SIGINT) at a chosen point.
type cancellingSource struct {
	ReplaySource
	n      int
	cancel context.CancelFunc
}

func (s *cancellingSource) ReadRaw(ctx context.Context, topic string, p int32, off int64, maxBytes int) (httpapi.RawRecords, error) {
	s.n--
	if s.n == 0 {
		s.cancel()
	}
	return s.ReplaySource.ReadRaw(ctx, topic, p, off, maxBytes)
}

// TestReplayResume interrupts a replay again and again, each time adding
// junk after the output (bytes written after the last checkpoint, as a kill
// -9 leaves them), and resumes until done: the output has every record of
// the range exactly once, in order.
func TestReplayResume(t *testing.T) {
	env := newReplayEnv(t)
	for _, format := range []ReplayFormat{ReplayJSONL, ReplayRaw} {
		t.Run(string(format), func(t *testing.T) {
			part := ReplayAllPartitions
			if format == ReplayRaw {
				part = 2
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			opts := ReplayOptions{Source: env.client, Topic: replayTopic, Partition: part, From: replayFrom, To: replayTo,
				OutPath: out, Format: format, FetchBytes: 300, FlushBytes: 1}
			runs := 0
			for ; runs < 100; runs++ {
				ctx, cancel := context.WithCancel(context.Background())
				o := opts
				o.Source = &cancellingSource{ReplaySource: env.client, n: 3 + runs%4, cancel: cancel}
				o.Resume = runs > 0
				cp, err := Replay(ctx, o)
				cancel()
				if err == nil {
					break
				}
				if !errors.Is(err, ErrReplayInterrupted) {
					t.Fatalf("run %d: %v", runs, err)
				}
				saved, rerr := ReadReplayCheckpoint(out + ReplayCheckpointSuffix)
				if rerr != nil || saved.OutputBytes != cp.OutputBytes || saved.Complete {
					t.Fatalf("run %d: saved checkpoint %+v (%v), returned %+v", runs, saved, rerr, cp)
				}
				f, ferr := os.OpenFile(out, os.O_WRONLY|os.O_APPEND, 0)
				if ferr != nil {
					t.Fatal(ferr)
				}
				_, _ = f.WriteString(`{"partition":0,"offset":-1} junk written after the checkpoint`)
				_ = f.Close()
			}
			if runs < 3 {
				t.Fatalf("only %d interruptions", runs)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if format == ReplayJSONL {
				if want := env.wantJSONL(replayFrom, replayTo, 0, 1, 2); string(got) != want {
					t.Fatalf("after %d resumes: %d bytes, want %d", runs, len(got), len(want))
				}
				return
			}
			var prev int64 = -1
			it := record.NewIter(got)
			it.Verify = true
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				if b.BaseOffset() <= prev {
					t.Fatalf("batch at %d after %d: repeated or out of order", b.BaseOffset(), prev)
				}
				prev = b.LastOffset()
			}
			if it.Err() != nil || it.Pos() != len(got) {
				t.Fatalf("raw output: %v at %d of %d", it.Err(), it.Pos(), len(got))
			}
			// Resuming a complete job does nothing.
			o := opts
			o.Resume = true
			if cp, err := Replay(context.Background(), o); err != nil || !cp.Complete {
				t.Fatalf("resume of a complete job: %+v %v", cp, err)
			}
			if again, _ := os.ReadFile(out); !bytes.Equal(again, got) {
				t.Fatal("resume of a complete job changed the output")
			}
		})
	}
}

func TestReplayResumeErrors(t *testing.T) {
	env := newReplayEnv(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	base := ReplayOptions{Source: env.client, Topic: replayTopic, Partition: 0, From: replayFrom, To: replayTo, OutPath: out}

	o := base
	o.Resume = true
	if _, err := Replay(context.Background(), o); !errors.Is(err, ErrNoReplayCheckpoint) {
		t.Fatalf("resume without checkpoint: %v", err)
	}
	o = base
	o.OutPath, o.Stdout, o.Resume = "", &bytes.Buffer{}, true
	if _, err := Replay(context.Background(), o); !errors.Is(err, ErrNoReplayCheckpoint) || !strings.Contains(err.Error(), "--checkpoint") {
		t.Fatalf("resume to stdout without --checkpoint: %v", err)
	}

	if _, err := Replay(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	o = base
	o.Resume, o.To = true, replayTo+1
	if _, err := Replay(context.Background(), o); err == nil || !strings.Contains(err.Error(), "belongs to another replay") {
		t.Fatalf("resume with another range: %v", err)
	}
	if err := os.Truncate(out, 10); err != nil {
		t.Fatal(err)
	}
	o = base
	o.Resume = true
	if _, err := Replay(context.Background(), o); err == nil || !strings.Contains(err.Error(), "was changed or lost") {
		t.Fatalf("resume with a short output: %v", err)
	}
}

// TestReplayStdoutCheckpoint: with --checkpoint, a replay to stdout
// resumes from its checkpoint; what the two runs print together is the
// range, each record once (the interrupt comes right after a flush).
func TestReplayStdoutCheckpoint(t *testing.T) {
	env := newReplayEnv(t)
	cpPath := filepath.Join(t.TempDir(), "cp")
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	o := ReplayOptions{Source: &cancellingSource{ReplaySource: env.client, n: 4, cancel: cancel}, Topic: replayTopic, Partition: 1,
		From: replayFrom, To: replayTo, Stdout: &buf, CheckpointPath: cpPath, FetchBytes: 500, FlushBytes: 1}
	if _, err := Replay(ctx, o); !errors.Is(err, ErrReplayInterrupted) {
		t.Fatalf("first run: %v", err)
	}
	cancel()
	o.Source, o.Resume = env.client, true
	if _, err := Replay(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if buf.String() != env.wantJSONL(replayFrom, replayTo, 1) {
		t.Fatalf("stdout output differs")
	}
}

func TestReplayOptionErrors(t *testing.T) {
	src := &httpapi.Client{}
	for name, o := range map[string]ReplayOptions{
		"no_source":   {Topic: "t", From: 0, To: 1, Stdout: &bytes.Buffer{}},
		"no_topic":    {Source: src, From: 0, To: 1, Stdout: &bytes.Buffer{}},
		"empty_range": {Source: src, Topic: "t", From: 5, To: 5, Stdout: &bytes.Buffer{}},
		"bad_format":  {Source: src, Topic: "t", From: 0, To: 1, Stdout: &bytes.Buffer{}, Format: "xml"},
		"no_output":   {Source: src, Topic: "t", From: 0, To: 1},
		"neg_rate":    {Source: src, Topic: "t", From: 0, To: 1, Stdout: &bytes.Buffer{}, Rate: -1},
	} {
		if _, err := Replay(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
