package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// listCountingBucket counts List calls: the read path must never list.
type listCountingBucket struct {
	objstore.Bucket
	lists atomic.Int64
}

func (b *listCountingBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	b.lists.Add(1)
	return b.Bucket.List(ctx, prefix, fn)
}

func TestRemoteCatalogServesUploadedSegments(t *testing.T) {
	e := fetchkit.NewEnv(t)
	remote := map[string]string{"remote.storage.enable": "true"}
	e.Topic("cold", 2, remote)
	e.Topic("other-topic.x", 1, remote)
	l := e.Log("cold", 0)
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Snappy, Per: 5}, fetchkit.GenRecs(150, ts0, "cold"))
	e.Produce(e.Log("cold", 1), fetchkit.ProduceOpts{Codec: codec.Gzip}, fetchkit.GenRecs(40, ts0, "c1"))
	e.Produce(e.Log("other-topic.x", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(40, ts0, "o"))
	for _, name := range []string{"cold", "other-topic.x"} {
		tp, _ := e.Dir.Topic(name)
		for _, pl := range tp.Partitions {
			if err := pl.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	bkt := &listCountingBucket{Bucket: mem}
	var nowMs atomic.Int64 // the servers read the clock concurrently
	nowMs.Store(ts0)
	cat, err := fetchcache.NewRemoteCatalog(bkt, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return time.UnixMilli(nowMs.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	topics, err := cat.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 2 || topics[0].Name != "cold" || len(topics[0].Partitions) != 2 || topics[1].Name != "other-topic.x" {
		t.Fatalf("topics %+v", topics)
	}
	// One listing is two LISTs: the topic objects (which lineage each
	// topic serves) and the manifests.
	if _, err := cat.Topics(ctx); err != nil || bkt.lists.Load() != 2 {
		t.Fatalf("second listing within the TTL: lists %d, err %v", bkt.lists.Load(), err)
	}
	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := cat.Partition(ctx, "cold", 5); !errors.As(err, &ue) {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := cat.Partition(ctx, "../bad", 0); !errors.As(err, &ue) {
		t.Fatalf("invalid topic: %v", err)
	}

	want := testrecs.FromLog(t, l)
	addr := startKafka(t, cat, kafkasrv.KafkaOptions{})
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "cold", 0, kgo.NewOffset().AtStart(), len(want)), want)
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "cold", 0, kgo.NewOffset().At(77), len(want)-77), want[77:])
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "cold", 0, kgo.NewOffset().AfterMilli(ts0+1003), len(want)-101), want[101:])
	lists := bkt.lists.Load()
	adm := kadm.NewClient(fetchkit.MustClient(t, kgo.SeedBrokers(addr)))
	end, err := adm.ListEndOffsets(ctx, "cold")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("cold", 0); o.Offset != 150 {
		t.Fatalf("remote end offset %+v", o)
	}

	// HTTP over the remote catalog: partition details and an out-of-range
	// offset.
	h := httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/topics/cold/partitions/0", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"tier":"remote"`) {
		t.Fatalf("partition details %d %s", w.Code, w.Body.String())
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/topics/cold/partitions/0/records?offset=151", nil))
	if w.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("past the end: %d %s", w.Code, w.Body.String())
	}
	if n := bkt.lists.Load(); n != lists {
		t.Fatalf("the read path listed the bucket (%d lists)", n-lists)
	}

	// New segments committed later are found once the manifest TTL passed.
	more := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Snappy}, fetchkit.GenRecs(10, ts0+5000, "more"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	fetchkit.UploadAll(t, e, mem)
	nowMs.Add((fetchcache.DefaultRemoteManifestTTL + time.Second).Milliseconds())
	p, err := cat.Partition(ctx, "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	if off, err := p.Offsets(ctx); err != nil || off.LogEnd != more[len(more)-1].Offset+1 {
		t.Fatalf("offsets after a new commit %+v %v", off, err)
	}
}
