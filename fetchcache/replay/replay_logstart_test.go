package replay

import (
	"bytes"
	"context"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// midBatchPartition is one batch of offsets 0-9 whose log start is 5 (a
// broker's DeleteRecords, carried into the manifest by the sidecar), with
// timestamps out of order: offsets 2 and 7 are late, the rest early.
type midBatchPartition struct{ batch []byte }

const midBatchStart = 5

var midBatchTS = []int64{100, 100, 500, 100, 100, 100, 100, 500, 100, 100}

func newMidBatchPartition(t *testing.T) *midBatchPartition {
	rs := make([]record.Record, len(midBatchTS))
	for i, ts := range midBatchTS {
		rs[i] = record.Record{Offset: int64(i), Timestamp: ts, Value: []byte{byte('a' + i)}}
	}
	var enc record.Encoder
	b, err := enc.AppendBatch(nil, record.NewBatchSpec(0, codec.None), rs)
	if err != nil {
		t.Fatal(err)
	}
	return &midBatchPartition{batch: b}
}

func (p *midBatchPartition) Offsets(context.Context) (fetchcache.Offsets, error) {
	return fetchcache.Offsets{LogStart: midBatchStart, LogEnd: 10, LastStable: 10}, nil
}

func (p *midBatchPartition) Read(_ context.Context, offset int64, _ int) ([]byte, error) {
	if offset < midBatchStart || offset > 10 {
		return nil, &fetchcache.OffsetOutOfRangeError{Offset: offset, LogStart: midBatchStart, LogEnd: 10}
	}
	if offset == 10 {
		return nil, nil
	}
	return p.batch, nil
}

// OffsetForTimestamp is Kafka's: the first offset at or after the log start
// whose timestamp is >= ts.
func (p *midBatchPartition) OffsetForTimestamp(_ context.Context, ts int64) (int64, int64, bool, error) {
	for off := int64(midBatchStart); off < 10; off++ {
		if midBatchTS[off] >= ts {
			return off, midBatchTS[off], true, nil
		}
	}
	return 0, 0, false, nil
}

func (p *midBatchPartition) AbortedTxns(context.Context, int64, int64) ([]fetchcache.AbortedTxn, error) {
	return nil, nil
}

// TestReplayFromWithLogStartInsideBatch: with the log start inside a batch
// and timestamps out of order, --from resolves to the first offset at or
// after the log start with a timestamp >= from (Kafka's ListOffsets, and
// what the fetch service itself answers) through --fetch as through
// --bucket: a record before the log start with a later timestamp does not
// pull the range back to the log start, taking in records older than --from.
func TestReplayFromWithLogStartInsideBatch(t *testing.T) {
	for name, src := range bothSources(t, oneCatalog{p: newMidBatchPartition(t)}) {
		var buf bytes.Buffer
		cp, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 300, To: 1000, Stdout: &buf})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r := cp.Ranges[0]; r.Start != 7 || r.End != 10 {
			t.Errorf("%s: range [%d, %d), want [7, 10) (offsets 5 and 6 are stamped 100, before --from 300)", name, r.Start, r.End)
		}
	}
}
