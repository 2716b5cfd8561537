package fetchkit

import (
	"context"

	"github.com/tiered/tiered/fetchcache"
)

// IDCatalog gives the topics of Catalog the topic IDs IDs maps them to, as
// the remote catalog does from the bucket's topic objects (a topic not in
// the map has none). The map may be changed between calls (a topic
// re-created).
type IDCatalog struct {
	fetchcache.Catalog
	IDs map[string]string
}

// Topics lists Catalog's topics with their IDs.
func (c IDCatalog) Topics(ctx context.Context) ([]fetchcache.TopicInfo, error) {
	ts, err := c.Catalog.Topics(ctx)
	for i := range ts {
		ts[i].ID = c.IDs[ts[i].Name]
	}
	return ts, err
}
