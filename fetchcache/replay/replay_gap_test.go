package replay

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
)

// gapPartition holds offsets 0-4 and 10-14; the manifest records 5-9 as
// lost (deleted at the source before they were uploaded).
type gapPartition struct{ a, b []byte }

func (p *gapPartition) Offsets(context.Context) (fetchcache.Offsets, error) {
	return fetchcache.Offsets{LogStart: 0, LogEnd: 15, LastStable: 15}, nil
}

func (p *gapPartition) Read(_ context.Context, offset int64, _ int) ([]byte, error) {
	switch {
	case offset < 5:
		return p.a, nil
	case offset < 10:
		return nil, &manifest.LostOffsetsError{Offset: offset, Gap: manifest.Gap{BaseOffset: 5, LastOffset: 9}}
	case offset < 15:
		return p.b, nil
	}
	return nil, nil
}

func (p *gapPartition) OffsetForTimestamp(_ context.Context, ts int64) (int64, int64, bool, error) {
	if ts <= 0 {
		return 0, 0, true, nil
	}
	return 0, 0, false, nil
}

func (p *gapPartition) AbortedTxns(context.Context, int64, int64) ([]fetchcache.AbortedTxn, error) {
	return nil, nil
}

// oneCatalog serves one partition, t-0.
type oneCatalog struct{ p fetchcache.Partition }

func (c oneCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	return []fetchcache.TopicInfo{{Name: "t", Partitions: []int32{0}}}, nil
}

func (c oneCatalog) Partition(_ context.Context, topic string, partition int32) (fetchcache.Partition, error) {
	if topic != "t" || partition != 0 {
		return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	return c.p, nil
}

// bothSources are the replay sources over cat: the catalog itself (as
// --bucket reads) and an HTTP client of a fetch service serving it
// (--fetch).
func bothSources(t *testing.T, cat fetchcache.Catalog) map[string]ReplaySource {
	t.Helper()
	srv := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	client, err := httpapi.NewClient(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]ReplaySource{"bucket": NewCatalogReplaySource(cat), "fetch": client}
}

// TestReplayLostOffsetsErrorSaysSo: a replay reaching offsets the manifest
// records as lost stops with an error saying they were deleted at the
// source, through --fetch as through --bucket — not "out of range [-1, -1]"
// for an offset inside the log.
func TestReplayLostOffsetsErrorSaysSo(t *testing.T) {
	batch := func(base int64) []byte {
		rs := make([]record.Record, 5)
		for i := range rs {
			rs[i] = record.Record{Offset: base + int64(i), Timestamp: 100, Value: []byte("v")}
		}
		var enc record.Encoder
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(base, codec.None), rs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, src := range bothSources(t, oneCatalog{p: &gapPartition{a: batch(0), b: batch(10)}}) {
		_, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 0, To: 1000, Stdout: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), "deleted at the source") {
			t.Errorf("%s: %v; want an error saying offsets 5-9 were deleted at the source", name, err)
		}
	}
}
