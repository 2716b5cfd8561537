package groupadmin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/groups"
)

// CoordinatorLive is the LiveSource of a running coordinator: DescribeGroups' view of a
// group (members with their consumer-protocol assignment while Stable).
type CoordinatorLive struct{ C *groups.Coordinator }

// LiveGroup implements LiveSource. A group the coordinator does not hold (Dead, or not
// coordinated here) is not live.
func (l CoordinatorLive) LiveGroup(ctx context.Context, group string) (Live, bool) {
	d, gen := l.C.DescribeGeneration(ctx, group)
	if d.ErrorCode != 0 || d.State == groups.StateDead {
		return Live{}, false
	}
	live := Live{State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol, Generation: gen, Members: []Member{}}
	for _, m := range d.Members {
		mem := Member{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assignment: []TopicPartitions{}}
		if m.InstanceID != nil {
			mem.InstanceID = *m.InstanceID
		}
		if d.ProtocolType == groups.ProtocolTypeConsumer && len(m.MemberAssignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.MemberAssignment); err == nil {
				for _, t := range a.Topics {
					mem.Assignment = append(mem.Assignment, TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
		}
		live.Members = append(live.Members, mem)
	}
	return live, true
}

// Names lists the groups the coordinator holds in memory or finds in the bucket.
func (l CoordinatorLive) Names(ctx context.Context) []string {
	gs, err := l.C.List(ctx)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.Group)
	}
	return out
}

// DeleteGroup deletes the group through the coordinator (Kafka's DeleteGroups: its
// in-memory state and its object), refused while it has members.
func (l CoordinatorLive) DeleteGroup(ctx context.Context, group string) error {
	switch code := l.C.Delete(ctx, group); code {
	case 0:
		return nil
	case kerr.NonEmptyGroup.Code:
		return fmt.Errorf("%w: %q", ErrNotEmpty, group)
	case kerr.GroupIDNotFound.Code:
		return fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	case kerr.CoordinatorNotAvailable.Code:
		return fmt.Errorf("delete group %q: %w", group, groups.ErrUnavailable)
	default:
		return fmt.Errorf("delete group %q: %w", group, kerr.ErrorForCode(code))
	}
}

// DeleteOffsets deletes group's committed offsets of topic's partitions through the
// coordinator: the OffsetDelete of the Kafka listener, which refuses a topic a member of
// the group subscribes to (ErrSubscribedToTopic). It implements OffsetDeleter.
func (l CoordinatorLive) DeleteOffsets(ctx context.Context, group, topic string, partitions []int32) error {
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = topic
	for _, p := range partitions {
		t.Partitions = append(t.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
	}
	code, perTopic := l.C.DeleteOffsets(ctx, group, []kmsg.OffsetDeleteRequestTopic{t})
	if code == 0 {
		code = perTopic[topic]
	}
	switch code {
	case 0:
		return nil
	case kerr.GroupSubscribedToTopic.Code:
		return fmt.Errorf("%w: %q has members subscribed to %q", ErrSubscribedToTopic, group, topic)
	case kerr.GroupIDNotFound.Code:
		return fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	case kerr.CoordinatorNotAvailable.Code:
		return fmt.Errorf("delete offsets of %q in %q: %w", topic, group, groups.ErrUnavailable)
	default:
		return fmt.Errorf("delete offsets of %q in %q: %w", topic, group, kerr.ErrorForCode(code))
	}
}
