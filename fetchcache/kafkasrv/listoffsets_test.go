package kafkasrv

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

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
