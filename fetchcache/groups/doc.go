// Package groups owns the fetch service's consumer-group coordinator: the
// classic group protocol's state machine (coordinator.go: join, sync,
// heartbeat, leave; session, rebalance and initial-rebalance timeouts;
// static membership; generation fencing), the committed offsets, durable in
// the bucket before a commit is acknowledged (store.go: one object per
// group under groups/, written only with a conditional PUT; object.go: the
// format, docs/format/groups.md), their expiry after Kafka's
// offsets.retention.minutes, the group metrics (metrics.go), and the
// ownership hook a fleet of fetch replicas implements (ring.go: Ring; Alone
// coordinates every group).
//
// Membership lives in memory only: a restarted coordinator knows no
// members, and their next heartbeat gets UNKNOWN_MEMBER_ID or
// ILLEGAL_GENERATION, so they rejoin; their committed offsets are in the
// bucket. The package speaks in franz-go's kmsg request and response types;
// fetchcache/kafkasrv decodes, authorizes and routes the requests.
package groups
