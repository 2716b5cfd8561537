package kafkasrv

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

const ts0 = fetchkit.Ts0

func TestKafkaConsumeCodecsAcrossSegments(t *testing.T) {
	e := fetchkit.NewEnv(t)
	codecs := []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}
	e.Topic("codecs", len(codecs), nil)
	want := map[int32][]fetchkit.Rec{}
	for i, c := range codecs {
		l := e.Log("codecs", int32(i))
		want[int32(i)] = e.Produce(l, fetchkit.ProduceOpts{Codec: c, Per: 7}, fetchkit.GenRecs(120, ts0, c.String()))
		if n := len(l.Segments()); n < 3 {
			t.Fatalf("codec %v: %d segments, want several", c, n)
		}
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	for i, c := range codecs {
		p := int32(i)
		t.Run(c.String(), func(t *testing.T) {
			w := want[p]
			t.Run("start", func(t *testing.T) {
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AtStart(), len(w)), w)
			})
			t.Run("absolute", func(t *testing.T) {
				// Mid-batch: the batch holding 53 is returned whole, the
				// client drops the records before 53.
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().At(53), len(w)-53), w[53:])
			})
			t.Run("timestamp", func(t *testing.T) {
				// First record with timestamp >= ts0+10*77+5 is offset 78.
				fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AfterMilli(ts0+775), len(w)-78), w[78:])
			})
			t.Run("small_fetches", func(t *testing.T) {
				got := testrecs.ConsumeKgo(t, addr, "codecs", p, kgo.NewOffset().AtStart(), len(w),
					kgo.FetchMaxBytes(300), kgo.FetchMaxPartitionBytes(200))
				fetchkit.SameRecs(t, got, w)
			})
		})
	}
}

func TestKafkaConsumeCompactedWithGaps(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("compacted", 1, map[string]string{
		"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0",
		"delete.retention.ms": "86400000", "internal.segment.bytes": "2048",
	})
	l := e.Log("compacted", 0)
	var recs []fetchkit.Rec
	now := time.Now().UnixMilli()
	for i := range 160 {
		k := i % 23 // later, only a few keys are rewritten: the survivors leave gaps
		if i >= 100 {
			k = i % 5
		}
		r := fetchkit.Rec{Timestamp: now + int64(i), Key: []byte("key-" + strconv.Itoa(k)), Value: []byte("write " + strconv.Itoa(i))}
		if i == 150 {
			r.Value = nil // a tombstone survives (delete.retention.ms not passed)
		}
		recs = append(recs, r)
	}
	e.Produce(l, fetchkit.ProduceOpts{Codec: codec.LZ4, Per: 4}, recs)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	rep, err := compactor.RunOnce(context.Background(), e.Dir, compactor.PassOptions{Force: true, Config: compactor.Config{DedupeBufferSize: 1 << 20}})
	if err != nil {
		t.Fatalf("compact: %v (%+v)", err, rep)
	}
	want := testrecs.FromLog(t, l)
	gaps := 0
	for i := 1; i < len(want); i++ {
		if want[i].Offset != want[i-1].Offset+1 {
			gaps++
		}
	}
	if gaps == 0 || len(want) >= len(recs) {
		t.Fatalf("compaction left %d of %d records with %d gaps; the test needs gaps", len(want), len(recs), gaps)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "compacted", 0, kgo.NewOffset().AtStart(), len(want)), want)
	// Starting inside a gap serves from the next record present.
	var gapAt int64 = -1
	var from int
	for i := 1; i < len(want); i++ {
		if want[i].Offset > want[i-1].Offset+1 {
			gapAt, from = want[i-1].Offset+1, i
			break
		}
	}
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "compacted", 0, kgo.NewOffset().At(gapAt), len(want)-from), want[from:])
}

func TestKafkaReadCommitted(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("txn", 1, nil)
	l := e.Log("txn", 0)
	var committed, all []fetchkit.Rec
	plain := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Zstd}, fetchkit.GenRecs(10, ts0, "plain"))
	aborted := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Zstd, PID: 7, Txn: true}, fetchkit.GenRecs(8, ts0+1000, "aborted"))
	kept := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.Snappy, PID: 8, Txn: true}, fetchkit.GenRecs(6, ts0+2000, "kept"))
	if _, err := l.AppendEndTxnMarker(7, 0, false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(8, 0, true, 1); err != nil {
		t.Fatal(err)
	}
	after := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(5, ts0+3000, "after"))
	committed = append(append(append(committed, plain...), kept...), after...)
	all = append(append(append(append(all, plain...), aborted...), kept...), after...)
	if got := l.AbortedTxns(0, l.LogEndOffset()); len(got) != 1 {
		t.Fatalf("setup: aborted txns %+v", got)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	t.Run("read_committed", func(t *testing.T) {
		fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())), committed)
	})
	t.Run("read_uncommitted", func(t *testing.T) {
		fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "txn", 0, kgo.NewOffset().AtStart(), len(all)), all)
	})
}

// TestKafkaReadCommittedStopsAtOpenTxn: records at or past the last stable
// offset are not served to READ_COMMITTED consumers, and the high watermark
// still says where the log ends.
func TestKafkaReadCommittedStopsAtOpenTxn(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("open", 1, nil)
	l := e.Log("open", 0)
	plain := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(4, ts0, "plain"))
	e.Produce(l, fetchkit.ProduceOpts{PID: 9, Txn: true}, fetchkit.GenRecs(3, ts0, "open"))
	if lso := l.LastStableOffset(); lso != 4 {
		t.Fatalf("setup: lso %d", lso)
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.IsolationLevel, req.SessionEpoch = 1<<20, 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "open"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 7 || p.LastStableOffset != 4 || p.LogStartOffset != 0 {
		t.Fatalf("partition answer %+v", p)
	}
	it := record.NewIter(p.RecordBatches)
	var last int64 = -1
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		last = b.LastOffset()
	}
	if last != plain[len(plain)-1].Offset || it.Err() != nil {
		t.Fatalf("read_committed returned batches up to %d (err %v), want up to %d", last, it.Err(), plain[len(plain)-1].Offset)
	}
	if p.AbortedTransactions == nil {
		t.Fatal("read_committed answer has null aborted transactions")
	}
}

func TestKafkaFetchWaitsForNewData(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("live", 1, nil)
	l := e.Log("live", 0)
	first := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(3, ts0, "first"))
	addr := startKafka(t, e.Cat, KafkaOptions{MaxFetchWait: 2 * time.Second})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(2*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"live": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []fetchkit.Rec
	collect := func(n int) {
		for len(got) < n && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, fetchkit.Rec{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value})
			})
		}
	}
	collect(3)
	// The consumer now waits at the log end; new data reaches it.
	second := e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(2, ts0+100, "second"))
	collect(5)
	want := append(first, second...)
	for i := range want {
		want[i].Headers = nil
	}
	for i := range got {
		got[i].Headers = nil
	}
	fetchkit.SameRecs(t, got, want)
}

func TestKafkaListOffsets(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("lo", 2, nil)
	recs := e.Produce(e.Log("lo", 0), fetchkit.ProduceOpts{Codec: codec.Gzip}, fetchkit.GenRecs(50, ts0, "lo"))
	e.Produce(e.Log("lo", 1), fetchkit.ProduceOpts{PID: 4, Txn: true}, fetchkit.GenRecs(3, ts0, "open"))
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 || o.Err != nil {
		t.Fatalf("start %+v", o)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 50 || o.Err != nil {
		t.Fatalf("end %+v", o)
	}
	if o, _ := end.Lookup("lo", 1); o.Offset != 3 {
		t.Fatalf("end of partition with an open transaction %+v", o)
	}
	committedEnd, err := adm.ListCommittedOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := committedEnd.Lookup("lo", 1); o.Offset != 0 {
		t.Fatalf("committed end of partition with an open transaction %+v", o)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, ts0+205, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("lo", 0); o.Offset != 21 || o.Timestamp != recs[21].Timestamp {
		t.Fatalf("after milli %+v", o)
	}
	// Later than every record: offset -1 (kadm reports the end offset).
	late, err := adm.ListOffsetsAfterMilli(ctx, ts0+1_000_000, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := late.Lookup("lo", 0); o.Offset != 50 && o.Offset != -1 {
		t.Fatalf("after every record %+v", o)
	}
	// Max timestamp (-3, v7).
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	for _, ts := range []int64{-3, -2, -1, ts0 + 5, -7} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	type got struct {
		err       int16
		off, time int64
	}
	want := []got{{0, 49, recs[49].Timestamp}, {0, 0, -1}, {0, 50, -1}, {0, 1, recs[1].Timestamp}, {kerr.InvalidRequest.Code, -1, -1}}
	for i, w := range want {
		if g := (got{ps[i].ErrorCode, ps[i].Offset, ps[i].Timestamp}); g != w {
			t.Errorf("query %d: got %+v, want %+v", i, g, w)
		}
	}
	// An unknown partition (clients never send one; raw).
	rc := fetchkit.DialRaw(t, addr)
	unk := kmsg.NewPtrListOffsetsRequest()
	unk.Version = 1
	ut := kmsg.NewListOffsetsRequestTopic()
	ut.Topic = "lo"
	up := kmsg.NewListOffsetsRequestTopicPartition()
	up.Partition, up.Timestamp = 9, -1
	ut.Partitions = append(ut.Partitions, up)
	unk.Topics = append(unk.Topics, ut)
	rc.Send(listOffsetsKey, 1, 3, false, unk.AppendTo(nil))
	body, err := rc.Recv(3)
	if err != nil {
		t.Fatal(err)
	}
	uresp := kmsg.NewPtrListOffsetsResponse()
	uresp.Version = 1
	if err := uresp.ReadFrom(body); err != nil || uresp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %+v %v", uresp, err)
	}
}

func TestKafkaMetadata(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("a", 3, nil)
	e.Topic("b.c-d", 1, nil)
	ctx := context.Background()
	t.Run("listener_address", func(t *testing.T) {
		addr := startKafka(t, e.Cat, KafkaOptions{})
		adm := kadm.NewClient(fetchkit.MustClient(t, kgo.SeedBrokers(addr)))
		md, err := adm.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != addr || md.Cluster != DefaultKafkaClusterID {
			t.Fatalf("brokers %+v cluster %q, want %s", md.Brokers, md.Cluster, addr)
		}
		if got := md.Topics.Names(); len(got) != 2 || got[0] != "a" || got[1] != "b.c-d" {
			t.Fatalf("topics %v", got)
		}
		a := md.Topics["a"]
		if len(a.Partitions) != 3 || a.Partitions[2].Leader != 0 || a.ID != (kadm.TopicID{}) {
			t.Fatalf("topic a %+v", a)
		}
		md, err = adm.Metadata(ctx, "a", "nope")
		if err != nil {
			t.Fatal(err)
		}
		if md.Topics["nope"].Err == nil || !errors.Is(md.Topics["nope"].Err, kerr.UnknownTopicOrPartition) || md.Topics["a"].Err != nil {
			t.Fatalf("unknown topic: %+v", md.Topics)
		}
	})
	t.Run("advertised", func(t *testing.T) {
		addr := startKafka(t, e.Cat, KafkaOptions{AdvertisedAddr: "kafka.example:19092", NodeID: 3})
		for _, v := range []int16{0, 1, 4, 9, 12} {
			rc := fetchkit.DialRaw(t, addr)
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			if v == 0 {
				req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
			}
			rc.Send(metadataKey, v, 21, req.IsFlexible(), req.AppendTo(nil))
			body, err := rc.Recv(21)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			md := kmsg.NewPtrMetadataResponse()
			md.Version = v
			if req.IsFlexible() {
				body = body[1:] // response header tags
			}
			if err := md.ReadFrom(body); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			if len(md.Brokers) != 1 || md.Brokers[0].Host != "kafka.example" || md.Brokers[0].Port != 19092 || md.Brokers[0].NodeID != 3 || len(md.Topics) != 2 {
				t.Fatalf("v%d: %+v", v, md)
			}
			if v >= 1 && md.ControllerID != 3 {
				t.Fatalf("v%d: controller %d", v, md.ControllerID)
			}
		}
	})
}

func TestKafkaProduceRefused(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("ro", 1, nil)
	addr := startKafka(t, e.Cat, KafkaOptions{})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ro", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("produce: %v, want POLICY_VIOLATION", err)
	}
	if l := e.Log("ro", 0); l.LogEndOffset() != 0 {
		t.Fatalf("produce wrote to the log: end %d", l.LogEndOffset())
	}
}

func TestKafkaProtocolErrors(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, nil)
	addr := startKafka(t, e.Cat, KafkaOptions{MaxRequestBytes: 4096})

	t.Run("api_versions_kip511", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(apiVersionsKey, 9, 11, true, []byte{1, 1, 0}) // a future version's body
		body, err := rc.Recv(11)
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(KafkaAPIVersions) {
			t.Fatalf("KIP-511 answer %+v", resp)
		}
	})
	t.Run("api_versions_all", func(t *testing.T) {
		for v := int16(0); v <= 3; v++ {
			rc := fetchkit.DialRaw(t, addr)
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "test", "1"
			rc.Send(apiVersionsKey, v, 5, v >= 3, req.AppendTo(nil))
			body, err := rc.Recv(5) // header v0 even for v3
			if err != nil {
				t.Fatal(err)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = v
			if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) != len(KafkaAPIVersions) {
				t.Fatalf("v%d: %+v %v", v, resp, err)
			}
		}
	})
	t.Run("unsupported_api", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = 2, "group"
		rc.Send(req.Key(), 2, 6, false, req.AppendTo(nil))
		body, err := rc.Recv(6)
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.Version = 2
		if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("FindCoordinator: %+v %v", resp, err)
		}
	})
	t.Run("unsupported_version", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		req := kmsg.NewPtrFetchRequest()
		req.Version = 13 // topic ids: not served
		rc.Send(req.Key(), 13, 7, true, req.AppendTo(nil))
		body, err := rc.Recv(7)
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 13
		if err := resp.ReadFrom(body[1:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("Fetch v13: %+v %v", resp, err)
		}
	})
	closed := func(t *testing.T, rc *fetchkit.RawConn) {
		t.Helper()
		if _, err := rc.Recv(0); err == nil {
			t.Fatal("connection still open after a bad request")
		}
	}
	t.Run("unknown_api_key", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(9999, 0, 8, false, nil)
		closed(t, rc)
	})
	t.Run("malformed_body", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(fetchKey, 11, 9, false, []byte{0, 0, 0})
		closed(t, rc)
	})
	t.Run("frame_too_large", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		rc.Send(metadataKey, 1, 10, false, bytes.Repeat([]byte{0}, 5000))
		closed(t, rc)
	})
	t.Run("incremental_session", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch = 77, 3
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
			t.Fatalf("incremental fetch of an unknown session: %+v", resp)
		}
	})
	t.Run("produce_acks0_no_response", func(t *testing.T) {
		rc := fetchkit.DialRaw(t, addr)
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks = 7, 0
		rc.Send(produceKey, 7, 12, false, p.AppendTo(nil))
		m := kmsg.NewPtrMetadataRequest()
		m.Version = 1
		rc.Send(metadataKey, 1, 13, false, m.AppendTo(nil))
		if _, err := rc.Recv(13); err != nil { // the next response is Metadata's
			t.Fatal(err)
		}
	})
}

func TestKafkaOverloadThrottles(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("busy", 1, nil)
	e.Produce(e.Log("busy", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(5, ts0, "busy"))
	m := fetchcache.NewServeMetrics(nil)
	addr := startKafka(t, fetchkit.OverloadedCatalog{Catalog: e.Cat}, KafkaOptions{Metrics: m})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	ctx := context.Background()

	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "busy"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if resp.ThrottleMillis < 1500 || p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 5 {
		t.Fatalf("overloaded fetch: throttle %d, partition %+v", resp.ThrottleMillis, p)
	}

	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "busy"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = ts0
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if lresp.ThrottleMillis < 700 || lresp.Topics[0].Partitions[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("overloaded list offsets: %+v", lresp)
	}
	// The server counts a request after writing its response, so the client
	// can see the answer a moment before the counter moves.
	deadline := time.Now().Add(5 * time.Second)
	got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeThrottled))
	for got < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		got = fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, fetchcache.CodeThrottled))
	}
	if got != 2 {
		t.Fatalf("throttled kafka requests %v, want 2", got)
	}
}

func TestKafkaFetchErrors(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("f", 1, nil)
	e.Produce(e.Log("f", 0), fetchkit.ProduceOpts{}, fetchkit.GenRecs(12, ts0, "f"))
	m := fetchcache.NewServeMetrics(nil)
	addr := startKafka(t, e.Cat, KafkaOptions{Metrics: m})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr))
	fetch := func(topic string, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch = 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch("f", 13); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 12 || p.RecordBatches == nil {
		t.Fatalf("past the end: %+v", p)
	}
	if p := fetch("nope", 0); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
	if p := fetch("f", 12); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 12 {
		t.Fatalf("at the end: %+v", p)
	}
	for code, want := range map[string]float64{fetchcache.CodeOffsetOutOfRange: 1, fetchcache.CodeUnknownTopicOrPartition: 1} {
		if got := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceKafka, code)); got != want {
			t.Errorf("kafka requests{%s} = %v, want %v", code, got, want)
		}
	}
}

func startKafka(t testing.TB, cat fetchcache.Catalog, o KafkaOptions) string {
	t.Helper()
	o.Catalog = cat
	if o.MaxFetchWait == 0 {
		o.MaxFetchWait = 200e6 // keep waits at the log end short in tests
	}
	if o.FetchPollInterval == 0 {
		o.FetchPollInterval = 5e6
	}
	s, err := NewKafkaServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kafka server: %v", err)
		}
	})
	return ln.Addr().String()
}
