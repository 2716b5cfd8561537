// Package compactor is tiered's log cleaner: Kafka's log compaction on the
// local tier's partition logs. It owns the offset map (a fixed block of
// memory holding a keyed 128-bit fingerprint and the latest offset of every
// key in a log's dirty region), the choice of which compacted log to clean
// (dirty ratio, min/max compaction lag, the cleaner-offset-checkpoint), the
// rewrite of the clean and dirty regions into cleaned segments (latest value
// per key, tombstones and transaction markers kept until their delete
// horizon, aborted transactions removed, producer state kept), the swap that
// puts them in place (through localtier's ReplaceSegments), the I/O throttle,
// the pool of cleaner goroutines and their metrics.
//
// The guarantees are Kafka's: offsets and order never change; a consumer
// reading from the start sees at least the latest value of every key in the
// cleaned region; a tombstone stays at least delete.retention.ms after the
// cleaner first saw it (a legacy magic 0/1 one, which has no delete horizon
// of its own, until its segment was last modified delete.retention.ms
// before the last segment already cleaned, as Kafka's cleaner); nothing newer than min.compaction.lag.ms, nothing in
// the active segment and nothing at or past the last stable offset is ever
// touched.
package compactor
