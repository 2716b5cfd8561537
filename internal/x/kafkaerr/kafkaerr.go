// Package kafkaerr is Kafka's error vocabulary as tiered's layers share it:
// one sentinel per Kafka error that a read or write can end in. Each layer
// keeps its own typed error with the details it knows (file and position,
// object key, offsets) and makes it match its sentinel with errors.Is; each
// interface (the Kafka listener, the HTTP API, the CLI) maps the sentinels
// to its own codes in one table. Nothing here knows any layer.
package kafkaerr

import "errors"

var (
	// ErrUnknownTopicOrPartition is Kafka's UNKNOWN_TOPIC_OR_PARTITION: no
	// such topic or partition in the log dir, the bucket or the catalog.
	ErrUnknownTopicOrPartition = errors.New("unknown topic or partition")
	// ErrOffsetOutOfRange is Kafka's OFFSET_OUT_OF_RANGE: an offset below
	// the log start or past the log end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrCorrupt is Kafka's CORRUPT_MESSAGE: stored bytes failed a check (a
	// batch's CRC or framing, a compressed payload, an index, a manifest, an
	// object's size or checksum). Retrying the same read cannot help.
	ErrCorrupt = errors.New("corrupt data")
)
