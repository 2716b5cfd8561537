package fetchcache

import (
	"context"

	"github.com/tiered/tiered/localtier/topicconfig"
)

// ValidatingCatalog wraps a Catalog and refuses a topic name Kafka would refuse before the
// catalog sees it, so object keys and file names derive only from
// validated names: such a partition is unknown.
type ValidatingCatalog struct{ Catalog }

func (c ValidatingCatalog) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	if topicconfig.ValidateTopicName(topic) != nil {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	return c.Catalog.Partition(ctx, topic, partition)
}

// knownStale passes CatalogTopicIDs' KnownStale on to the wrapped catalog
// (staleResolver), as unlistedTopicID below: without it, a fetch listener's
// group commits took every offset of a topic its bucket does not hold (a
// serve bucket's local topics) as stale and dropped it. A refused name is
// not known; a catalog that cannot tell knows every topic.
func (c ValidatingCatalog) knownStale(ctx context.Context, topic, topicID string) (bool, error) {
	if topicconfig.ValidateTopicName(topic) != nil {
		return false, nil
	}
	if d, ok := c.Catalog.(staleResolver); ok {
		return d.knownStale(ctx, topic, topicID)
	}
	return true, nil
}

// unlistedTopicID passes CatalogTopicIDs' look-up of a topic the cached
// listing lacks on to the wrapped catalog (unlistedResolver), which the
// embedded interface does not carry: without it a topic first uploaded
// within the listing's TTL was not served to the Kafka listener's groups. A
// refused name, or a catalog that cannot tell, is not served.
func (c ValidatingCatalog) unlistedTopicID(ctx context.Context, topic string) (string, bool, error) {
	u, ok := c.Catalog.(unlistedResolver)
	if !ok || topicconfig.ValidateTopicName(topic) != nil {
		return "", false, nil
	}
	return u.unlistedTopicID(ctx, topic)
}
