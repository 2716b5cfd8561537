// Package localtier is tiered's Kafka-compatible log engine. It owns the
// partition log (segments of Kafka's .log/.index/.timeindex/.txnindex files:
// append with a leader's validation and offset assignment, roll on
// segment.bytes, segment.ms, full index or offset overflow, read by offset as
// Kafka's Fetch does, find offsets by timestamp, recover on open the way
// Kafka's LogLoader does; per-producer state and open transactions persisted
// in Kafka's .snapshot files), the log dir (many partitions, topic configs, the
// checkpoint files, the flock that keeps one process per data dir), and a
// read-only view of a real broker's log dir.
//
// A topic the log dir creates gets a random topic ID, written durably in
// every partition directory's partition.metadata (Kafka's file) before the
// create commits: it names the topic's lineage in the bucket, so a topic
// created again by the same name (a data dir lost and started anew) is not
// taken for the earlier one. Topics created before tiered wrote IDs keep
// none (LogDir.TopicID is zero for them).
//
// The byte formats live in subpackages: record (batches and records), codec
// (compression), index (the three index files), checkpoint (checkpoint
// files), topicconfig (Kafka's topic configs and names), and vfs (the
// filesystem seam every file access goes through, so tests can inject
// faults and crashes). docs/format describes every file.
//
// Durability follows Kafka: appends reach the page cache; Flush (and Close,
// and every segment roll) fsyncs and advances the recovery point, which the
// log dir checkpoints.
// On open, segments past the recovery point are scanned, CRC-checked and
// their indexes rebuilt; a torn or corrupt tail is truncated.
//
// Open files are bounded: a LogDir opens its partitions' files through a
// FileTable (filetable.go), which closes the descriptors of the least
// recently used files beyond LogDirOptions.MaxOpenFiles (default half of
// RLIMIT_NOFILE) and reopens them on demand, so 10,000 partitions run under
// ulimit -n 4096. Topic create is all or nothing: an intent file is its
// commit point, and the loader rolls back a create a crash interrupted
// (docs/format/topic-metadata.md).
package localtier
