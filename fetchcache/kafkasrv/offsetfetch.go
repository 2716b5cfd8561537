package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groups"
)

const offsetFetchKey int16 = 9

// offsetFetchAPI serves OffsetFetch v1-9 (Kafka 4.0 removed v0, KIP-896;
// v8+ several groups in one request, KIP-709; v10 names topics by id). A
// topic's offsets need describe on it (Kafka's DESCRIBE), besides the group.
var offsetFetchAPI = api{key: offsetFetchKey, min: 1, max: 9, group: true, perm: auth.PermDescribe, handle: handler((*KafkaServer).offsetFetch)}

// fetchedTopic is one topic's answer, whichever version's type carries it.
type fetchedTopic struct {
	topic string
	parts []kmsg.OffsetFetchResponseGroupTopicPartition
}

// offsetFetch reads committed offsets from the coordinator's cached group
// object (never touching the read path of Fetch).
func (s *KafkaServer) offsetFetch(ctx context.Context, kc *kafkaConn, q *kmsg.OffsetFetchRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrOffsetFetchResponse()
	r.Version = q.Version
	worst := int16(0)
	note := func(c int16) {
		if worst == 0 {
			worst = c
		}
	}
	if q.Version >= 8 {
		refuse := func() (kmsg.Response, string, time.Duration) {
			r.Groups = r.Groups[:0]
			for _, g := range q.Groups {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, kerr.InvalidRequest.Code
				r.Groups = append(r.Groups, rg)
			}
			return r, fetchcache.CodeInvalidRequest, 0
		}
		if s.tooManyGroupEntries(kc, "offset fetch", len(q.Groups)) {
			return refuse()
		}
		size := 0 // of the answer so far (fetchedBytes)
		// A group named again (with other topics, say) is read once; past
		// maxRequestGroups groups read, the others wait for another
		// request.
		type committed struct {
			obj  *groups.Object
			code int16
		}
		memo := map[string]committed{}
		current := s.currentCommitted()
		load := func(ctx context.Context, group string) (*groups.Object, int16) {
			c, ok := memo[group]
			switch {
			case ok:
			case len(memo) >= maxRequestGroups:
				c.code = kerr.CoordinatorLoadInProgress.Code
			default:
				c.obj, c.code = current(ctx, group)
				memo[group] = c
			}
			return c.obj, c.code
		}
		for _, g := range q.Groups {
			var req []kmsg.OffsetFetchRequestTopic
			if g.Topics != nil {
				req = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range g.Topics {
					req = append(req, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			code, topics := s.fetchGroupOffsets(ctx, kc, g.Group, req, load)
			if size += fetchedBytes(g.Group, topics); size > maxGroupAnswerBytes {
				s.refuseGroups(kc, "offset fetch", "answer too large", "groups", len(q.Groups), "max_bytes", maxGroupAnswerBytes)
				return refuse()
			}
			note(code)
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			for _, t := range topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.Partitions = t.topic, t.parts
				for _, p := range t.parts {
					note(p.ErrorCode)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			r.Groups = append(r.Groups, rg)
		}
		return r, groupCode(worst), 0
	}
	code, topics := s.fetchGroupOffsets(ctx, kc, q.Group, q.Topics, s.currentCommitted())
	note(code)
	if code != 0 && q.Version < 2 {
		// v1 has no top-level error: every partition asked carries it.
		topics = nil
		for _, t := range q.Topics {
			ft := fetchedTopic{topic: t.Topic}
			for _, p := range t.Partitions {
				ft.parts = append(ft.parts, noOffset(p, code))
			}
			topics = append(topics, ft)
		}
	}
	if q.Version >= 2 {
		r.ErrorCode = code
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.parts {
			note(p.ErrorCode)
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, groupCode(worst), 0
}

// topicIDs resolves, for one request, the topic IDs the catalog serves
// topics under.
func (s *KafkaServer) topicIDs() groups.TopicIDs {
	return fetchcache.NewCatalogTopicIDs(s.o.Catalog)
}

// currentCommitted reads a group's committed offsets (the coordinator's
// Committed) without those committed against another incarnation of their
// topic than the one served now (groups.Lineages.Stale: the topic was
// deleted, or deleted and re-created, since): Kafka deletes a deleted
// topic's offsets, so its consumers start by their auto.offset.reset. The
// topics are resolved once for the whole request; when they cannot be (the
// bucket unreadable) the group answers COORDINATOR_NOT_AVAILABLE rather
// than serve an offset that may be stale.
func (s *KafkaServer) currentCommitted() func(context.Context, string) (*groups.Object, int16) {
	lin := groups.NewLineages(s.topicIDs())
	return func(ctx context.Context, group string) (*groups.Object, int16) {
		obj, code := s.coordinator().Committed(ctx, group)
		if code != 0 || obj == nil {
			return obj, code
		}
		if _, err := lin.DropStale(ctx, obj); err != nil {
			s.log.Warn("offset fetch: topic IDs not resolved", "group", group, "err", err)
			return nil, kerr.CoordinatorNotAvailable.Code
		}
		return obj, 0
	}
}

func noOffset(partition int32, code int16) kmsg.OffsetFetchResponseGroupTopicPartition {
	empty := ""
	return kmsg.OffsetFetchResponseGroupTopicPartition{Partition: partition, Offset: -1, LeaderEpoch: -1, Metadata: &empty, ErrorCode: code}
}

// fetchGroupOffsets is one group's answer, its object read by committed: a
// group-level error code, or the committed offsets of the topics asked
// (nil: every topic committed that the principal may describe; others are
// left out, as Kafka does).
func (s *KafkaServer) fetchGroupOffsets(ctx context.Context, kc *kafkaConn, group string, topics []kmsg.OffsetFetchRequestTopic,
	committed func(context.Context, string) (*groups.Object, int16)) (int16, []fetchedTopic) {
	if !s.groupAllowed(kc, group) {
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	obj, code := committed(ctx, group) // the coordinator's: checks ownership first
	if code != 0 {
		return code, nil
	}
	if obj == nil {
		obj = &groups.Object{}
	}
	var out []fetchedTopic
	if topics == nil {
		skip := ""
		for _, off := range obj.Offsets {
			if off.Topic == skip {
				continue
			}
			if len(out) == 0 || out[len(out)-1].topic != off.Topic {
				if !s.allowed(ctx, kc, off.Topic) {
					skip = off.Topic
					continue
				}
				out = append(out, fetchedTopic{topic: off.Topic})
			}
			md := off.Metadata
			out[len(out)-1].parts = append(out[len(out)-1].parts, kmsg.OffsetFetchResponseGroupTopicPartition{
				Partition: off.Partition, Offset: off.Offset, LeaderEpoch: off.LeaderEpoch, Metadata: &md})
		}
		return 0, out
	}
	for _, t := range topics {
		ft := fetchedTopic{topic: t.Topic}
		allowed := s.allowed(ctx, kc, t.Topic)
		for _, p := range t.Partitions {
			if !allowed {
				ft.parts = append(ft.parts, noOffset(p, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			off, ok := obj.Lookup(t.Topic, p)
			if !ok {
				ft.parts = append(ft.parts, noOffset(p, 0))
				continue
			}
			md := off.Metadata
			ft.parts = append(ft.parts, kmsg.OffsetFetchResponseGroupTopicPartition{
				Partition: p, Offset: off.Offset, LeaderEpoch: off.LeaderEpoch, Metadata: &md})
		}
		out = append(out, ft)
	}
	return 0, out
}
