package fetchcache

import (
	"context"
	"errors"
	"slices"
)

// CatalogTopicIDs tells the topic ID each topic of a catalog is served
// under now (groups.TopicIDs: the consumer-group offsets record it, and
// offsets of another incarnation of their topic are not served). It serves
// one request: the catalog's topics are listed once. Not safe for
// concurrent use.
type CatalogTopicIDs struct {
	cat    Catalog
	listed map[string]TopicInfo // nil until listed
	asked  int                  // partitions the listing lacks, asked of the catalog
}

// maxUnlistedPartitions bounds the partitions one request asks the catalog
// for (HasPartition) because its listing lacks them: each may read a
// manifest from the store, and an OffsetCommit may name any number of
// partitions (it has no cap of its own, unlike Fetch). Past it a partition
// the listing lacks is taken as missing: a partition added within the
// listing's TTL that many times over is refused until the listing is read
// again (TopicsTTL, 30 s), which clients retry.
const maxUnlistedPartitions = 32

// NewCatalogTopicIDs resolves topic IDs in cat.
func NewCatalogTopicIDs(cat Catalog) *CatalogTopicIDs { return &CatalogTopicIDs{cat: cat} }

// CurrentTopicID is the topic ID of the lineage the catalog serves under
// topic ("" for a topic without IDs), served false when the catalog does not
// serve the topic (deleted, or never known). The listing may be older than
// the partitions' last manifest read (a topic re-created or deleted since):
// the ID is the one the topic's first partition serves after a manifest
// re-read when due, as a Fetch would, and a partition that is gone means the
// topic is. A topic the listing lacks is asked of the catalog once more
// when it can tell (unlistedResolver): a cached listing may predate the
// topic's first upload while its partitions are served already.
func (c *CatalogTopicIDs) CurrentTopicID(ctx context.Context, topic string) (id string, served bool, err error) {
	if err := c.list(ctx); err != nil {
		return "", false, err
	}
	t, ok := c.listed[topic]
	if !ok {
		if u, ok := c.cat.(unlistedResolver); ok {
			return u.unlistedTopicID(ctx, topic)
		}
		return "", false, nil
	}
	if len(t.Partitions) == 0 {
		return t.ID, true, nil
	}
	pid, known, err := PartitionTopicID(ctx, c.cat, topic, t.Partitions[0])
	var ue *UnknownTopicOrPartitionError
	switch {
	case errors.As(err, &ue):
		return "", false, nil
	case err != nil:
		return "", false, err
	case !known:
		return t.ID, true, nil
	}
	return pid, true, nil
}

// KnownStale reports whether topicID is a known earlier incarnation of
// topic (groups.StaleTeller), which the catalog does not serve now. A
// bucket's catalog knows it when the topic's topic object lists it among
// its superseded lineages (deleted, or replaced by a re-creation); an ID
// it does not list is unknown to it (a serve bucket holds only serve's
// remote-enabled topics, while its groups commit offsets of the others
// too). Any other catalog (a log dir's) knows every topic there is: an
// incarnation it does not serve is an earlier one.
func (c *CatalogTopicIDs) KnownStale(ctx context.Context, topic, topicID string) (bool, error) {
	if d, ok := c.cat.(staleResolver); ok {
		return d.knownStale(ctx, topic, topicID)
	}
	return true, nil
}

// staleResolver is a catalog that tells a known earlier incarnation of a
// topic from one it does not know.
type staleResolver interface {
	knownStale(ctx context.Context, topic, topicID string) (bool, error)
}

// HasPartition reports whether the catalog serves partition of topic
// (groups.TopicPartitions: a commit on a partition the topic does not have
// is refused). A partition the listing lacks is asked of the catalog
// (Partition, which reads its manifest): the listing may predate the
// topic's new partitions, which are served already. At most
// maxUnlistedPartitions a request are asked.
func (c *CatalogTopicIDs) HasPartition(ctx context.Context, topic string, partition int32) (bool, error) {
	if err := c.list(ctx); err != nil {
		return false, err
	}
	if t, ok := c.listed[topic]; ok {
		if slices.Contains(t.Partitions, partition) {
			return true, nil
		}
	}
	if c.asked >= maxUnlistedPartitions {
		return false, nil
	}
	c.asked++
	_, err := c.cat.Partition(ctx, topic, partition)
	var ue *UnknownTopicOrPartitionError
	switch {
	case errors.As(err, &ue):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// list lists the catalog's topics once.
func (c *CatalogTopicIDs) list(ctx context.Context) error {
	if c.listed != nil {
		return nil
	}
	topics, err := c.cat.Topics(ctx)
	if err != nil {
		return err
	}
	c.listed = make(map[string]TopicInfo, len(topics))
	for _, t := range topics {
		c.listed[t.Name] = t
	}
	return nil
}

// PartitionTopicID is the topic ID the catalog's partition of topic serves
// now: its manifest (and topic object) re-read first when older than the
// catalog's manifest TTL, as a Fetch would. known is false when the
// partition does not know topic IDs (a local one); a partition that is gone
// is an *UnknownTopicOrPartitionError.
func PartitionTopicID(ctx context.Context, cat Catalog, topic string, partition int32) (id string, known bool, err error) {
	p, err := cat.Partition(ctx, topic, partition)
	if err != nil {
		return "", false, err
	}
	ider, ok := p.(TopicIDer)
	if !ok {
		return "", false, nil
	}
	if _, err := p.Offsets(ctx); err != nil {
		return "", false, err
	}
	return ider.TopicID(), true, nil
}

// unlistedResolver is a catalog that can tell the current ID of a topic
// its cached listing lacks without listing again.
type unlistedResolver interface {
	unlistedTopicID(ctx context.Context, topic string) (id string, served bool, err error)
}
