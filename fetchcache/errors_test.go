package fetchcache_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// TestErrorsMatchOneSentinel: every layer's typed error for a Kafka error
// matches that error's sentinel — directly and wrapped — and no other, so
// the interfaces' tables (HTTP, Kafka, CLI) answer it whichever layer it
// came from.
func TestErrorsMatchOneSentinel(t *testing.T) {
	sentinels := []error{kafkaerr.ErrUnknownTopicOrPartition, kafkaerr.ErrOffsetOutOfRange, kafkaerr.ErrCorrupt,
		kafkaerr.ErrTopicAlreadyExists, kafkaerr.ErrInvalidTopic, kafkaerr.ErrInvalidConfig, kafkaerr.ErrStorage}
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&localtier.UnknownTopicOrPartitionError{Topic: "t", Partition: 0}, kafkaerr.ErrUnknownTopicOrPartition},
		{&remotelog.UnknownTopicOrPartitionError{Topic: "t", Partition: 0, Key: "k"}, kafkaerr.ErrUnknownTopicOrPartition},
		{&fetchcache.UnknownTopicOrPartitionError{Topic: "t", Partition: 0}, kafkaerr.ErrUnknownTopicOrPartition},
		{&localtier.OffsetOutOfRangeError{Offset: 5}, kafkaerr.ErrOffsetOutOfRange},
		{&manifest.OffsetOutOfRangeError{Offset: 5}, kafkaerr.ErrOffsetOutOfRange},
		{&fetchcache.OffsetOutOfRangeError{Offset: 5}, kafkaerr.ErrOffsetOutOfRange},
		{&record.CorruptError{File: "f", Reason: "crc"}, kafkaerr.ErrCorrupt},
		{&codec.CorruptError{Codec: codec.Zstd, Reason: "frame"}, kafkaerr.ErrCorrupt},
		{&index.CorruptIndexError{File: "f", Reason: "size"}, kafkaerr.ErrCorrupt},
		{&localtier.CorruptSnapshotError{Path: "p", Reason: "crc"}, kafkaerr.ErrCorrupt},
		{&topicconfig.CorruptOverridesError{Reason: "json"}, kafkaerr.ErrCorrupt},
		{&manifest.CorruptManifestError{Key: "k", Reason: "json"}, kafkaerr.ErrCorrupt},
		{&remotelog.CorruptObjectError{Key: "k", Reason: "size"}, kafkaerr.ErrCorrupt},
		{&localtier.TopicExistsError{Topic: "t"}, kafkaerr.ErrTopicAlreadyExists},
		{&topicconfig.InvalidTopicError{Topic: "a/b", Message: "illegal"}, kafkaerr.ErrInvalidTopic},
		{&topicconfig.InvalidConfigError{Name: "retention.ms", Value: "x", Reason: "bad"}, kafkaerr.ErrInvalidConfig},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("read: %w", tc.err)} {
			for _, s := range sentinels {
				if got := errors.Is(err, s); got != (s == tc.want) {
					t.Errorf("errors.Is(%T %v, %v) = %v", tc.err, err, s, got)
				}
			}
		}
		if fetchcache.IsCorruptData(tc.err) != (tc.want == kafkaerr.ErrCorrupt) {
			t.Errorf("IsCorruptData(%T) = %v", tc.err, !(tc.want == kafkaerr.ErrCorrupt))
		}
	}
}
