package kafkasrv

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestReviewListOffsetsEarliestLocalWithoutBucket: ListOffsets -4
// (EARLIEST_LOCAL_TIMESTAMP, v8+) of a combined partition (serve) needs
// only the local log start, which Kafka answers from memory: with the
// bucket failing it is still answered, not an error.
func TestReviewListOffsetsEarliestLocalWithoutBucket(t *testing.T) {
	e := fetchkit.NewEnv(t)
	l, mem := fetchkit.OffloadedTopic(t, e, "cold", 9)
	localStart := l.LogStartOffset()
	b := objstore.WithFaults(mem, objstore.FailMatching(func(objstore.Call) bool { return true }, errors.New("store down")))
	remote, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startKafka(t, fetchcache.NewCombinedCatalog(e.Dir, remote), KafkaOptions{})
	rc := fetchkit.DialRaw(t, addr)
	for _, v := range []int16{8, 9} {
		q := kmsg.NewPtrListOffsetsRequest()
		q.Version, q.ReplicaID = v, -1
		qt := kmsg.NewListOffsetsRequestTopic()
		qt.Topic = "cold"
		qp := kmsg.NewListOffsetsRequestTopicPartition()
		qp.Timestamp = -4
		qt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{qp}
		q.Topics = []kmsg.ListOffsetsRequestTopic{qt}
		resp := kmsg.NewPtrListOffsetsResponse()
		if err := rc.Request(7, q, resp); err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != localStart {
			t.Errorf("v%d earliest local with the bucket failing: error %d offset %d, want the local start %d", v, p.ErrorCode, p.Offset, localStart)
		}
	}
}
