// Package retention owns tiered's retention policy: which whole segments of a
// partition may be deleted, and why, under Kafka's cleanup.policy, retention.ms,
// retention.bytes, local.retention.ms and local.retention.bytes.
//
// The policy is pure (Local, Remote): segment metadata, a topic config, the log
// start offset and a clock in, a deletable set and a new log start offset out,
// in the style of Prometheus tsdb's BeyondTimeRetention/BeyondSizeRetention.
// Deleting is a separate step the log engine does (localtier.Log.DeleteSegments:
// rename to .deleted, sync, remove, as Kafka does); RunOnce plans and applies
// one pass over a data dir, and Loop repeats it for serve every
// log.retention.check.interval.ms with Prometheus metrics.
//
// Rules, as Kafka's UnifiedLog.deleteOldSegments and RemoteLogManager apply them:
//
//   - Only whole segments are deleted, oldest first; the deletable set is always
//     a prefix of the log and the log that remains a contiguous suffix.
//   - The active segment is never deleted (Kafka rolls it first; tiered waits
//     for segment.ms or segment.bytes to roll it).
//   - Segments wholly below the log start offset go first (log-start-offset),
//     under any cleanup.policy.
//   - With delete in cleanup.policy: then retention.bytes trims oldest-first
//     while the partition is over the cap (a segment goes if the log without it
//     is still at least retention.bytes), then retention.ms deletes segments
//     whose largest timestamp is older than now - retention.ms. A negative
//     limit (-1) is unlimited. cleanup.policy=compact deletes nothing by age or
//     size; compact,delete does both.
//   - With remote.storage.enable=true the local tier follows local.retention.ms
//     and local.retention.bytes (-2 = the retention.* value) and a local segment
//     is deleted only once the remote tier holds all its offsets; without a
//     remote tier to ask, nothing local is deleted. Remote deletion follows
//     retention.ms/bytes over the whole log, local and remote. The remote
//     tier is asked per localtier.PartitionLog (RemoteLookup), whose topic
//     ID tells its lineage in the bucket; another lineage's offsets hold
//     nothing of it (RemoteState.NotOurs).
//   - The log start offset only moves forward.
//
// When retention.bytes deletes a segment that retention.ms would still keep,
// the deletion is flagged (SizeBeatTime) and the loop logs a warning: that is
// the byte cap eating a time promise.
package retention
