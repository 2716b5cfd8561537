package remotetier

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestReviewReplaceInsideSubSealedBySameCommit: a pass whose commit appends
// a segment that makes the root seal its oldest inline segments, and
// replaces (compaction) a range among those segments, must commit. The
// replace step loads the sub-manifest the append step just sealed, which
// is not stored yet (only the final commit's sub-manifests are written
// before the root).
func TestReviewReplaceInsideSubSealedBySameCommit(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "c", 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0", "segment.bytes", "1048576")
	l := upPartition(t, d, "c", 0)
	keyMod := func(i int) string { return fmt.Sprintf("k%d", i%7) }
	for s := 0; s < 4; s++ {
		upAppend(t, l, 5, 4, keyMod, 40)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	mem := objstore.NewMemory()
	pol := manifest.Policy{InlineMax: 4, SubSegments: 4}
	u := upUploader(t, mem, NewLocalSource(d, nil), Options{Policy: pol})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 4 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	if m := upLoad(t, mem, "c", 0); len(m.Sealed) != 0 || len(m.Segments) != 4 {
		t.Fatalf("after the first pass: %d sealed, %d inline; want 0 and 4", len(m.Sealed), len(m.Segments))
	}
	if _, err := compactor.RunOnce(ctx, d, compactor.PassOptions{Force: true, Config: compactor.Config{Now: func() time.Time { return upNow }}}); err != nil {
		t.Fatal(err)
	}
	// A new segment follows: appending it makes five inline segments, so the
	// commit seals the oldest four, the ones the cleaned segment replaces.
	upAppend(t, l, 2, 4, keyMod, 40)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	upAppend(t, l, 1, 4, keyMod, 40)
	for pass := 2; pass <= 3; pass++ {
		rep, err := u.RunOnce(ctx)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if pass == 2 && (rep.ReplacedSegments == 0 || rep.UploadedSegments != 1) {
			t.Fatalf("pass %d: %+v", pass, rep)
		}
	}
	segs := l.Segments()
	upCheckConsistent(t, mem, "c", 0)
	upCheckRemote(t, mem, l, "c", 0, segs[len(segs)-1].BaseOffset)
}

// TestReviewRetentionNothingDueReadsNoSubManifests: a sidecar pass whose
// remote retention has nothing to delete (every segment is young) must not
// read the partition's sealed sub-manifests: their references carry the
// timestamps and log bytes retention needs (docs/format/manifest.md,
// "log_bytes ... so size-based retention needs no sub-manifest"). With
// 100,000 segments a pass otherwise fetches and decodes ~390 sub-manifests
// (~80 MB) per partition every Interval: the 64-entry cache is scanned
// in order, so every one of them misses.
func TestReviewRetentionNothingDueReadsNoSubManifests(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "r", 1)
	l := upPartition(t, d, "r", 0)
	upSegments(t, l, 80, 1, 2, 10)
	cnt := &remotekit.RecordingBucket{Bucket: objstore.NewMemory()}
	cfg := topicconfig.Defaults()
	cfg.RetentionMs = 365 * 24 * 3600 * 1000 // nothing is due
	u := upUploader(t, cnt, NewLocalSource(d, nil), Options{Policy: manifest.Policy{InlineMax: 1, SubSegments: 1},
		MaxCommitSegments: 100,
		RemoteRetention: func(p Partition) (RetentionRule, bool) {
			return RetentionRule{Config: cfg}, true
		}})
	if rep, err := u.RunOnce(ctx); err != nil || rep.UploadedSegments != 80 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	if m := upLoad(t, cnt, "r", 0); len(m.Sealed) < 70 {
		t.Fatalf("%d sealed sub-manifests, want at least 70", len(m.Sealed))
	}
	before := cnt.SubGetsNow()
	rep, err := u.RunOnce(ctx)
	if err != nil || rep.UploadedSegments != 0 || rep.RetainedSegments != 0 {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
	if got := cnt.SubGetsNow() - before; got > 1 {
		t.Fatalf("a pass with nothing to retain read %d sub-manifests", got)
	}
}
