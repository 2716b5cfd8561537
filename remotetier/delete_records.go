package remotetier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
	"github.com/tiered/tiered/retention"
)

// DeleteRecordsOptions name the partition and the offset of DeleteRecords.
type DeleteRecordsOptions struct {
	Prefix    string
	Topic     string
	Partition int32
	// Before is the new log start offset: every offset below it is
	// deleted. It may be at most the remote log end.
	Before int64
	// DryRun reports and changes nothing.
	DryRun bool
	Now    func() time.Time
	// Metrics, when set, counts the deletions (reason log-start-offset).
	Metrics *RetentionMetrics
	Logger  *slog.Logger
}

// DeleteRecordsRangeError is a DeleteRecords offset outside what the
// remote log can take: below zero or past its end.
type DeleteRecordsRangeError struct {
	Topic                  string
	Partition              int32
	Offset, LogStart, Next int64
}

func (e *DeleteRecordsRangeError) Error() string {
	return fmt.Sprintf("delete records of %s-%d before offset %d: the remote log holds [%d, %d); the offset must be at most its end %d",
		e.Topic, e.Partition, e.Offset, e.LogStart, e.Next, e.Next)
}

// DeleteRecords is Kafka's DeleteRecords on the remote tier of one
// partition, in the lineage its topic object serves: the remote log start
// moves to Before (a conditional root write; readers are served nothing
// below it from then on), and the segments wholly below it are deleted
// after, as remote retention deletes them. A broker's DeleteRecords is not
// applied to the bucket by the sidecar (nothing in a broker's log dir tells
// it apart from the log start a follower takes from its leader's
// retention), so an operator runs this after it. An offset at or below the
// remote log start changes nothing; one past the remote end is a
// *DeleteRecordsRangeError; a partition without a manifest is a
// *remotelog.UnknownTopicOrPartitionError.
func DeleteRecords(ctx context.Context, bkt objstore.Bucket, o DeleteRecordsOptions) (RemotePartitionRetention, []retention.SegmentReport, error) {
	pr := RemotePartitionRetention{Topic: o.Topic, Partition: o.Partition}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	store, err := newManifestStore(bkt, o.Prefix)
	if err != nil {
		return pr, nil, err
	}
	opts := RetentionOptions{Prefix: o.Prefix, DryRun: o.DryRun, Now: o.Now, Metrics: o.Metrics, Logger: o.Logger}
	// Delete no object: the floor alone moves the log start.
	var keep topicconfig.Config
	for attempt := 1; ; attempt++ {
		keyID, _, err := remotelog.ResolveTopic(ctx, bkt, store.prefix, o.Topic)
		if errors.Is(err, remotelog.ErrTopicDeleted) {
			return pr, nil, &remotelog.UnknownTopicOrPartitionError{Topic: o.Topic, Partition: o.Partition, Deleted: true}
		}
		if err != nil {
			return pr, nil, err
		}
		m, etag, err := store.loadID(ctx, o.Topic, keyID, o.Partition, 0)
		if err != nil {
			return pr, nil, err
		}
		if m.Generation == 0 {
			return pr, nil, &remotelog.UnknownTopicOrPartitionError{Topic: o.Topic, Partition: o.Partition, Key: m.Key()}
		}
		pr.LogStartOffset, pr.NewLogStartOffset = m.LogStartOffset, m.LogStartOffset
		if o.Before < 0 || o.Before > m.NextOffset() {
			return pr, nil, &DeleteRecordsRangeError{Topic: o.Topic, Partition: o.Partition, Offset: o.Before, LogStart: m.LogStartOffset, Next: m.NextOffset()}
		}
		step, err := retentionStep(ctx, store, m, etag, nil, keep, o.Before, opts, o.Logger)
		if objstore.IsPreconditionFailed(err) && attempt < 8 {
			continue // another writer committed: plan again from its manifest
		}
		if err != nil {
			return step.pr, nil, fmt.Errorf("delete records of %s-%d before offset %d: %w", o.Topic, o.Partition, o.Before, err)
		}
		return step.pr, step.reports, nil
	}
}
