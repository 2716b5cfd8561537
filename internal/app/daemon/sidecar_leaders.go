package daemon

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/tiered/tiered/remotetier/brokermeta"
)

// brokerID reads node.id (KRaft) or broker.id (ZooKeeper) from the log
// dir's meta.properties.
func brokerID(dir string) (int32, error) {
	props, err := brokermeta.MetaProperties(nil, dir)
	if err != nil {
		return 0, fmt.Errorf("read the broker id: %w", err)
	}
	path := filepath.Join(dir, "meta.properties")
	for _, k := range []string{"node.id", "broker.id"} {
		v, ok := props[k]
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(v, 10, 32)
		if err != nil || id < 0 {
			return 0, fmt.Errorf("%s: %s=%q is not a broker id", path, k, v)
		}
		return int32(id), nil
	}
	return 0, fmt.Errorf("%s has neither node.id nor broker.id", path)
}
