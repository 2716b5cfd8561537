package groups

import (
	"context"
	"encoding/base64"
)

// TopicIDs tells which incarnation of a topic is current: the topic ID of
// the lineage the bucket's topic object serves under the name
// (docs/format/topic-object.md). Every fetch replica reads the same topic
// objects, so the replicas of a fleet agree (within their manifest TTL).
type TopicIDs interface {
	// CurrentTopicID is the topic ID topic is served under ("" for a topic
	// without IDs); served is false when the topic is not served (deleted,
	// or never known).
	CurrentTopicID(ctx context.Context, topic string) (id string, served bool, err error)
}

// StaleTeller is TopicIDs whose view may lack topics, and incarnations of
// topics, that exist: a bucket holds only the topics tiered to it, while
// the groups in it (those of `tiered serve`) commit offsets of its other
// topics too, and of incarnations the bucket never held. KnownStale
// reports whether topicID is a known earlier incarnation of topic (its
// topic object lists it deleted or replaced). An offset that is not of the
// current incarnation served is stale only when it is known so; TopicIDs
// without this take every such offset as stale.
type StaleTeller interface {
	KnownStale(ctx context.Context, topic, topicID string) (bool, error)
}

// TopicPartitions is TopicIDs that also tell a served topic's partitions:
// Commit refuses an offset of a partition its topic does not have
// (UNKNOWN_TOPIC_OR_PARTITION), as Kafka does. TopicIDs without it take
// every partition of a served topic as one it has.
type TopicPartitions interface {
	TopicIDs
	// HasPartition reports whether topic, which is served, has partition.
	HasPartition(ctx context.Context, topic string, partition int32) (bool, error)
}

// Lineages answers, for one request, which committed offsets belong to the
// current incarnation of their topic. Each topic is resolved once. A nil
// *Lineages (no TopicIDs) takes every offset as current, as releases
// before topic IDs did.
type Lineages struct {
	ids   TopicIDs
	memo  map[string]lineage
	stale map[[2]string]bool // KnownStale's answers by topic and ID
}

type lineage struct {
	id     string
	served bool
}

// NewLineages resolves topics through ids; nil ids give a nil *Lineages.
func NewLineages(ids TopicIDs) *Lineages {
	if ids == nil {
		return nil
	}
	return &Lineages{ids: ids, memo: map[string]lineage{}, stale: map[[2]string]bool{}}
}

// Current is topic's current topic ID ("" for a topic without IDs) and
// whether it is served; with a nil l, "" and true.
func (l *Lineages) Current(ctx context.Context, topic string) (id string, served bool, err error) {
	if l == nil {
		return "", true, nil
	}
	if c, ok := l.memo[topic]; ok {
		return c.id, c.served, nil
	}
	id, served, err = l.ids.CurrentTopicID(ctx, topic)
	if err != nil {
		return "", false, err
	}
	l.memo[topic] = lineage{id, served}
	return id, served, nil
}

// Stale reports whether off was committed against another incarnation of
// its topic than the current one: it names a topic ID and the topic is no
// longer served (deleted) or is served under another ID (deleted and
// re-created); with a StaleTeller, only when it knows that incarnation as
// an earlier one. Kafka deletes the committed offsets of a deleted topic; a
// stale offset is answered as no committed offset. An offset naming no ID
// is never stale.
func (l *Lineages) Stale(ctx context.Context, off Offset) (bool, error) {
	if l == nil || off.TopicID == "" {
		return false, nil
	}
	id, served, err := l.Current(ctx, off.Topic)
	if err != nil {
		return false, err
	}
	if served && id == off.TopicID {
		return false, nil
	}
	t, ok := l.ids.(StaleTeller)
	if !ok {
		return true, nil
	}
	k := [2]string{off.Topic, off.TopicID}
	if s, ok := l.stale[k]; ok {
		return s, nil
	}
	s, err := t.KnownStale(ctx, off.Topic, off.TopicID)
	if err != nil {
		return false, err
	}
	l.stale[k] = s
	return s, nil
}

// DropStale removes o's stale offsets (Stale) and returns them. On an
// error nothing is removed.
func (l *Lineages) DropStale(ctx context.Context, o *Object) ([]Offset, error) {
	if l == nil || o == nil {
		return nil, nil
	}
	// Each topic resolved (and memoized) first: the removal then asks
	// nothing that can fail.
	for _, off := range o.Offsets {
		if _, err := l.Stale(ctx, off); err != nil {
			return nil, err
		}
	}
	return o.removeOffsets(func(off Offset) bool {
		stale, _ := l.Stale(ctx, off)
		return stale
	}), nil
}

// validTopicID reports whether s is Kafka's string form of a topic ID: 22
// characters of URL-safe base64 without padding, 16 bytes.
func validTopicID(s string) bool {
	if len(s) != 22 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 16
}
