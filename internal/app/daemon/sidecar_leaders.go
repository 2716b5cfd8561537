package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// brokerID reads node.id (KRaft) or broker.id (ZooKeeper) from the log
// dir's meta.properties.
func brokerID(dir string) (int32, error) {
	path := filepath.Join(dir, "meta.properties")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read the broker id: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if k = strings.TrimSpace(k); k == "node.id" || k == "broker.id" {
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || id < 0 {
				return 0, fmt.Errorf("%s: %s=%q is not a broker id", path, k, v)
			}
			return int32(id), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has neither node.id nor broker.id", path)
}
