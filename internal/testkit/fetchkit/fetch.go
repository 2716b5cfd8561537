package fetchkit

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ByNameClient is a client of the Kafka listener at addr whose Fetch is at
// most v12, which names topics (FetchOne names no topic ID).
func ByNameClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	return MustClient(t, append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MaxVersions(v)}, opts...)...)
}

// FetchOne sends one Fetch for topic-partition at offset (1 MiB at most, a
// short wait) and returns the partition's answer.
func FetchOne(t testing.TB, cl *kgo.Client, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	return FetchWith(t, cl, topic, partition, offset, 0, 1<<20, 1<<20)
}

// FetchWith is FetchOne with an isolation level (1: READ_COMMITTED) and the
// request's and the partition's max bytes.
func FetchWith(t testing.TB, cl *kgo.Client, topic string, partition int32, offset int64, isolation int8, maxBytes, partMax int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.ReplicaID, req.SessionEpoch, req.IsolationLevel = 10, maxBytes, -1, -1, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = partition, offset, partMax, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}
