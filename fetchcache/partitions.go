package fetchcache

import (
	"context"
	"fmt"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// Partition is one partition as the serving layer (HTTP and Kafka) reads it,
// wherever its data lives: a local log (LocalCatalog) or the remote tier.
// Implementations are safe for concurrent use.
type Partition interface {
	// Offsets returns the log start, log end and last stable offsets. It is
	// called on every request and while a Kafka fetch waits for data, so it
	// must be cheap (answered from memory or a cache).
	Offsets(ctx context.Context) (Offsets, error)

	// Read returns whole record batches starting with the batch holding
	// offset: at least that batch even when it is larger than maxBytes,
	// then more while they fit in maxBytes. Reading at the log end returns
	// no data and no error. An offset below the log start or past the log
	// end is an *OffsetOutOfRangeError. An overloaded store answers with an
	// error carrying a retry delay (see gate.RetryAfter).
	Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error)

	// OffsetForTimestamp returns the first offset whose record timestamp is
	// >= ts, with that timestamp (Kafka's ListOffsets by timestamp). found
	// is false when every record is older.
	OffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, found bool, err error)

	// AbortedTxns lists the aborted transactions overlapping [from, to)
	// for a READ_COMMITTED fetch, ordered by first offset.
	AbortedTxns(ctx context.Context, from, to int64) ([]AbortedTxn, error)
}

// SegmentLister is implemented by partitions that can describe their
// segments (HTTP partition details, ListOffsets max timestamp).
type SegmentLister interface {
	Segments(ctx context.Context) ([]SegmentInfo, error)
}

// Catalog resolves topics and partitions. Implementations are safe for
// concurrent use.
type Catalog interface {
	// Topics lists the topics served, sorted by name.
	Topics(ctx context.Context) ([]TopicInfo, error)
	// Partition returns one partition; an unknown topic or partition is an
	// *UnknownTopicOrPartitionError.
	Partition(ctx context.Context, topic string, partition int32) (Partition, error)
}

// Offsets are a partition's offsets at one moment.
type Offsets struct {
	LogStart int64 // first offset a consumer may read
	LogEnd   int64 // offset of the next record (the high watermark)
	// LastStable is the first offset of the earliest open transaction, or
	// LogEnd when none is open: READ_COMMITTED reads stop there.
	LastStable int64
}

// TopicInfo describes one served topic.
type TopicInfo struct {
	Name string
	// ID is the topic ID (Kafka's string form) of the lineage served, ""
	// when unknown (a topic without IDs: a bucket written before them, or
	// a data dir's topic created before tiered gave its topics IDs).
	ID string
	// Partitions are the partition numbers served, ascending.
	Partitions []int32
}

// SegmentInfo describes one segment of a partition.
type SegmentInfo struct {
	BaseOffset   int64  `json:"base_offset"`
	NextOffset   int64  `json:"next_offset"` // offset after the segment's last batch
	SizeBytes    int64  `json:"size_bytes"`
	MaxTimestamp int64  `json:"max_timestamp"` // -1 when no record has one
	Tier         string `json:"tier"`          // "local" or "remote"
	// SegmentCount is set when the entry summarises several segments (a
	// sealed remote sub-manifest, not read just to describe it).
	SegmentCount int `json:"segment_count,omitempty"`
}

// AbortedTxn is one aborted transaction as a READ_COMMITTED fetch reports
// it: producer ProducerID aborted a transaction whose first record is at
// FirstOffset and whose abort marker is at LastOffset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// UnknownTopicOrPartitionError is Kafka's UNKNOWN_TOPIC_OR_PARTITION.
type UnknownTopicOrPartitionError struct {
	Topic     string
	Partition int32 // -1 when the topic itself is unknown
}

func (e *UnknownTopicOrPartitionError) Error() string {
	if e.Partition < 0 {
		return fmt.Sprintf("unknown topic %q", e.Topic)
	}
	return fmt.Sprintf("unknown partition %d of topic %q", e.Partition, e.Topic)
}

// Is makes errors.Is(err, kafkaerr.ErrUnknownTopicOrPartition) true.
func (e *UnknownTopicOrPartitionError) Is(target error) bool {
	return target == kafkaerr.ErrUnknownTopicOrPartition
}

// OffsetOutOfRangeError is Kafka's OFFSET_OUT_OF_RANGE: a read below the log
// start offset or past the log end offset. LogStart and LogEnd are the whole
// readable range, every tier included; Where says where it is read from.
type OffsetOutOfRangeError struct {
	Offset   int64
	LogStart int64
	LogEnd   int64
	Where    Where
	// LocalStart, for WhereBoth, is the local log start offset: offsets
	// [LogStart, LocalStart) are read from the bucket, the rest from disk.
	LocalStart int64
}

// Where says which tier serves a readable range.
type Where uint8

// The tiers of a readable range.
const (
	WhereUnknown Where = iota // not said (e.g. an HTTP client's error)
	WhereLocal                // the local log dir
	WhereBucket               // the bucket
	WhereBoth                 // the bucket below LocalStart, the local log dir from it
)

func (e *OffsetOutOfRangeError) Error() string {
	msg := fmt.Sprintf("offset %d is out of range [%d, %d]", e.Offset, e.LogStart, e.LogEnd)
	switch e.Where {
	case WhereLocal:
		msg += fmt.Sprintf(": offsets %s are readable, from local disk", span(e.LogStart, e.LogEnd))
	case WhereBucket:
		msg += fmt.Sprintf(": offsets %s are readable, from the bucket", span(e.LogStart, e.LogEnd))
	case WhereBoth:
		msg += fmt.Sprintf(": offsets %s are readable, %s from the bucket and %s from local disk",
			span(e.LogStart, e.LogEnd), span(e.LogStart, e.LocalStart), span(e.LocalStart, e.LogEnd))
	}
	return msg
}

// span names the offsets [from, to): "10 to 19", "none".
func span(from, to int64) string {
	switch {
	case to <= from:
		return "none"
	case to == from+1:
		return fmt.Sprintf("%d", from)
	}
	return fmt.Sprintf("%d to %d", from, to-1)
}

// Is makes errors.Is(err, kafkaerr.ErrOffsetOutOfRange) true.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == kafkaerr.ErrOffsetOutOfRange }
