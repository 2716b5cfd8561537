package fetchcache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// readAll reads p from offset to its log end through Read, the way the
// serving layers page through a partition.
func readPartition(t *testing.T, p fetchcache.Partition, from int64) []fetchkit.Rec {
	t.Helper()
	ctx := context.Background()
	o, err := p.Offsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []fetchkit.Rec
	var dec record.Decoder
	for off := from; off < o.LogEnd; {
		data, err := p.Read(ctx, off, 700)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		it := record.NewIter(data)
		next := off
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			recs, err := dec.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					out = append(out, testrecs.FromRecord(r))
				}
			}
			next = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if next <= off {
			t.Fatalf("no progress at offset %d", off)
		}
		off = next
	}
	return out
}

// TestCombinedCatalogReadsAcrossTiers: offsets uploaded and then deleted
// locally are read from the bucket, the rest from disk, with one log start
// offset and one stream of records; a topic without remote storage stays
// local; a failing bucket leaves the local offsets served.
func TestCombinedCatalogReadsAcrossTiers(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("cold", 1, map[string]string{"remote.storage.enable": "true"})
	e.Topic("plain", 1, nil)
	l := e.Log("cold", 0)
	first := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.LZ4, Per: 4}, fetchkit.GenRecs(120, ts0, "a"))
	// Local retention after the upload: every rolled segment goes.
	mem := fetchkit.Offload(t, e, l)
	localStart := l.LogStartOffset()
	if localStart != first[len(first)-1].Offset+1 {
		t.Fatalf("local log start %d after deleting the uploaded segments", localStart)
	}
	second := e.Produce(l, fetchkit.ProduceOpts{Per: 3}, fetchkit.GenRecs(30, ts0+5000, "b"))
	pl := e.Log("plain", 0)
	plainRecs := e.Produce(pl, fetchkit.ProduceOpts{}, fetchkit.GenRecs(20, ts0, "p"))
	if err := pl.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.DeleteSegments(pl.Segments()[len(pl.Segments())-1].BaseOffset); err != nil {
		t.Fatal(err)
	}

	remote, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cat := fetchcache.NewCombinedCatalog(e.Dir, remote)
	ctx := context.Background()
	p, err := cat.Partition(ctx, "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := p.Offsets(ctx)
	if err != nil || o.LogStart != 0 || o.LogEnd != second[len(second)-1].Offset+1 {
		t.Fatalf("offsets %+v, %v; want the remote start 0 and the local end", o, err)
	}
	fetchkit.SameRecs(t, readPartition(t, p, 0), append(append([]fetchkit.Rec{}, first...), second...))
	fetchkit.SameRecs(t, readPartition(t, p, 57), append(append([]fetchkit.Rec{}, first[57:]...), second...))

	// Timestamps: the remote tier answers for old records, the local log
	// for new ones.
	if off, _, found, err := p.OffsetForTimestamp(ctx, ts0+10*40); err != nil || !found || off != 40 {
		t.Fatalf("offset for an uploaded timestamp: %d %v %v", off, found, err)
	}
	if off, _, found, err := p.OffsetForTimestamp(ctx, ts0+5000); err != nil || !found || off != localStart {
		t.Fatalf("offset for a local timestamp: %d %v %v, want %d", off, found, err, localStart)
	}
	segs, err := p.(fetchcache.SegmentLister).Segments(ctx)
	if err != nil || len(segs) < 2 || segs[0].Tier != "remote" || segs[len(segs)-1].Tier != "local" {
		t.Fatalf("segments %+v, %v", segs, err)
	}

	// Past the end: out of range naming the whole readable range, the
	// bucket's offsets included, and where each part is read from (the
	// local log alone knows only its own).
	var oe *fetchcache.OffsetOutOfRangeError
	for _, read := range []struct {
		name string
		f    func(off int64) error
	}{
		{"Read", func(off int64) error { _, err := p.Read(ctx, off, 100); return err }},
		{"ReadView", func(off int64) error { _, err := p.(fetchcache.SharedReader).ReadView(ctx, off, 100); return err }},
	} {
		err := read.f(o.LogEnd + 1)
		if !errors.As(err, &oe) || oe.LogStart != 0 || oe.LogEnd != o.LogEnd || oe.Where != fetchcache.WhereBoth || oe.LocalStart != localStart {
			t.Fatalf("%s past the end: %#v (%v), want range [0, %d) with the local part from %d", read.name, oe, err, o.LogEnd, localStart)
		}
		want := fmt.Sprintf("offset %d is out of range [0, %d]: offsets 0 to %d are readable, 0 to %d from the bucket and %d to %d from local disk",
			o.LogEnd+1, o.LogEnd, o.LogEnd-1, localStart-1, localStart, o.LogEnd-1)
		if err.Error() != want {
			t.Fatalf("%s past the end says %q, want %q", read.name, err, want)
		}
	}

	// A topic without remote storage is its local log only.
	pp, err := cat.Partition(ctx, "plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	if po, _ := pp.Offsets(ctx); po.LogStart != plainRecs[len(plainRecs)-1].Offset+1 {
		t.Fatalf("plain offsets %+v", po)
	}
	if _, err := pp.Read(ctx, 0, 100); !errors.As(err, &oe) || oe.LogStart != pl.LogStartOffset() || oe.Where != fetchcache.WhereLocal ||
		!strings.HasSuffix(err.Error(), "are readable, from local disk") {
		t.Fatalf("read below a plain topic's start: %v", err)
	}
	if _, err := cat.Partition(ctx, "cold", 1); !errors.As(err, new(*fetchcache.UnknownTopicOrPartitionError)) {
		t.Fatalf("unknown partition: %v", err)
	}

	// A bucket that fails: local offsets still served, remote reads fail.
	broken := objstore.WithFaults(mem, objstore.FailMatching(func(objstore.Call) bool { return true }, errors.New("bucket down")))
	bremote, err := fetchcache.NewRemoteCatalog(broken, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bp, err := fetchcache.NewCombinedCatalog(e.Dir, bremote).Partition(ctx, "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	if bo, err := bp.Offsets(ctx); err != nil || bo.LogStart != localStart {
		t.Fatalf("offsets with the bucket down: %+v %v", bo, err)
	}
	fetchkit.SameRecs(t, readPartition(t, bp, localStart), second)
	if _, err := bp.Read(ctx, 0, 100); err == nil || errors.As(err, &oe) {
		t.Fatalf("read of an uploaded offset with the bucket down: %v, want the bucket's error", err)
	}
}

const ts0 = fetchkit.Ts0

// TestCombinedCatalogOtherLineageNotServed: serve on a fresh data dir over
// a bucket holding an earlier incarnation of the topic (another topic ID,
// the lineage the bucket serves). Below the new log's start the combined
// reader must not serve the old incarnation's records as this topic's:
// the bucket holds nothing of it until its own uploads make its lineage
// current.
func TestCombinedCatalogOtherLineageNotServed(t *testing.T) {
	old := fetchkit.NewEnvWithTopicIDs(t)
	_, mem := fetchkit.OffloadedTopic(t, old, "cold", 0)

	e := fetchkit.NewEnvWithTopicIDs(t)
	e.Topic("cold", 1, map[string]string{"remote.storage.enable": "true"})
	l := e.Log("cold", 0)
	recs := e.Produce(l, fetchkit.ProduceOpts{Per: 4}, fetchkit.GenRecs(40, ts0, "new"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	// The local log start moved past offsets no upload of this topic
	// holds (records deleted): what lies below is this topic's, gone.
	if _, err := l.DeleteSegments(l.Segments()[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	localStart := l.LogStartOffset()
	if localStart == 0 {
		t.Fatal("test setup: the local log start did not move")
	}
	ctx := context.Background()
	p, _ := combinedPartition(t, e.Dir, mem, fetchcache.RemoteCatalogOptions{}, "cold", 0)
	o, err := p.Offsets(ctx)
	if err != nil || o.LogStart != localStart {
		t.Fatalf("offsets %+v, %v: want the local log start %d (the bucket's lineage is another topic id's)", o, err, localStart)
	}
	if _, err := p.Read(ctx, 0, 100); err == nil {
		t.Fatal("read offset 0 from the other incarnation's lineage")
	}
	var want []fetchkit.Rec
	for _, r := range recs {
		if r.Offset >= localStart {
			want = append(want, r)
		}
	}
	fetchkit.SameRecs(t, readPartition(t, p, localStart), want)
}

// TestCombinedCatalogLineageSwitchedMidRequest: another data dir creates
// the topic again over the same bucket, and its lineage becomes the one the
// topic object serves while serve's partition has its own lineage open.
// The first request after that, which re-reads the manifest (past
// ManifestTTL) after it checked which lineage the partition reads, must
// not read the other lineage's records at offsets below the local log
// start; neither must later ones.
func TestCombinedCatalogLineageSwitchedMidRequest(t *testing.T) {
	ctx := context.Background()
	sw := newLineageSwitch(t)
	p := sw.p
	// Each request may still read the own lineage (its objects stay until
	// the superseded lineage's retention), or find no remote tier: never
	// the other lineage's records, nor an unknown partition (the log dir
	// has it).
	for i := range 3 {
		sw.advance(fetchcache.DefaultRemoteManifestTTL + time.Second)
		data, err := p.Read(ctx, 0, 1<<20)
		var oe *fetchcache.OffsetOutOfRangeError
		if err != nil && !errors.As(err, &oe) {
			t.Fatalf("request %d: read at offset 0: %v, want the own records or out of range", i, err)
		}
		if _, _, _, err := p.OffsetForTimestamp(ctx, 0); err != nil {
			t.Fatalf("request %d: offset for timestamp 0: %v", i, err)
		}
		if err != nil {
			continue
		}
		var dec record.Decoder
		it := record.NewIter(data)
		b, _ := it.Next()
		recs, err := dec.Records(b)
		if err != nil || len(recs) == 0 {
			t.Fatalf("read at offset 0: %d records, %v", len(recs), err)
		}
		if k := string(recs[0].Key); k != "a-key-0" {
			t.Fatalf("read at offset 0 the record of key %q, not the own lineage's a-key-0: another data dir's lineage was served", k)
		}
	}
	// Nor a listing of offsets, which re-reads the manifest first too.
	sw.advance(fetchcache.DefaultRemoteManifestTTL + time.Second)
	if o, err := p.Offsets(ctx); err != nil || o.LogEnd != sw.ownEnd {
		t.Fatalf("offsets %+v, %v: want the own log end %d", o, err, sw.ownEnd)
	}
}

// TestCombinedCatalogLineageSwitchedServedAtOnce: the data dir whose
// lineage the bucket serves now is served from the bucket at once, not once
// the topic object read when the own lineage was opened ages in the cache,
// and its partition takes the place of the own lineage's in the catalog
// (one open remote partition per partition, however often the topic is
// created again).
func TestCombinedCatalogLineageSwitchedServedAtOnce(t *testing.T) {
	ctx := context.Background()
	sw := newLineageSwitch(t)
	other, ol, remote := sw.other, sw.ol, sw.remote
	if _, err := ol.DeleteSegments(ol.Segments()[len(ol.Segments())-1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	op, err := fetchcache.NewCombinedCatalog(other.Dir, remote).Partition(ctx, "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := op.Offsets(ctx); err != nil || o.LogStart != 0 {
		t.Fatalf("the serving data dir's offsets %+v, %v: want the bucket's log start 0", o, err)
	}
	if n := remote.OpenPartitions(); n != 1 {
		t.Fatalf("%d remote partitions open for one partition", n)
	}
}

// lineageSwitch is a bucket whose topic "cold" the own data dir offloaded
// (lineage A: 60 records remote, 6 local), read through p, a partition of
// serve's combined catalog over remote (a catalog on the clock now), and
// then created again by another data dir, other, whose lineage B (200
// records, rolled and uploaded) the topic object serves since.
type lineageSwitch struct {
	other  *fetchkit.Env
	ol     *localtier.Log
	p      fetchcache.Partition
	remote *fetchcache.RemoteCatalog
	ownEnd int64
	mu     sync.Mutex
	now    time.Time
}

// advance moves the catalog's clock on by d.
func (sw *lineageSwitch) advance(d time.Duration) {
	sw.mu.Lock()
	sw.now = sw.now.Add(d)
	sw.mu.Unlock()
}

func newLineageSwitch(t *testing.T) *lineageSwitch {
	t.Helper()
	ctx := context.Background()
	sw := &lineageSwitch{now: time.Unix(1_000_000, 0)}
	clock := func() time.Time { sw.mu.Lock(); defer sw.mu.Unlock(); return sw.now }
	own := fetchkit.NewEnvWithTopicIDs(t)
	_, mem := fetchkit.OffloadedTopic(t, own, "cold", 6)
	p, remote := combinedPartition(t, own.Dir, mem, fetchcache.RemoteCatalogOptions{Now: clock}, "cold", 0)
	if o, err := p.Offsets(ctx); err != nil || o.LogStart != 0 {
		t.Fatalf("offsets %+v, %v: want the own lineage's log start 0", o, err)
	}
	ownRecs := readPartition(t, p, 0)
	if len(ownRecs) == 0 || string(ownRecs[0].Key) != "a-key-0" {
		t.Fatalf("test setup: the own lineage reads %d records", len(ownRecs))
	}
	ownEnd := ownRecs[len(ownRecs)-1].Offset + 1

	other := fetchkit.NewEnvWithTopicIDs(t)
	other.Topic("cold", 1, map[string]string{"remote.storage.enable": "true"})
	ol := other.Log("cold", 0)
	other.Produce(ol, fetchkit.ProduceOpts{Per: 4}, fetchkit.GenRecs(200, fetchkit.Ts0, "x"))
	if err := ol.Roll(); err != nil {
		t.Fatal(err)
	}
	fetchkit.UploadAll(t, other, mem)
	ownID, err := own.Dir.TopicID("cold")
	if err != nil {
		t.Fatal(err)
	}
	if _, served, err := remotelog.ResolveTopic(ctx, mem, "", "cold"); err != nil || served == "" || served == ownID.String() {
		t.Fatalf("test setup: the bucket serves lineage %q (%v), want the other data dir's", served, err)
	}
	sw.other, sw.ol, sw.p, sw.remote, sw.ownEnd = other, ol, p, remote, ownEnd
	return sw
}

// TestCombinedCatalogListingChecksSiblingEnds: serve lists no bucket, yet a
// listing of one partition's offsets checks the ends of its topic's other
// partitions alongside (the log dir knows them), as the fetch service's
// does from its listing: a client asking the partitions one by one does not
// wait for one end check after the other.
func TestCombinedCatalogListingChecksSiblingEnds(t *testing.T) {
	e := fetchkit.NewEnvWithTopicIDs(t)
	e.Topic("cold", 3, map[string]string{"remote.storage.enable": "true"})
	for p := range int32(3) {
		l := e.Log("cold", p)
		e.Produce(l, fetchkit.ProduceOpts{Per: 4}, fetchkit.GenRecs(40, fetchkit.Ts0, "s"))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	p, remote := combinedPartition(t, e.Dir, mem, fetchcache.RemoteCatalogOptions{}, "cold", 0)
	if _, err := p.Offsets(fetchcache.WithOffsetsListing(context.Background())); err != nil {
		t.Fatal(err)
	}
	for n := range int32(3) {
		if !remote.EndChecked("cold", n) {
			t.Errorf("partition %d: end not checked", n)
		}
	}
}

// combinedPartition is a partition of serve's combined catalog over dir and
// a remote catalog over b.
func combinedPartition(t *testing.T, dir *localtier.LogDir, b objstore.BucketReader, o fetchcache.RemoteCatalogOptions, topic string, partition int32) (fetchcache.Partition, *fetchcache.RemoteCatalog) {
	t.Helper()
	remote, err := fetchcache.NewRemoteCatalog(b, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fetchcache.NewCombinedCatalog(dir, remote).Partition(context.Background(), topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	return p, remote
}
