package remotetier

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/retention"
)

// sumT0 is the time around which the summary tests' timestamps lie.
const sumT0 = int64(1_700_000_000_000)

// sumSeg is a valid committed segment of partition r-0 serving
// [base, last], with a .log of size bytes.
func sumSeg(t testing.TB, base, last, minTs, maxTs, upload, size int64) manifest.Segment {
	t.Helper()
	attempt := fmt.Sprintf("%016x%016x", base, last)
	keys, err := manifest.DataKeys("", "r", 0, base, attempt)
	if err != nil {
		t.Fatal(err)
	}
	sum := manifest.CRC32CChecksum(uint32(base))
	return manifest.Segment{BaseOffset: base, LastOffset: last, RecordCount: manifest.UnknownCount,
		MinTimestamp: minTs, MaxTimestamp: maxTs,
		Log:          manifest.Object{Key: keys.Log, Size: size, Checksum: sum},
		Index:        manifest.Object{Key: keys.Index, Checksum: sum},
		TimeIndex:    manifest.Object{Key: keys.TimeIndex, Checksum: sum},
		UploadTimeMs: upload, Uploader: "test", AttemptID: attempt}
}

// sumShape is one random partition for the summary tests: a committed
// manifest (stored in the bucket), the source's segments, the rules and
// the clock.
type sumShape struct {
	m     *manifest.Manifest
	etag  string
	local []retention.Segment
	cfg   topicconfig.Config
	now   time.Time
	desc  string
}

// sumRandomShape builds a random manifest in mem: 0 to 60 segments with
// random sizes, gaps and timestamps (some without timestamps, judged by
// their upload time, some of those never uploaded at a known time, some
// mixed), sealed by a random policy, committed in random batches, with the
// log start sometimes inside the first segment and sometimes raised by a
// RemoveBelow inside a sub-manifest; a random retention.ms, retention.bytes
// (or -1), cleanup policy and clock; sometimes source segments past (and
// overlapping) the committed ones.
func sumRandomShape(t testing.TB, rnd *rand.Rand, store *manifestStore) sumShape {
	t.Helper()
	ctx := context.Background()
	n := rnd.IntN(61)
	segs := make([]manifest.Segment, 0, n)
	next, ts := rnd.Int64N(1000), sumT0
	var total int64
	for range n {
		base := next
		if rnd.IntN(5) == 0 {
			base += 1 + rnd.Int64N(20) // a gap (compaction)
		}
		last := base + rnd.Int64N(50)
		ts += rnd.Int64N(2000) - 300 // mostly forward, sometimes back
		size := 1 + rnd.Int64N(1000)
		if rnd.IntN(8) == 0 {
			size = 1 + rnd.Int64N(10)
		}
		minTs, maxTs, upload := max(ts-rnd.Int64N(3000), 0), max(ts, 0), ts+rnd.Int64N(5000)
		switch rnd.IntN(10) {
		case 0, 1: // no timestamps: judged by the upload time
			minTs, maxTs = manifest.NoTimestamp, manifest.NoTimestamp
			if rnd.IntN(4) == 0 {
				upload = 0 // and that unknown: never expires by time
			} else {
				upload = ts + rnd.Int64N(20000) - 10000
			}
		case 2: // some batches without timestamps
			minTs = manifest.NoTimestamp
		}
		segs = append(segs, sumSeg(t, base, last, minTs, maxTs, upload, size))
		next = last + 1
		total += size
	}
	logStart := int64(0)
	if n > 0 {
		logStart = segs[0].BaseOffset
		if rnd.IntN(3) == 0 {
			logStart += rnd.Int64N(segs[0].LastOffset - segs[0].BaseOffset + 1) // inside the first segment
		}
	}
	inlineMax := 1 + rnd.IntN(8)
	pol := manifest.Policy{InlineMax: inlineMax, SubSegments: 1 + rnd.IntN(inlineMax)}
	m, err := manifest.New("", "r", 0, logStart)
	if err != nil {
		t.Fatal(err)
	}
	etag := ""
	commit := func(c *manifest.Commit) {
		t.Helper()
		if etag, err = store.write(ctx, c, m.Generation, etag); err != nil {
			t.Fatal(err)
		}
		m = c.Root
	}
	for rest := segs; len(rest) > 0; {
		k := min(len(rest), 1+rnd.IntN(12))
		c, err := manifest.Append(m, pol, rest[:k]...)
		if err != nil {
			t.Fatal(err)
		}
		commit(c)
		rest = rest[k:]
	}
	if n > 0 && rnd.IntN(3) == 0 {
		// A retention before: the log start inside (or at the start of)
		// a later segment, a sealed one rewritten around it.
		s := segs[rnd.IntN(n)]
		c, err := manifest.RemoveBelow(ctx, store.subs, m, max(m.LogStartOffset, s.BaseOffset+rnd.Int64N(s.LastOffset-s.BaseOffset+1)))
		if err != nil {
			t.Fatal(err)
		}
		commit(c)
	}
	if m.Generation == 0 {
		c, err := manifest.Append(m, pol) // an empty but stored manifest
		if err != nil {
			t.Fatal(err)
		}
		commit(c)
	}

	var local []retention.Segment
	if rnd.IntN(2) == 0 {
		// The source's segments: from somewhere at or below the remote end
		// (the ones the remote tier holds are not counted), the last active.
		base := max(0, m.NextOffset()-rnd.Int64N(100))
		for i, k := 0, 1+rnd.IntN(4); i < k; i++ {
			last := base + rnd.Int64N(40)
			local = append(local, retention.Segment{BaseOffset: base, LastOffset: last, Size: 1 + rnd.Int64N(1000),
				MaxTimestamp: ts + rnd.Int64N(2000) - 1000, Active: i == k-1})
			total += local[i].Size
			base = last + 1
		}
	}

	cfg := topicconfig.Defaults()
	span := max(ts-sumT0, 1)
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	if rnd.IntN(4) != 0 {
		cfg.RetentionMs = rnd.Int64N(span + 5000)
	}
	if rnd.IntN(2) == 0 {
		cfg.RetentionBytes = rnd.Int64N(total + 1000)
	}
	if rnd.IntN(10) == 0 {
		cfg.CleanupPolicy = topicconfig.Policy{Compact: true}
	}
	now := sumT0 + rnd.Int64N(span+20000) - 5000
	if rnd.IntN(10) == 0 {
		now = rnd.Int64N(1000) // before every timestamp: nothing is old enough
	}
	desc := fmt.Sprintf("%d segments, policy %+v, log start %d, %d sealed, %d inline, %d local, retention.ms %d, retention.bytes %d (log %d), delete %v, now %d",
		n, pol, m.LogStartOffset, len(m.Sealed), len(m.Segments), len(local), cfg.RetentionMs, cfg.RetentionBytes, total,
		cfg.CleanupPolicy.Delete, now)
	return sumShape{m: m, etag: etag, local: local, cfg: cfg, now: time.UnixMilli(now), desc: desc}
}

// sumFullDecision is the policy over every segment: the whole manifest
// walked, then the source's segments past its end.
func sumFullDecision(t testing.TB, store *manifestStore, sh sumShape) retention.Decision {
	t.Helper()
	var segs []retention.Segment
	if err := sh.m.Walk(context.Background(), store.subs, func(s manifest.Segment) error {
		segs = append(segs, remoteSegment(s))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range sh.local {
		if s.NextOffset() > sh.m.NextOffset() {
			segs = append(segs, s)
		}
	}
	return retention.Remote(segs, sh.cfg, sh.m.LogStartOffset, sh.now)
}

// TestRetentionSummaryDecision: the remote retention decision taken from
// the sub-manifest references (remoteDecision) is exactly the policy over
// every segment (same deletions, reasons, log start), over manifests of
// many shapes and rules, and reads only the sub-manifests holding deleted
// segments plus at most the one the deletion ends in. retentionStep's dry
// run reports the same.
func TestRetentionSummaryDecision(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	deleting, skipping := 0, 0
	for seed := range uint64(1500) {
		rnd := rand.New(rand.NewPCG(seed, 0x5eed))
		mem := objstore.NewMemory()
		ref, err := newManifestStore(mem, "")
		if err != nil {
			t.Fatal(err)
		}
		sh := sumRandomShape(t, rnd, ref)
		want := sumFullDecision(t, ref, sh)

		cnt := &remotekit.RecordingBucket{Bucket: mem}
		store, err := newManifestStore(cnt, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := remoteDecision(ctx, store.subs, sh.m, sh.local, sh.cfg, sh.now, 0)
		if err != nil {
			t.Fatalf("seed %d (%s): %v", seed, sh.desc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d (%s):\nfrom the references: %+v\nover every segment:  %+v", seed, sh.desc, got, want)
		}
		holding := 0 // sub-manifests holding deleted segments
		if len(want.Delete) > 0 {
			lastDeleted := want.Delete[len(want.Delete)-1].Segment.LastOffset
			for _, r := range sh.m.Sealed {
				if r.BaseOffset <= lastDeleted {
					holding++
				}
			}
			deleting++
		}
		if cnt.SubGets > holding+1 {
			t.Fatalf("seed %d (%s): read %d sub-manifests, %d hold deleted segments", seed, sh.desc, cnt.SubGets, holding)
		}
		if cnt.SubGets < len(sh.m.Sealed) {
			skipping++
		}

		step, err := retentionStep(ctx, store, sh.m, sh.etag, sh.local, sh.cfg, 0, RetentionOptions{DryRun: true, Now: func() time.Time { return sh.now }}, logger)
		if err != nil {
			t.Fatalf("seed %d (%s): %v", seed, sh.desc, err)
		}
		wantStart, wantBytes, wantN := sh.m.LogStartOffset, int64(0), 0
		if len(want.Delete) > 0 && want.NewLogStartOffset > sh.m.LogStartOffset {
			wantStart, wantBytes, wantN = want.NewLogStartOffset, want.Bytes(), len(want.Delete)
		}
		if step.pr.NewLogStartOffset != wantStart || step.pr.Bytes != wantBytes || step.pr.Segments != wantN || len(step.reports) != wantN {
			t.Fatalf("seed %d (%s): dry run %+v with %d reports, want log start %d, %d segments, %d bytes",
				seed, sh.desc, step.pr, len(step.reports), wantStart, wantN, wantBytes)
		}
		for i, r := range step.reports {
			d := want.Delete[i]
			if r.BaseOffset != d.Segment.BaseOffset || r.LastOffset != d.Segment.LastOffset || r.SizeBytes != d.Segment.Size ||
				r.MaxTimestamp != d.Segment.MaxTimestamp || r.Reason != d.Reason || r.SizeBeatTime != d.SizeBeatTime {
				t.Fatalf("seed %d (%s): report %d is %+v, want %+v", seed, sh.desc, i, r, d)
			}
		}
	}
	if deleting < 300 || skipping < 300 {
		t.Fatalf("the shapes are too narrow: %d of the cases delete, %d skip a sub-manifest", deleting, skipping)
	}
}
