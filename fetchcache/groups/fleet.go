package groups

// FleetPrefix is the directory under KeyPrefix that the fetch fleet's leases use
// (fetchcache/fleet.LeasePrefix, docs/format/fleet.md): no group key starts with it (group
// keys are groups/<8 hex digits>/...), and List skips it.
const FleetPrefix = KeyPrefix + ".fleet/"

// Store is the group store the coordinator writes through (the /v1/groups administration
// changes offsets through the same store, so the coordinator's cache sees them).
func (c *Coordinator) Store() *Store { return c.store }
