package kafkasrv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// idCatalog gives its topics IDs, as the remote catalog does from the
// bucket's topic objects.
type idCatalog = fetchkit.IDCatalog

const (
	testTopicID  = "o3Bx6y0QQxyxS2FrDcDiOw"
	otherTopicID = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// Metadata v10+ returns the catalog's topic IDs (and v12 finds a topic by
// ID); Fetch v13 serves a topic by its ID and answers an unknown one with
// UNKNOWN_TOPIC_ID; a franz-go consumer reads through it.
func TestKafkaTopicIDs(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 1, nil)
	e.Topic("plain", 1, nil)
	recs := e.Produce(e.Log("orders", 0), fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(30, ts0, "o"))
	cat := idCatalog{Catalog: e.Cat, IDs: map[string]string{"orders": testTopicID}}
	addr := startKafka(t, cat, KafkaOptions{})
	ctx := context.Background()
	id := topicIDBytes(testTopicID)

	rc := fetchkit.DialRaw(t, addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = nil
	mresp := kmsg.NewPtrMetadataResponse()
	if err := rc.Request(1, md, mresp); err != nil {
		t.Fatal(err)
	}
	got := map[string][16]byte{}
	for _, tp := range mresp.Topics {
		got[*tp.Topic] = tp.TopicID
	}
	if got["orders"] != id || got["plain"] != ([16]byte{}) {
		t.Fatalf("metadata v12 topic ids %v", got)
	}
	for _, tc := range []struct {
		id       [16]byte
		wantCode int16
		wantName string
	}{{id, 0, "orders"}, {topicIDBytes(otherTopicID), kerr.UnknownTopicID.Code, ""}} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = tc.id
		md.Topics = []kmsg.MetadataRequestTopic{mt}
		mresp := kmsg.NewPtrMetadataResponse()
		if err := rc.Request(2, md, mresp); err != nil {
			t.Fatal(err)
		}
		tp := mresp.Topics[0]
		if tp.ErrorCode != tc.wantCode || tc.wantName != "" && (tp.Topic == nil || *tp.Topic != tc.wantName || len(tp.Partitions) != 1) {
			t.Fatalf("metadata by id %v: %+v", tc.id, tp)
		}
	}

	fetchV13 := func(corr int32, tid [16]byte) kmsg.FetchResponseTopicPartition {
		t.Helper()
		q := kmsg.NewPtrFetchRequest()
		q.Version = 13
		q.ReplicaID, q.MaxBytes, q.SessionEpoch = -1, 1<<20, -1
		qt := kmsg.NewFetchRequestTopic()
		qt.TopicID = tid
		qp := kmsg.NewFetchRequestTopicPartition()
		qp.FetchOffset, qp.PartitionMaxBytes = 10, 1<<20
		qt.Partitions = []kmsg.FetchRequestTopicPartition{qp}
		q.Topics = []kmsg.FetchRequestTopic{qt}
		resp := kmsg.NewPtrFetchResponse()
		if err := rc.Request(corr, q, resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != tid || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch v13 response %+v", resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	p := fetchV13(3, id)
	if p.ErrorCode != 0 || p.HighWatermark != 30 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch v13 by id: code %d hw %d, %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
	var fb kmsg.RecordBatch
	if err := fb.ReadFrom(p.RecordBatches); err != nil || fb.FirstOffset > 10 || fb.FirstOffset+int64(fb.LastOffsetDelta) < 10 {
		t.Fatalf("fetch v13 first batch: %+v %v", fb, err)
	}
	if p := fetchV13(4, topicIDBytes(otherTopicID)); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch v13 of an unknown id: code %d", p.ErrorCode)
	}
	if p := fetchV13(5, [16]byte{}); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch v13 of the zero id: code %d", p.ErrorCode)
	}

	// A franz-go consumer (which fetches by ID once Metadata gave one).
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	var n int
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for n < len(recs) {
		fs := cl.PollFetches(cctx)
		if err := cctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", n, len(recs), err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(n) || string(r.Value) != string(recs[n].Value) {
				t.Fatalf("record %d: offset %d value %q, want %q", n, r.Offset, r.Value, recs[n].Value)
			}
			n++
		})
	}
}

// ListOffsets KIP-405 -4 (earliest local, v8+) and KIP-1005 -5 (latest
// tiered, v9+): on a local-only partition, a combined one (serve) and one
// read only from the bucket (fetch). Below their versions they are
// invalid, as any other negative timestamp.
func TestKafkaListOffsetsTiers(t *testing.T) {
	local := fetchkit.NewEnv(t)
	local.Topic("t", 1, nil)
	local.Produce(local.Log("t", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(40, ts0, "l"))

	combined, end := fetchkit.ColdCombined(t)

	re := fetchkit.NewEnv(t)
	re.Topic("t", 1, map[string]string{"remote.storage.enable": "true"})
	rl := re.Log("t", 0)
	re.Produce(rl, fetchkit.ProduceOpts{}, fetchkit.GenRecs(25, ts0, "r"))
	mem := fetchkit.Offload(t, re, rl)
	remote, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		code int16
		off  int64
	}
	for _, tc := range []struct {
		name          string
		cat           fetchcache.Catalog
		topic         string
		version       int16
		earliestLocal want
		latestTiered  want
	}{
		{"local", local.Cat, "t", 9, want{0, 0}, want{0, -1}},
		{"combined", combined, "cold", 9, want{0, end}, want{0, end - 1}},
		{"remote", remote, "t", 9, want{0, 0}, want{0, 24}},
		{"remote v8", remote, "t", 8, want{0, 0}, want{kerr.InvalidRequest.Code, -1}},
		{"remote v7", remote, "t", 7, want{kerr.InvalidRequest.Code, -1}, want{kerr.InvalidRequest.Code, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startKafka(t, tc.cat, KafkaOptions{})
			rc := fetchkit.DialRaw(t, addr)
			q := kmsg.NewPtrListOffsetsRequest()
			q.Version, q.ReplicaID = tc.version, -1
			qt := kmsg.NewListOffsetsRequestTopic()
			qt.Topic = tc.topic
			for _, ts := range []int64{-4, -5} {
				qp := kmsg.NewListOffsetsRequestTopicPartition()
				qp.Timestamp = ts
				qt.Partitions = append(qt.Partitions, qp)
			}
			q.Topics = []kmsg.ListOffsetsRequestTopic{qt}
			resp := kmsg.NewPtrListOffsetsResponse()
			if err := rc.Request(7, q, resp); err != nil {
				t.Fatal(err)
			}
			ps := resp.Topics[0].Partitions
			for i, w := range []want{tc.earliestLocal, tc.latestTiered} {
				g := want{ps[i].ErrorCode, ps[i].Offset}
				if w.code != 0 {
					g.off = -1 // no offset with an error
				}
				if g != w || w.code == 0 && ps[i].Timestamp != -1 {
					t.Errorf("timestamp %d at v%d: %+v (timestamp %d), want %+v", -4-i, tc.version, g, ps[i].Timestamp, w)
				}
			}
		})
	}
}

// A topic re-created while the fetch service's topic listing still names
// the old ID: Fetch v13 by the old ID is UNKNOWN_TOPIC_ID as soon as the
// partition's manifest re-read found the new lineage, never the new
// topic's data under the old ID (nor the old data under any ID).
func TestKafkaFetchOldTopicIDAfterRecreation(t *testing.T) {
	mem := objstore.NewMemory()
	old := remotekit.NewRemoteID(t, mem, "", testTopicID, 0, manifest.DefaultPolicy())
	old.Commit(remotekit.WriteLocal(t, t.TempDir(), 31, 2, 5, false).Files(t)...)
	s, _, _, err := manifest.ObserveTopic("", remotekit.TestTopic, nil, manifest.Observation{TopicID: testTopicID, Partitions: 1, NowMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now := time.Unix(1000, 0)
	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	addr := startKafka(t, cat, KafkaOptions{})
	rc := fetchkit.DialRaw(t, addr)
	fetch := func(corr int32, id string) kmsg.FetchResponseTopicPartition {
		t.Helper()
		q := kmsg.NewPtrFetchRequest()
		q.Version, q.ReplicaID, q.MaxBytes, q.SessionEpoch = 13, -1, 1<<20, -1
		qt := kmsg.NewFetchRequestTopic()
		qt.TopicID = topicIDBytes(id)
		qp := kmsg.NewFetchRequestTopicPartition()
		qp.Partition, qp.PartitionMaxBytes = remotekit.TestPartition, 1<<20
		qt.Partitions = []kmsg.FetchRequestTopicPartition{qp}
		q.Topics = []kmsg.FetchRequestTopic{qt}
		resp := kmsg.NewPtrFetchResponse()
		if err := rc.Request(corr, q, resp); err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch(1, testTopicID); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch by the current id: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	// Re-created: new lineage, topic object names it.
	cur := remotekit.NewRemoteID(t, mem, "", otherTopicID, 0, manifest.DefaultPolicy())
	cur.Commit(remotekit.WriteLocal(t, t.TempDir(), 32, 1, 5, false).Files(t)...)
	s, _, _, err = manifest.ObserveTopic("", remotekit.TestTopic, s, manifest.Observation{TopicID: otherTopicID, Partitions: 1, NowMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.PutTopicState(t, mem, s)
	now = now.Add(fetchcache.DefaultRemoteManifestTTL + time.Second) // the manifest is re-read; the listing (30 s) is not
	if p := fetch(2, testTopicID); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by the old id after re-creation: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

// ApiVersions advertises Fetch v13 only while every topic has an ID: a
// client fetching a topic without one must name it (v12), not send a zero
// ID, and librdkafka, once it has v13, fetches every topic by ID.
func TestKafkaFetchV13AdvertisedWithIDs(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 1, nil)
	e.Topic("plain", 1, nil)
	for _, tc := range []struct {
		name string
		cat  fetchcache.Catalog
		want int16
	}{
		{"no ids", e.Cat, 12},
		{"some ids", idCatalog{Catalog: e.Cat, IDs: map[string]string{"orders": testTopicID}}, 12},
		{"ids", idCatalog{Catalog: e.Cat, IDs: map[string]string{"orders": testTopicID, "plain": otherTopicID}}, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := fetchkit.DialRaw(t, startKafka(t, tc.cat, KafkaOptions{}))
			q := kmsg.NewPtrApiVersionsRequest()
			q.Version = 3
			q.ClientSoftwareName, q.ClientSoftwareVersion = "test", "1"
			resp := kmsg.NewPtrApiVersionsResponse()
			if err := rc.Request(1, q, resp); err != nil {
				t.Fatal(err)
			}
			for _, k := range resp.ApiKeys {
				if k.ApiKey == fetchKey && k.MaxVersion != tc.want {
					t.Fatalf("Fetch advertised up to v%d, want v%d", k.MaxVersion, tc.want)
				}
			}
		})
	}
}
