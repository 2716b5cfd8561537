package fetchcache

// OpenPartitions is how many remote partitions c holds open.
func (c *RemoteCatalog) OpenPartitions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.parts)
}
