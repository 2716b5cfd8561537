package groups

import (
	"context"
	"errors"
	"slices"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Commit answers an OffsetCommit: the offsets are durable in the bucket
// (one conditional PUT) before the response says so. A commit with a
// member id and generation must come from a member of the current
// generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
// REBALANCE_IN_PROGRESS while the generation is being formed); one with
// generation -1 (a consumer with assign()) is accepted
// only while the group has no members, as Kafka does. The member and
// generation are checked when the commit arrives and again as it is
// written, in order with this replica's other writes of the group: a
// commit that waited while the group rebalanced is refused, not written
// after the next generation's commits.
//
// It records with each offset the topic ID its topic is served under now
// (ids; nil: none), and removes from the object the offsets committed against another incarnation of their topic (Lineages:
// a topic deleted, or deleted and re-created, since), as Kafka deletes a
// deleted topic's offsets. A topic ids cannot resolve (the bucket
// unreadable) fails the commit with COORDINATOR_NOT_AVAILABLE, as a group
// object that cannot be read does; a topic ids says is not served (deleted,
// or never known) is refused UNKNOWN_TOPIC_OR_PARTITION, as Kafka refuses a
// commit on a topic it does not know, and so is a partition a served topic
// does not have when ids tell partitions (TopicPartitions).
func (c *Coordinator) Commit(ctx context.Context, q *kmsg.OffsetCommitRequest, ids TopicIDs) *kmsg.OffsetCommitResponse {
	start := time.Now()
	r := kmsg.NewPtrOffsetCommitResponse()
	r.Version = q.Version
	codes := make([][]int16, len(q.Topics))
	for i, t := range q.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	fill := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	defer func() {
		for i, t := range q.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}()
	if code := c.Owner(q.Group); code != 0 {
		fill(code)
		return r
	}
	if !ValidGroupID(q.Group) {
		fill(kerr.InvalidGroupID.Code)
		return r
	}
	g, err := c.loadGroup(ctx, q.Group)
	if err != nil {
		fill(kerr.CoordinatorNotAvailable.Code)
		return r
	}
	code := c.checkCommit(g, q.MemberID, q.InstanceID, q.Generation)
	gen, ptype, members := g.generation, g.protocolType, len(g.members)
	c.mu.Unlock()
	if code != 0 {
		fill(code)
		return r
	}
	now := c.o.Now()
	valid := false
	for i, t := range q.Topics {
		for j, p := range t.Partitions {
			switch {
			case p.Metadata != nil && utf16Len(*p.Metadata) > c.o.MaxMetadataBytes:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case p.Offset < -1:
				// Not an offset a group object holds (Decode refuses it).
				codes[i][j] = kerr.InvalidCommitOffsetSize.Code
			case t.Topic == "" || p.Partition < 0:
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				valid = true
			}
		}
	}
	if !valid {
		return r
	}
	lin := NewLineages(ids)
	topicIDs := make([]string, len(q.Topics))
	for i, t := range q.Topics {
		if !slices.Contains(codes[i], 0) {
			continue
		}
		id, served, err := lin.Current(ctx, t.Topic)
		if err != nil {
			c.log.Warn("offset commit: topic ID not resolved", "group", q.Group, "topic", t.Topic, "err", err)
			fill(kerr.CoordinatorNotAvailable.Code)
			return r
		}
		if !served {
			// As Kafka refuses a commit on a topic it does not know: an
			// offset of a deleted topic written again without its ID
			// would be taken for a later incarnation's.
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = kerr.UnknownTopicOrPartition.Code
				}
			}
			continue
		}
		topicIDs[i] = id
		if parts, ok := ids.(TopicPartitions); ok {
			for j, p := range t.Partitions {
				if codes[i][j] != 0 {
					continue
				}
				has, err := parts.HasPartition(ctx, t.Topic, p.Partition)
				if err != nil {
					c.log.Warn("offset commit: partition not resolved", "group", q.Group, "topic", t.Topic, "partition", p.Partition, "err", err)
					fill(kerr.CoordinatorNotAvailable.Code)
					return r
				}
				if !has {
					// As Kafka refuses a commit on a partition it does
					// not know.
					codes[i][j] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
	}
	if !slices.ContainsFunc(codes, func(cs []int16) bool { return slices.Contains(cs, 0) }) {
		return r
	}
	var moved, fenced int16
	_, err = c.store.Update(ctx, q.Group, func(o *Object) error {
		// Asked again at every attempt: a PUT lost to the replica the
		// group moved to is not applied again on top of its members'
		// commits (an older offset of theirs would roll back).
		if moved = c.Owner(q.Group); moved != 0 {
			return errGroupMoved
		}
		// The member and generation are checked again here, where this
		// replica's writes of the group are serialized (the store holds
		// the group's lock from this check until the PUT is answered): a
		// commit that waited (for topic IDs, behind another write) while
		// the group rebalanced is refused as it would have been had it
		// arrived then, not written after the next generation's commits.
		c.mu.Lock()
		if g.released {
			moved = kerr.NotCoordinator.Code // moved away, perhaps back
		} else {
			cur := g
			if l := c.lookup(q.Group); l != nil {
				cur = l // g was forgotten (it held nothing, or was deleted), then loaded again
			}
			fenced = c.checkCommit(cur, q.MemberID, q.InstanceID, q.Generation)
			gen, ptype, members = cur.generation, cur.protocolType, len(cur.members)
		}
		c.mu.Unlock()
		switch {
		case moved != 0:
			return errGroupMoved
		case fenced != 0:
			return errCommitFenced
		}
		if removed, err := lin.DropStale(ctx, o); err != nil {
			c.log.Debug("stale offsets not checked", "group", q.Group, "err", err) // removed at a later write
		} else if len(removed) > 0 {
			c.log.Info("offsets of deleted topic incarnations removed", "group", q.Group, "offsets", len(removed), "first_topic", removed[0].Topic)
		}
		if ptype != "" {
			o.ProtocolType = ptype
		}
		o.Generation = max(o.Generation, gen)
		if members > 0 {
			o.State, o.EmptySinceMS = StateStable, 0
		} else {
			o.State = StateEmpty
			if o.EmptySinceMS == 0 {
				o.EmptySinceMS = now.UnixMilli()
			}
		}
		if o.ProtocolType == "" {
			c.dropExpired(o, now) // commits-only groups expire offset by offset
		}
		for i, t := range q.Topics {
			for j, p := range t.Partitions {
				if codes[i][j] != 0 {
					continue
				}
				md := ""
				if p.Metadata != nil {
					md = *p.Metadata
				}
				epoch := p.LeaderEpoch
				if q.Version < 6 {
					epoch = -1
				}
				o.set(Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: md, CommitMS: now.UnixMilli(), TopicID: topicIDs[i]})
			}
		}
		return nil
	})
	switch {
	case err == nil:
		c.mu.Lock()
		if g := c.lookup(q.Group); g != nil {
			g.hasObject = true
		}
		c.mu.Unlock()
		c.m.commit.Observe(time.Since(start).Seconds())
	case errors.Is(err, errGroupMoved):
		c.log.Info("offset commit not written: the group moved to another coordinator", "group", q.Group)
		fill(moved)
	case errors.Is(err, errCommitFenced):
		c.log.Info("offset commit not written: the group's generation or members changed while it waited", "group", q.Group, "member", q.MemberID, "generation", q.Generation, "err", kerr.ErrorForCode(fenced))
		fill(fenced)
	case errors.Is(err, ErrConflict):
		c.log.Warn("offset commit lost to another coordinator", "group", q.Group, "err", err)
		fill(kerr.NotCoordinator.Code)
	default:
		c.log.Warn("offset commit not written", "group", q.Group, "err", err)
		fill(kerr.CoordinatorNotAvailable.Code)
	}
	return r
}

// errCommitFenced: a commit's member or generation, valid when it
// arrived, was no longer when its write came (checkCommit's code).
var errCommitFenced = errors.New("offset commit fenced while it waited to be written")

// utf16Len is s's length as Kafka's String.length() measures commit
// metadata against offset.metadata.max.bytes: UTF-16 code units (a
// character outside the BMP counts 2; an invalid byte, decoded as U+FFFD,
// 1).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// checkCommit validates a commit's member and generation against g, with
// c.mu held (Kafka's ClassicGroup.validateOffsetCommit). A valid commit of
// a member counts as its heartbeat.
func (c *Coordinator) checkCommit(g *group, memberID string, instance *string, generation int32) int16 {
	if g.state == StateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && len(g.members) == 0 {
		// Offsets only, whatever member or instance id the commit names
		// (librdkafka sends its group.instance.id with an assign()
		// consumer's commits), as Kafka accepts it.
		return 0
	}
	if generation < 0 && memberID == "" && instance == nil {
		return kerr.UnknownMemberID.Code // no membership while the group has members
	}
	m, code := checkMember(g, memberID, instance, generation)
	if code != 0 {
		return code
	}
	if g.state == StateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	m.lastHeard = c.o.Now()
	return 0
}

// dropExpired removes the offsets of a commits-only group committed more
// than the retention ago.
func (c *Coordinator) dropExpired(o *Object, now time.Time) bool {
	cut := now.Add(-c.o.OffsetsRetention).UnixMilli()
	n := len(o.Offsets)
	kept := o.Offsets[:0]
	for _, off := range o.Offsets {
		if off.CommitMS > cut {
			kept = append(kept, off)
		}
	}
	o.Offsets = kept
	return len(kept) != n
}

// Committed is group's committed offsets for OffsetFetch. A group with
// members answers from the cached object (its coordinator wrote every
// version); a group without re-reads the bucket, where a takeover or
// `tiered groups reset-offsets` may have changed it. nil: none.
func (c *Coordinator) Committed(ctx context.Context, group string) (*Object, int16) {
	if code := c.Owner(group); code != 0 {
		return nil, code
	}
	c.mu.Lock()
	g := c.lookup(group)
	active := g != nil && len(g.members) > 0
	c.mu.Unlock()
	var (
		o   *Object
		err error
	)
	if active {
		o, err = c.store.Load(ctx, group)
	} else {
		o, err = c.store.Reload(ctx, group)
	}
	if err != nil {
		c.log.Warn("committed offsets unreadable", "group", group, "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return o, 0
}
