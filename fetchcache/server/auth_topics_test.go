package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

// auditBucket records every call that reaches the store.
type auditBucket struct {
	objstore.BucketReader
	mu    sync.Mutex
	calls []string // "op key"
}

func (b *auditBucket) record(op, key string) {
	b.mu.Lock()
	b.calls = append(b.calls, op+" "+key)
	b.mu.Unlock()
}

func (b *auditBucket) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.calls
	b.calls = nil
	return out
}

func (b *auditBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.record("GET", key)
	return b.BucketReader.Get(ctx, key)
}

func (b *auditBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.record("GETRANGE", key)
	return b.BucketReader.GetRange(ctx, key, off, length)
}

func (b *auditBucket) Attributes(ctx context.Context, key string) (objstore.Attrs, error) {
	b.record("HEAD", key)
	return b.BucketReader.Attributes(ctx, key)
}

func (b *auditBucket) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	b.record("LIST", prefix)
	return b.BucketReader.List(ctx, prefix, fn)
}

// TestHostileTopicNamesNeverReachTheBucket: topic names Kafka would refuse
// ("../x", names with '/', NUL, backslashes, too long) are answered 400 or
// 404 over HTTP and UNKNOWN_TOPIC_OR_PARTITION over Kafka without a single
// object-store call derived from them, while a valid name does reach it.
func TestHostileTopicNamesNeverReachTheBucket(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("cold", 1, map[string]string{"remote.storage.enable": "true"})
	l := e.Log("cold", 0)
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(30, ts0, "cold"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	bkt := &auditBucket{BucketReader: mem}
	cat, err := fetchcache.NewRemoteCatalog(bkt, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat}))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	for _, path := range []string{
		"/v1/topics/..%2Fx/partitions/0",
		"/v1/topics/..%2Fx/partitions/0/records",
		"/v1/topics/a%2Fb/partitions/0/records",
		"/v1/topics/..%2F..%2Fmanifests/partitions/0",
		"/v1/topics/../x/partitions/0",
		"/v1/topics/%2E%2E/partitions/0",
		"/v1/topics/./partitions/0",
		"/v1/topics/x%00y/partitions/0",
		"/v1/topics/cold%5C..%5Cx/partitions/0",
		"/v1/topics/" + strings.Repeat("a", 250) + "/partitions/0",
		"/v1/topics/%C3%A9t%C3%A9/partitions/0",
	} {
		status, body, _ := httpGet(t, c, srv.URL+path, "")
		if status != http.StatusBadRequest && status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 400 or 404: %s", path, status, body)
		}
		if calls := bkt.take(); len(calls) != 0 {
			t.Errorf("%s reached the bucket: %q", path, calls)
		}
	}
	if status, body, _ := httpGet(t, c, srv.URL+"/v1/topics/cold/partitions/0/records", ""); status != 200 {
		t.Fatalf("valid topic: %d %s", status, body)
	}
	if calls := bkt.take(); len(calls) == 0 || !strings.Contains(strings.Join(calls, " "), "cold-0") {
		t.Fatalf("valid topic: bucket calls %q", calls)
	}

	addr := startKafka(t, cat, kafkasrv.KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hostile := []string{"../x", "a/b", "..", ".", "", "x\x00y", strings.Repeat("b", 250)}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes, fetch.SessionEpoch, fetch.ReplicaID = 12, 1<<20, -1, -1
	list := kmsg.NewPtrListOffsetsRequest()
	list.Version, list.ReplicaID = 7, -1
	for _, tp := range hostile {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = tp
		ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		fetch.Topics = append(fetch.Topics, ft)
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = tp
		lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
		list.Topics = append(list.Topics, lt)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	bkt.take() // the metadata listing
	fr, err := fetch.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	lr, err := list.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range hostile {
		if fc, lc := fr.Topics[i].Partitions[0].ErrorCode, lr.Topics[i].Partitions[0].ErrorCode; fc != kerr.UnknownTopicOrPartition.Code || lc != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("topic %q: fetch error %d, list offsets error %d", hostile[i], fc, lc)
		}
	}
	if calls := bkt.take(); len(calls) != 0 {
		t.Fatalf("hostile Kafka topics reached the bucket: %q", calls)
	}
}
