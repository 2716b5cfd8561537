package groups

import "github.com/twmb/franz-go/pkg/kerr"

// FleetPrefix is the directory under KeyPrefix that the fetch fleet's leases use
// (fetchcache/fleet.LeasePrefix, docs/format/fleet.md): no group key starts with it (group
// keys are groups/<8 hex digits>/...), and List skips it.
const FleetPrefix = KeyPrefix + ".fleet/"

// Release drops everything this coordinator holds of group — its members (a waiting
// JoinGroup or SyncGroup is answered NOT_COORDINATOR) and its cached object — after the
// Ring moved the group to another replica (the fleet's OnLose). If the group comes back,
// it is loaded from the bucket again, with whatever its other coordinator committed
// meanwhile; an old cache never hides a takeover's commits.
func (c *Coordinator) Release(group string) {
	c.mu.Lock()
	if g, ok := c.groups[group]; ok {
		for _, id := range append([]string(nil), g.order...) {
			c.dropMember(g, g.members[id], kerr.NotCoordinator.Code)
		}
		delete(c.groups, group)
		c.updateGauges()
	}
	c.mu.Unlock()
	c.store.Forget(group)
	c.log.Info("group moved to another coordinator; its state here is dropped", "group", group)
}

// Store is the group store the coordinator writes through (the /v1/groups administration
// changes offsets through the same store, so the coordinator's cache sees them).
func (c *Coordinator) Store() *Store { return c.store }
