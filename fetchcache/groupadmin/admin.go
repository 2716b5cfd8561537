// Package groupadmin owns what `tiered groups` does — list, describe, reset-offsets,
// delete — over the group objects of a bucket (fetchcache/groups.Store) and the partitions of
// a catalog (log start, end, offset for a time). The fetch service's /v1/groups routes run it
// with the coordinator's live membership; `tiered groups --bucket` runs it on the bucket
// alone, where the membership known is the state the coordinator last wrote.
//
// --topic narrows each command to one topic: list keeps the groups with a committed offset on
// it or a live member assigned one of its partitions, describe shows only its partitions,
// delete removes only its committed offsets (DeleteOffsets: Kafka's OffsetDelete, refused
// while a member of the group subscribes to the topic).
//
// An offset committed against another incarnation of its topic than the one the catalog serves
// (the topic deleted, or deleted and re-created, since: docs/format/groups.md) is no committed
// offset to list, describe or reset from; a reset records the current topic ID and drops such
// offsets from the object.
//
// Resets follow kafka-consumer-groups: a dry run unless executed, refused while the group has
// members, --to-datetime by ListOffsets' rule (the first offset whose timestamp is >= T; the
// log end when every record is older), every target clamped into [log start, log end].
package groupadmin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// Member is one member of a group as the coordinator holds it.
type Member struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"group_instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	// Assignment is the member's partitions in the current generation (decoded from the
	// consumer protocol's assignment; empty when not a consumer group or not yet synced).
	Assignment []TopicPartitions `json:"assignment"`
}

// TopicPartitions is one topic's partitions.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// Live is a group's membership as its coordinator holds it in memory.
type Live struct {
	State        string   `json:"state"`
	ProtocolType string   `json:"protocol_type"`
	Protocol     string   `json:"protocol"`
	Generation   int32    `json:"generation"`
	Members      []Member `json:"members"`
}

// LiveSource is the coordinator's membership (the fetch service); nil in bucket mode.
type LiveSource interface {
	// LiveGroup returns group's membership; ok is false when the coordinator holds no
	// state for it (never joined since the replica started, or expired).
	LiveGroup(ctx context.Context, group string) (Live, bool)
}

// Admin runs the group commands. Store and Catalog are required; Live is the
// coordinator's membership when run inside the fetch service.
type Admin struct {
	Store   *groups.Store
	Catalog fetchcache.Catalog
	Live    LiveSource
	Now     func() time.Time // nil: time.Now
}

// Errors the commands answer with (the HTTP API maps them; the CLI prints them).
var (
	// ErrGroupNotFound: no such group (no object, or a Dead one) and no live state.
	ErrGroupNotFound = errors.New("group not found")
	// ErrNotEmpty: the group has members; offsets may be changed only while it has none.
	ErrNotEmpty = errors.New("group has members")
	// ErrInvalidReset: the reset request is malformed (no or several methods, no topic).
	ErrInvalidReset = errors.New("invalid reset-offsets request")
	// ErrSubscribedToTopic: a live member of the group subscribes to the topic whose
	// offsets were to be deleted (Kafka's GROUP_SUBSCRIBED_TO_TOPIC).
	ErrSubscribedToTopic = errors.New("group is subscribed to the topic")
)

// Summary is one group of List.
type Summary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Members      int    `json:"members"`
	// Partitions is how many partitions have a committed offset (of the topic asked,
	// when List is given one).
	Partitions int `json:"partitions"`

	assigned bool // a live member is assigned a partition of the topic List was asked for
}

// List returns every group with an object in the bucket (Dead ones left out) and every
// group the coordinator holds in memory, sorted by name. With a topic ("" = all), only the
// groups with a committed offset on it or a live member assigned one of its partitions;
// Partitions then counts that topic's partitions.
func (a *Admin) List(ctx context.Context, live []string, topic string) ([]Summary, error) {
	if err := checkTopicName(topic); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	byName := map[string]*Summary{}
	lin := a.lineages()
	err := a.Store.List(ctx, func(l groups.Listed) error {
		o, err := a.Store.Load(ctx, l.Group)
		if err != nil {
			return err
		}
		if o == nil {
			return nil
		}
		if _, err := lin.DropStale(ctx, o); err != nil {
			return err
		}
		n := len(o.Offsets)
		if topic != "" {
			n = len(topicPartitions(o, topic))
		}
		byName[l.Group] = &Summary{Group: l.Group, State: o.State, ProtocolType: o.ProtocolType, Partitions: n}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	if a.Live != nil {
		for _, g := range live {
			l, ok := a.Live.LiveGroup(ctx, g)
			if !ok {
				continue
			}
			s := byName[g]
			if s == nil {
				s = &Summary{Group: g}
				byName[g] = s
			}
			s.State, s.Members = l.State, len(l.Members)
			if l.ProtocolType != "" {
				s.ProtocolType = l.ProtocolType
			}
			if topic != "" && assigned(l, topic) {
				s.assigned = true
			}
		}
	}
	out := make([]Summary, 0, len(byName))
	for _, s := range byName {
		if topic != "" && s.Partitions == 0 && !s.assigned {
			continue
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y Summary) int { return strings.Compare(x.Group, y.Group) })
	return out, nil
}

// PartitionOffset is one partition of a group's description or reset plan.
type PartitionOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the committed offset (-1: none).
	Committed int64 `json:"committed"`
	// LogStart and LogEnd are the partition's offsets in the tier (-1 when the partition is
	// not served: an unknown topic or partition).
	LogStart int64 `json:"log_start"`
	LogEnd   int64 `json:"log_end"`
	// Lag is LogEnd - Committed (-1 when either is unknown).
	Lag      int64  `json:"lag"`
	Metadata string `json:"metadata,omitempty"`
	// Member is the member the partition is assigned to ("" when none).
	Member string `json:"member,omitempty"`
	// New is the offset a reset sets (plans only).
	New *int64 `json:"new,omitempty"`
}

// Description is Describe's answer.
type Description struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol,omitempty"`
	Generation   int32             `json:"generation"`
	Members      []Member          `json:"members"`
	Offsets      []PartitionOffset `json:"offsets"`
	// Source says where the membership comes from: "coordinator" (the fetch service's
	// memory) or "bucket" (the state last written; members are not known there).
	Source string `json:"source"`
}

// Describe returns group's members (from the coordinator), committed offsets and lag
// against the tier's end. With a topic ("" = all), Offsets holds only that topic's
// partitions (a group with none of it is described with no offsets); members are all shown.
func (a *Admin) Describe(ctx context.Context, group, topic string) (*Description, error) {
	if err := checkTopicName(topic); err != nil {
		return nil, fmt.Errorf("describe %q: %w", group, err)
	}
	o, err := a.Store.Reload(ctx, group)
	if err != nil {
		return nil, err
	}
	if _, err := a.lineages().DropStale(ctx, o); err != nil {
		return nil, fmt.Errorf("describe %q: %w", group, err)
	}
	var live Live
	haveLive := false
	if a.Live != nil {
		live, haveLive = a.Live.LiveGroup(ctx, group)
	}
	if o == nil && !haveLive {
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	}
	d := &Description{Group: group, Members: []Member{}, Offsets: []PartitionOffset{}, Source: "bucket"}
	if o != nil {
		d.State, d.ProtocolType, d.Generation = o.State, o.ProtocolType, o.Generation
	}
	if haveLive {
		d.Source = "coordinator"
		d.State, d.Protocol, d.Generation, d.Members = live.State, live.Protocol, live.Generation, live.Members
		if live.ProtocolType != "" {
			d.ProtocolType = live.ProtocolType
		}
		if d.Members == nil {
			d.Members = []Member{}
		}
	}
	owner := map[tp]string{}
	for _, m := range d.Members {
		for _, t := range m.Assignment {
			for _, p := range t.Partitions {
				owner[tp{t.Topic, p}] = m.MemberID
			}
		}
	}
	seen := map[tp]bool{}
	if o != nil {
		for _, off := range o.Offsets {
			if topic != "" && off.Topic != topic {
				continue
			}
			k := tp{off.Topic, off.Partition}
			seen[k] = true
			po := PartitionOffset{Topic: off.Topic, Partition: off.Partition, Committed: off.Offset, Metadata: off.Metadata, Member: owner[k]}
			if err := a.fillOffsets(ctx, &po); err != nil {
				return nil, err
			}
			d.Offsets = append(d.Offsets, po)
		}
	}
	for k, m := range owner {
		if seen[k] || (topic != "" && k.topic != topic) {
			continue
		}
		po := PartitionOffset{Topic: k.topic, Partition: k.partition, Committed: -1, Member: m}
		if err := a.fillOffsets(ctx, &po); err != nil {
			return nil, err
		}
		d.Offsets = append(d.Offsets, po)
	}
	sortOffsets(d.Offsets)
	return d, nil
}

type tp struct {
	topic     string
	partition int32
}

// topicPartitions are the partitions of topic with a committed offset in o, sorted.
func topicPartitions(o *groups.Object, topic string) []int32 {
	var ps []int32
	for _, off := range o.Offsets {
		if off.Topic == topic {
			ps = append(ps, off.Partition)
		}
	}
	slices.Sort(ps)
	return ps
}

// assigned reports whether a member of l is assigned a partition of topic.
func assigned(l Live, topic string) bool {
	for _, m := range l.Members {
		for _, t := range m.Assignment {
			if t.Topic == topic && len(t.Partitions) > 0 {
				return true
			}
		}
	}
	return false
}

func sortOffsets(ps []PartitionOffset) {
	slices.SortFunc(ps, func(x, y PartitionOffset) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return int(x.Partition) - int(y.Partition)
	})
}

// fillOffsets sets the partition's log start and end and the lag; a partition the catalog
// does not serve gets -1s.
func (a *Admin) fillOffsets(ctx context.Context, po *PartitionOffset) error {
	po.LogStart, po.LogEnd, po.Lag = -1, -1, -1
	p, err := a.Catalog.Partition(ctx, po.Topic, po.Partition)
	var unknown *fetchcache.UnknownTopicOrPartitionError
	switch {
	case errors.As(err, &unknown):
		return nil
	case err != nil:
		return fmt.Errorf("partition %s-%d: %w", po.Topic, po.Partition, err)
	}
	offs, err := p.Offsets(ctx)
	if err != nil {
		return fmt.Errorf("offsets of %s-%d: %w", po.Topic, po.Partition, err)
	}
	po.LogStart, po.LogEnd = offs.LogStart, offs.LogEnd
	if po.Committed >= 0 {
		po.Lag = max(0, offs.LogEnd-po.Committed)
	}
	return nil
}

// ResetSpec is a reset-offsets request: one topic (all its partitions, or those listed)
// and exactly one method.
type ResetSpec struct {
	Topic string `json:"topic"`
	// Partitions limits the reset to these partitions (empty: every partition of Topic).
	Partitions []int32 `json:"partitions,omitempty"`
	// ToDatetime is --to-datetime: the first offset whose timestamp is >= it.
	ToDatetime *time.Time `json:"to_datetime,omitempty"`
	ToEarliest bool       `json:"to_earliest,omitempty"`
	ToLatest   bool       `json:"to_latest,omitempty"`
	ToOffset   *int64     `json:"to_offset,omitempty"`
	ShiftBy    *int64     `json:"shift_by,omitempty"`
	// Execute writes the plan; without it Reset is a dry run.
	Execute bool `json:"execute,omitempty"`
}

func (s ResetSpec) check() error {
	if s.Topic == "" {
		return fmt.Errorf("%w: a topic is required (--topic)", ErrInvalidReset)
	}
	n := 0
	for _, set := range []bool{s.ToDatetime != nil, s.ToEarliest, s.ToLatest, s.ToOffset != nil, s.ShiftBy != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: give exactly one of --to-datetime, --to-earliest, --to-latest, --to-offset, --shift-by (got %d)", ErrInvalidReset, n)
	}
	return nil
}

// Plan is Reset's answer: every partition with its current and new offset.
type Plan struct {
	Group    string            `json:"group"`
	Executed bool              `json:"executed"`
	Offsets  []PartitionOffset `json:"offsets"`
}

// Reset computes the new offsets of spec.Topic's partitions for group and, with
// spec.Execute, writes them (one conditional PUT of the group object). It refuses a group
// with members: in the fetch service while its coordinator holds members; on a bucket
// alone while the state last written is not Empty (a coordinator had members then).
func (a *Admin) Reset(ctx context.Context, group string, spec ResetSpec) (*Plan, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if err := a.checkEmpty(ctx, group); err != nil {
		return nil, err
	}
	o, err := a.Store.Reload(ctx, group)
	if err != nil {
		return nil, err
	}
	lin := a.lineages()
	if _, err := lin.DropStale(ctx, o); err != nil {
		return nil, fmt.Errorf("reset offsets of %q: %w", group, err)
	}
	committed := map[int32]groups.Offset{}
	if o != nil {
		for _, off := range o.Offsets {
			if off.Topic == spec.Topic {
				committed[off.Partition] = off
			}
		}
	}
	parts, err := a.partitions(ctx, spec)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Group: group, Offsets: []PartitionOffset{}}
	for _, p := range parts {
		po := PartitionOffset{Topic: spec.Topic, Partition: p, Committed: -1}
		if c, ok := committed[p]; ok {
			po.Committed = c.Offset
		}
		if err := a.fillOffsets(ctx, &po); err != nil {
			return nil, err
		}
		if po.LogEnd < 0 {
			return nil, fmt.Errorf("reset %s-%d: %w", spec.Topic, p, &fetchcache.UnknownTopicOrPartitionError{Topic: spec.Topic, Partition: p})
		}
		n, err := a.target(ctx, spec, po)
		if err != nil {
			return nil, err
		}
		po.New = &n
		plan.Offsets = append(plan.Offsets, po)
	}
	if !spec.Execute {
		return plan, nil
	}
	topicID, served, err := lin.Current(ctx, spec.Topic)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reset offsets of %q: %w", group, err)
	case !served: // deleted since its partitions were read
		return nil, fmt.Errorf("reset offsets of %q: %w", group, &fetchcache.UnknownTopicOrPartitionError{Topic: spec.Topic, Partition: -1})
	}
	now := a.now().UnixMilli()
	_, err = a.Store.Update(ctx, group, func(obj *groups.Object) error {
		// Re-checked on the object the write replaces: a member may have joined since.
		if a.Live == nil && obj.State != groups.StateEmpty && obj.State != groups.StateDead && len(obj.Offsets) > 0 {
			return fmt.Errorf("%w: %q is %s in the bucket", ErrNotEmpty, group, obj.State)
		}
		if a.Live != nil {
			if l, ok := a.Live.LiveGroup(ctx, group); ok && len(l.Members) > 0 {
				return fmt.Errorf("%w: %q has %d members (%s); stop its consumers first", ErrNotEmpty, group, len(l.Members), l.State)
			}
		}
		// Offsets of deleted topic incarnations go, as a commit removes them.
		if _, err := lin.DropStale(ctx, obj); err != nil {
			return err
		}
		for _, po := range plan.Offsets {
			obj.Offsets = setOffset(obj.Offsets, groups.Offset{Topic: po.Topic, Partition: po.Partition, Offset: *po.New, LeaderEpoch: -1, CommitMS: now, TopicID: topicID})
		}
		if obj.State == groups.StateDead {
			obj.State = groups.StateEmpty
		}
		if obj.State == groups.StateEmpty && obj.EmptySinceMS == 0 {
			obj.EmptySinceMS = now
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reset offsets of %q: %w", group, err)
	}
	plan.Executed = true
	return plan, nil
}

// setOffset replaces or inserts off in offs, keeping them sorted by topic, partition.
func setOffset(offs []groups.Offset, off groups.Offset) []groups.Offset {
	i, found := slices.BinarySearchFunc(offs, off, func(x, y groups.Offset) int {
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return int(x.Partition) - int(y.Partition)
	})
	if found {
		offs[i] = off
		return offs
	}
	return slices.Insert(offs, i, off)
}

// lineages resolves, for one command, the topic IDs the catalog serves topics under: an
// offset committed against another incarnation of its topic (the topic deleted, or deleted
// and re-created, since) is no committed offset, as Kafka deletes a deleted topic's offsets.
func (a *Admin) lineages() *groups.Lineages {
	return groups.NewLineages(fetchcache.NewCatalogTopicIDs(a.Catalog))
}

func (a *Admin) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// checkEmpty refuses a group with members.
func (a *Admin) checkEmpty(ctx context.Context, group string) error {
	if a.Live != nil {
		if l, ok := a.Live.LiveGroup(ctx, group); ok && len(l.Members) > 0 {
			return fmt.Errorf("%w: %q has %d members (%s); stop its consumers first", ErrNotEmpty, group, len(l.Members), l.State)
		}
		return nil
	}
	o, err := a.Store.Reload(ctx, group)
	if err != nil {
		return err
	}
	if o != nil && o.State != groups.StateEmpty && len(o.Offsets) > 0 {
		return fmt.Errorf("%w: %q is %s in the bucket (its coordinator had members when it last wrote; stop the consumers, or use --fetch for the coordinator's live view)", ErrNotEmpty, group, o.State)
	}
	return nil
}

// partitions are the partitions a reset covers: those listed, or every partition served.
func (a *Admin) partitions(ctx context.Context, spec ResetSpec) ([]int32, error) {
	if len(spec.Partitions) > 0 {
		return slices.Sorted(slices.Values(spec.Partitions)), nil
	}
	topics, err := a.Catalog.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	for _, t := range topics {
		if t.Name == spec.Topic {
			return t.Partitions, nil
		}
	}
	return nil, &fetchcache.UnknownTopicOrPartitionError{Topic: spec.Topic, Partition: -1}
}

// target is the new offset of one partition, clamped into [log start, log end] as
// kafka-consumer-groups clamps it.
func (a *Admin) target(ctx context.Context, spec ResetSpec, po PartitionOffset) (int64, error) {
	var n int64
	switch {
	case spec.ToEarliest:
		n = po.LogStart
	case spec.ToLatest:
		n = po.LogEnd
	case spec.ToOffset != nil:
		n = *spec.ToOffset
	case spec.ShiftBy != nil:
		base := po.Committed
		if base < 0 {
			base = po.LogStart // no commit: Kafka's auto.offset.reset=earliest view
		}
		n = base + *spec.ShiftBy
	case spec.ToDatetime != nil:
		p, err := a.Catalog.Partition(ctx, po.Topic, po.Partition)
		if err != nil {
			return 0, err
		}
		off, _, found, err := p.OffsetForTimestamp(ctx, spec.ToDatetime.UnixMilli())
		if err != nil {
			return 0, fmt.Errorf("offset for %s in %s-%d: %w", spec.ToDatetime.Format(time.RFC3339Nano), po.Topic, po.Partition, err)
		}
		if !found {
			off = po.LogEnd // every record is older: the end, as kafka-consumer-groups does
		}
		n = off
	}
	return min(max(n, po.LogStart), po.LogEnd), nil
}

// Delete removes group's committed offsets (its object is written Dead, as DeleteGroups
// does). Refused while the group has members.
func (a *Admin) Delete(ctx context.Context, group string) error {
	if d, ok := a.Live.(interface {
		DeleteGroup(ctx context.Context, group string) error
	}); ok {
		return d.DeleteGroup(ctx, group) // the coordinator's own DeleteGroups
	}
	if err := a.checkEmpty(ctx, group); err != nil {
		return err
	}
	o, err := a.Store.Reload(ctx, group)
	if err != nil {
		return err
	}
	if o == nil {
		if a.Live != nil {
			if _, ok := a.Live.LiveGroup(ctx, group); ok {
				return nil // known only in memory, with no members and no offsets: nothing stored
			}
		}
		return fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	}
	_, err = a.Store.Update(ctx, group, func(obj *groups.Object) error {
		if a.Live == nil && obj.State != groups.StateEmpty && len(obj.Offsets) > 0 {
			return fmt.Errorf("%w: %q is %s in the bucket", ErrNotEmpty, group, obj.State)
		}
		obj.State, obj.Offsets, obj.EmptySinceMS = groups.StateDead, []groups.Offset{}, 0
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete group %q: %w", group, err)
	}
	return nil
}

// OffsetsDeleted is DeleteOffsets' answer.
type OffsetsDeleted struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Partitions are the partitions whose committed offset was deleted; empty when the
	// group had none for Topic (not an error, as Kafka's OffsetDelete).
	Partitions []int32 `json:"partitions"`
}

// OffsetDeleter is a LiveSource that deletes offsets itself (the coordinator's
// OffsetDelete, which knows its members' subscriptions).
type OffsetDeleter interface {
	DeleteOffsets(ctx context.Context, group, topic string, partitions []int32) error
}

// DeleteOffsets deletes group's committed offsets of topic, keeping the group and its other
// offsets: `kafka-consumer-groups --delete-offsets --topic T`. As Kafka's OffsetDelete it
// is refused with ErrSubscribedToTopic while a live member subscribes to topic (through the
// coordinator; with any other LiveSource, while one is assigned a partition of it), answers
// ErrGroupNotFound for a group that does not exist, and succeeds with no partitions when
// the group has no offset of topic. A topic the catalog does not serve and of which the
// group has no offset is unknown (UNKNOWN_TOPIC_OR_PARTITION, as kafka-consumer-groups
// finds when it describes the topic); offsets of a topic no longer served are deleted.
// On a bucket alone the members' subscriptions are not known: a group whose coordinator
// last wrote it with members (not Empty) is refused with ErrNotEmpty, as a reset is.
func (a *Admin) DeleteOffsets(ctx context.Context, group, topic string) (*OffsetsDeleted, error) {
	if topic == "" {
		return nil, errors.New("delete offsets: a topic is required (--topic)")
	}
	if err := checkTopicName(topic); err != nil {
		return nil, fmt.Errorf("delete offsets of %q: %w", group, err)
	}
	o, err := a.Store.Reload(ctx, group)
	if err != nil {
		return nil, err
	}
	haveLive := false
	if a.Live != nil {
		_, haveLive = a.Live.LiveGroup(ctx, group)
	}
	if o == nil && !haveLive {
		return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	}
	var committed []int32
	if o != nil {
		committed = topicPartitions(o, topic)
	}
	if len(committed) == 0 {
		if err := a.checkTopic(ctx, topic); err != nil {
			return nil, err
		}
	}
	out := &OffsetsDeleted{Group: group, Topic: topic, Partitions: []int32{}}
	if d, ok := a.Live.(OffsetDeleter); ok {
		// Every partition served and every one committed, as kafka-consumer-groups asks for
		// the topic's partitions: one committed since the read above goes too.
		parts, err := a.partitions(ctx, ResetSpec{Topic: topic})
		var ue *fetchcache.UnknownTopicOrPartitionError
		if err != nil && !errors.As(err, &ue) { // a topic no longer served: its committed ones
			return nil, fmt.Errorf("delete offsets of %q in %q: %w", topic, group, err)
		}
		parts = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(parts), committed...))))
		if err := d.DeleteOffsets(ctx, group, topic, parts); err != nil {
			return nil, err
		}
		out.Partitions = append(out.Partitions, committed...)
		return out, nil
	}
	removed, err := a.Store.DeleteOffsets(ctx, group, func(off groups.Offset) bool { return off.Topic == topic }, func(obj *groups.Object) error {
		// Checked on the object the write replaces: a member may have joined since.
		if a.Live == nil && obj.State != groups.StateEmpty && len(obj.Offsets) > 0 {
			return fmt.Errorf("%w: %q is %s in the bucket (its coordinator had members when it last wrote; their subscriptions are not known in the bucket, --fetch knows them)", ErrNotEmpty, group, obj.State)
		}
		if a.Live != nil {
			if l, ok := a.Live.LiveGroup(ctx, group); ok && assigned(l, topic) {
				return fmt.Errorf("%w: %q has members assigned partitions of %q (%s)", ErrSubscribedToTopic, group, topic, l.State)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete offsets of %q in %q: %w", topic, group, err)
	}
	for _, off := range removed {
		out.Partitions = append(out.Partitions, off.Partition)
	}
	return out, nil
}

// checkTopicName refuses a topic name Kafka would not have (INVALID_TOPIC_EXCEPTION), so
// that a narrowing by one is not answered as if the topic merely had no groups; "" (every
// topic) passes.
func checkTopicName(topic string) error {
	if topic == "" {
		return nil
	}
	return topicconfig.ValidateTopicName(topic)
}

// checkTopic answers UNKNOWN_TOPIC_OR_PARTITION for a topic the catalog does not serve.
func (a *Admin) checkTopic(ctx context.Context, topic string) error {
	_, err := a.partitions(ctx, ResetSpec{Topic: topic})
	return err
}
