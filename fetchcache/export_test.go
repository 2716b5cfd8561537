package fetchcache

// OpenPartitions is how many remote partitions c holds open.
func (c *RemoteCatalog) OpenPartitions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.parts)
}

// EndChecked reports whether c holds topic-partition open with its end
// checked (remotelog.RemoteLog.EndChecked).
func (c *RemoteCatalog) EndChecked(topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.parts {
		if k.topic == topic && k.partition == partition && p.log.EndChecked() {
			return true
		}
	}
	return false
}
