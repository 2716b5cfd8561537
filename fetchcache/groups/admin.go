package groups

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe is DescribeGroups' entry for group: members with their
// metadata and assignment while Stable (Kafka shows them only then), the
// state alone otherwise; a group this coordinator does not know is Dead.
func (c *Coordinator) Describe(ctx context.Context, group string) kmsg.DescribeGroupsResponseGroup {
	d, _ := c.DescribeGeneration(ctx, group)
	return d
}

// DescribeGeneration is Describe with the group's generation (which
// DescribeGroups does not carry), read with the rest: the current one in
// memory, else the last one its object records.
func (c *Coordinator) DescribeGeneration(ctx context.Context, group string) (d kmsg.DescribeGroupsResponseGroup, generation int32) {
	d = kmsg.NewDescribeGroupsResponseGroup()
	d.Group = group
	if d.ErrorCode = c.Owner(group); d.ErrorCode != 0 {
		return d, 0
	}
	c.mu.Lock()
	g := c.lookup(group)
	if g != nil {
		d.State, d.ProtocolType, generation = g.state, g.protocolType, g.generation
		if g.state == StateStable {
			d.Protocol = g.protocol
		}
		for _, id := range g.order {
			m := g.members[id]
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.client.ID, m.client.Host
			if m.static {
				inst := m.instanceID
				dm.InstanceID = &inst
			}
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if g.state == StateStable {
				for _, p := range m.protocols {
					if p.Name == g.protocol {
						dm.ProtocolMetadata = p.Metadata
					}
				}
				if m.assignment != nil {
					dm.MemberAssignment = m.assignment
				}
			}
			d.Members = append(d.Members, dm)
		}
	}
	c.mu.Unlock()
	if g != nil {
		return d, generation
	}
	o, err := c.store.Reload(ctx, group)
	switch {
	case err != nil:
		d.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case o == nil:
		d.State = StateDead
	default:
		d.State, d.ProtocolType, generation = StateEmpty, o.ProtocolType, o.Generation
	}
	return d, generation
}

// Listed groups: every group of this coordinator in memory or in the
// bucket (an object not Dead), with its state and protocol type.
func (c *Coordinator) List(ctx context.Context) ([]kmsg.ListGroupsResponseGroup, error) {
	c.mu.Lock()
	seen := map[string]bool{}
	var out []kmsg.ListGroupsResponseGroup
	for id, g := range c.groups {
		if g.state == StateEmpty && !g.hasObject && len(g.members) == 0 {
			continue
		}
		if _, self, err := c.o.Ring.Coordinator(id); err != nil || !self {
			continue
		}
		seen[id] = true
		out = append(out, listed(id, g.protocolType, g.state))
	}
	c.mu.Unlock()
	err := c.store.List(ctx, func(l Listed) error {
		if seen[l.Group] {
			return nil
		}
		if _, self, err := c.o.Ring.Coordinator(l.Group); err != nil || !self {
			return nil
		}
		o, err := c.store.Load(ctx, l.Group)
		if err != nil {
			return err
		}
		if o != nil {
			out = append(out, listed(l.Group, o.ProtocolType, StateEmpty))
		}
		return nil
	})
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return out, err
}

func listed(id, ptype, state string) kmsg.ListGroupsResponseGroup {
	l := kmsg.NewListGroupsResponseGroup()
	l.Group, l.ProtocolType, l.GroupState, l.GroupType = id, ptype, state, "classic"
	return l
}

// Delete deletes an empty group and its committed offsets (the object is
// written Dead): NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND
// when it has no offsets and no members.
func (c *Coordinator) Delete(ctx context.Context, group string) int16 {
	if code := c.Owner(group); code != 0 {
		return code
	}
	c.mu.Lock()
	if g := c.lookup(group); g != nil && len(g.members) > 0 {
		c.mu.Unlock()
		return kerr.NonEmptyGroup.Code
	}
	c.mu.Unlock()
	o, err := c.store.Reload(ctx, group)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	if o == nil {
		c.mu.Lock()
		delete(c.groups, group)
		c.updateGauges()
		c.mu.Unlock()
		return kerr.GroupIDNotFound.Code
	}
	_, err = c.store.Update(ctx, group, func(o *Object) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g := c.lookup(group); g != nil && len(g.members) > 0 {
			return errNonEmpty
		}
		o.State, o.Offsets, o.EmptySinceMS = StateDead, []Offset{}, 0
		return nil
	})
	switch {
	case errors.Is(err, errNonEmpty):
		return kerr.NonEmptyGroup.Code
	case err != nil:
		c.log.Warn("group delete not written", "group", group, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	c.mu.Lock()
	if g := c.lookup(group); g != nil && len(g.members) == 0 {
		delete(c.groups, group)
		c.updateGauges()
	}
	c.mu.Unlock()
	c.log.Info("group deleted", "group", group)
	return 0
}

var errNonEmpty = errors.New("group has members")

// DeleteOffsets answers OffsetDelete: the group-level code, and per topic
// and partition the code (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member
// of a consumer group subscribes to).
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, topics []kmsg.OffsetDeleteRequestTopic) (int16, map[string]int16) {
	if code := c.Owner(group); code != 0 {
		return code, nil
	}
	subscribed := map[string]bool{}
	c.mu.Lock()
	if g := c.lookup(group); g != nil {
		for _, m := range g.members {
			if g.protocolType != ProtocolTypeConsumer {
				continue
			}
			for _, p := range m.protocols {
				if p.Name != g.protocol && g.protocol != "" {
					continue
				}
				var meta kmsg.ConsumerMemberMetadata
				if meta.ReadFrom(p.Metadata) == nil {
					for _, t := range meta.Topics {
						subscribed[t] = true
					}
				}
			}
		}
	}
	c.mu.Unlock()
	o, err := c.store.Reload(ctx, group)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	if o == nil {
		return kerr.GroupIDNotFound.Code, nil
	}
	perTopic := map[string]int16{}
	del := map[string]map[int32]bool{}
	for _, t := range topics {
		if subscribed[t.Topic] {
			perTopic[t.Topic] = kerr.GroupSubscribedToTopic.Code
			continue
		}
		if del[t.Topic] == nil {
			del[t.Topic] = map[int32]bool{}
		}
		for _, p := range t.Partitions {
			del[t.Topic][p.Partition] = true
		}
	}
	_, err = c.store.DeleteOffsets(ctx, group, func(off Offset) bool { return del[off.Topic][off.Partition] }, nil)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	return 0, perTopic
}

// ExpireOffsets is one pass of Kafka's offset expiry over the groups this
// replica coordinates: a group with a protocol type that has been empty
// for the retention loses all its offsets (the object is written Dead); a
// commits-only group loses each offset the retention after its commit.
// Only objects not modified for a whole retention are read.
func (c *Coordinator) ExpireOffsets(ctx context.Context) error {
	now := c.o.Now()
	var old []string
	err := c.store.List(ctx, func(l Listed) error {
		if now.Sub(l.LastModified) >= c.o.OffsetsRetention {
			old = append(old, l.Group)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range old {
		if c.Owner(id) != 0 {
			continue
		}
		c.mu.Lock()
		g := c.lookup(id)
		active := g != nil && len(g.members) > 0
		c.mu.Unlock()
		if active {
			continue
		}
		o, err := c.store.Reload(ctx, id)
		if err != nil || o == nil || !c.expired(o, now) {
			errs = append(errs, err)
			continue
		}
		_, err = c.store.Update(ctx, id, func(o *Object) error {
			c.mu.Lock()
			g := c.lookup(id)
			active := g != nil && len(g.members) > 0
			c.mu.Unlock()
			if active || !c.expired(o, now) {
				return errNoChange
			}
			if o.ProtocolType == "" {
				c.dropExpired(o, now)
				if len(o.Offsets) > 0 {
					return nil
				}
			}
			o.State, o.Offsets = StateDead, []Offset{}
			return nil
		})
		if errors.Is(err, errNoChange) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.log.Info("group offsets expired", "group", id, "retention", c.o.OffsetsRetention)
		c.mu.Lock()
		if g := c.lookup(id); g != nil && len(g.members) == 0 {
			delete(c.groups, id)
			c.updateGauges()
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// expired reports whether o, of a group with no members here, has offsets
// that expiry removes at now. An object still Stable was written while the
// group had members, and none came back since (a coordinator restarted, or
// its Empty state was not written): it counts as empty since it was written.
func (c *Coordinator) expired(o *Object, now time.Time) bool {
	if o.ProtocolType != "" {
		since := o.EmptySinceMS
		if o.State == StateStable {
			since = o.UpdatedMS
		}
		return since > 0 && now.Sub(time.UnixMilli(since)) >= c.o.OffsetsRetention
	}
	cut := now.Add(-c.o.OffsetsRetention).UnixMilli()
	return slices.ContainsFunc(o.Offsets, func(off Offset) bool { return off.CommitMS <= cut })
}
