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
