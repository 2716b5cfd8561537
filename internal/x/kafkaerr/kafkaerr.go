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
	// ErrTopicAlreadyExists is Kafka's TOPIC_ALREADY_EXISTS.
	ErrTopicAlreadyExists = errors.New("topic already exists")
	// ErrInvalidTopic is Kafka's INVALID_TOPIC_EXCEPTION: a name Kafka
	// would refuse.
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrInvalidConfig is Kafka's INVALID_CONFIG: an unknown topic config
	// name, a bad value, or an invalid combination.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidTimestamp is Kafka's INVALID_TIMESTAMP: an append refused
	// because a record timestamp lies outside the topic's
	// message.timestamp.before.max.ms / after.max.ms window, or a producer
	// set LogAppendTime.
	ErrInvalidTimestamp = errors.New("invalid timestamp")
	// ErrStorage is Kafka's KAFKA_STORAGE_ERROR: the log could not be
	// written (or read) for a reason of the disk, not of the request.
	ErrStorage = errors.New("storage error")
)
