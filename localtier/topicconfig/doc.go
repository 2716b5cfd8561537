// Package topicconfig owns the topic configuration model of the local tier: Kafka's topic-level
// config names (cleanup.policy, segment.bytes, retention.ms, local.retention.ms, ...), their
// Kafka defaults and validation rules, the per-topic override file, and Kafka's naming rules for
// topics and partition directories ("topic-partition", plus the "-delete", "-future" and
// "-stray" marked directories a broker leaves behind).
//
// Only overrides are stored; the effective configuration is always Defaults() with the
// overrides applied by Parse, which validates in one pass and reports every problem at once with
// Kafka's wording, for example:
//
//	Invalid value 5 for configuration segment.bytes: Value must be at least 1048576
//	Unknown topic config name: foo
//
// Override file layout (EncodeOverrides / DecodeOverrides), one JSON object with sorted keys:
//
//	{"version":1,"overrides":{"cleanup.policy":"compact","segment.bytes":"1048576"}}
//
// The package has no I/O; callers write the bytes atomically themselves.
package topicconfig
