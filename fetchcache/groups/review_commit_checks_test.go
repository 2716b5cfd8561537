package groups

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

// fakeParts is fakeIDs whose topics have the partitions parts gives them
// (TopicPartitions).
type fakeParts struct {
	fakeIDs
	parts map[string]int32 // partition count
	err   error
}

func (f *fakeParts) HasPartition(_ context.Context, topic string, partition int32) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	return partition < f.parts[topic], nil
}

// TestReviewCommitUnknownPartition: an OffsetCommit on a partition its
// topic does not have is refused UNKNOWN_TOPIC_OR_PARTITION for that
// partition, and nothing is stored for it, as Kafka answers; the request's
// other partitions are committed. A partition that cannot be resolved
// fails the commit retriably, writing nothing.
func TestReviewCommitUnknownPartition(t *testing.T) {
	ctx := context.Background()
	ids := &fakeParts{fakeIDs: fakeIDs{ids: map[string]string{"t": idOld, "u": ""}}, parts: map[string]int32{"t": 2, "u": 1}}
	for _, tc := range []struct {
		name  string
		parts map[string][]int32
		err   error
		want  map[string][]int16 // per topic, per partition
	}{
		{"beyond the count", map[string][]int32{"t": {0, 1, 2, 7}}, nil, map[string][]int16{"t": {0, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}}},
		{"topic without ids", map[string][]int32{"u": {0, 1}}, nil, map[string][]int16{"u": {0, kerr.UnknownTopicOrPartition.Code}}},
		{"every partition unknown", map[string][]int32{"t": {5}}, nil, map[string][]int16{"t": {kerr.UnknownTopicOrPartition.Code}}},
		{"partitions unresolved", map[string][]int32{"t": {0}}, errors.New("bucket down"), map[string][]int16{"t": {kerr.CoordinatorNotAvailable.Code}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objstore.NewMemory(), nil)
			ids.err = tc.err
			q := kmsg.NewPtrOffsetCommitRequest()
			q.Version, q.Group, q.Generation = 9, "g", -1
			for _, tp := range []string{"t", "u"} {
				if ps, ok := tc.parts[tp]; ok {
					rt := kmsg.OffsetCommitRequestTopic{Topic: tp}
					for _, p := range ps {
						rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 42, LeaderEpoch: -1})
					}
					q.Topics = append(q.Topics, rt)
				}
			}
			r := h.c.Commit(ctx, q, ids)
			o, err := h.store.Reload(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if o == nil {
				o = &Object{} // nothing written
			}
			stored := 0
			for _, rt := range r.Topics {
				for j, rp := range rt.Partitions {
					want := tc.want[rt.Topic][j]
					wantCode(t, fmt.Sprintf("commit on %s-%d", rt.Topic, rp.Partition), rp.ErrorCode, want)
					_, ok := o.Lookup(rt.Topic, rp.Partition)
					if ok != (want == 0) {
						t.Fatalf("%s-%d (code %s) stored %v", rt.Topic, rp.Partition, codeName(want), ok)
					}
					if ok {
						stored++
					}
				}
			}
			if len(o.Offsets) != stored {
				t.Fatalf("offsets stored: %+v", o.Offsets)
			}
		})
	}
}
