package kafkasrv

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

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
	// A fetch fleet's other live replicas are brokers too (kafkajs connects to the group
	// coordinator FindCoordinator names only through Metadata's list); this one is not
	// listed twice, and partitions stay led by it.
	t.Run("fleet peers", func(t *testing.T) {
		peers := []Broker{{NodeID: 3, Host: "kafka.example", Port: 19092}, {NodeID: 77, Host: "10.0.0.7", Port: 9093}}
		addr := startKafka(t, e.Cat, KafkaOptions{AdvertisedAddr: "kafka.example:19092", NodeID: 3, Peers: func() []Broker { return peers }})
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Brokers) != 2 || resp.Brokers[0].NodeID != 3 || resp.Brokers[1].NodeID != 77 || resp.Brokers[1].Host != "10.0.0.7" || resp.Brokers[1].Port != 9093 {
			t.Fatalf("brokers %+v", resp.Brokers)
		}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.Leader != 3 {
					t.Fatalf("partition %d led by %d", p.Partition, p.Leader)
				}
			}
		}
	})
}
