package replay

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tiered/tiered/fetchcache"
)

func TestClientAgainstService(t *testing.T) {
	env := newReplayEnv(t)
	c := env.client
	ctx := context.Background()

	topics, err := c.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != replayTopic || len(topics[0].Partitions) != 3 {
		t.Fatalf("topics %+v, %v", topics, err)
	}
	want := env.want[1]
	d, err := c.PartitionInfo(ctx, replayTopic, 1)
	if err != nil || d.LogStart != 0 || d.LogEnd != want[len(want)-1].Offset+1 || len(d.Segments) == 0 || d.MaxTimestamp != want[len(want)-1].Timestamp {
		t.Fatalf("partition info %+v, %v", d, err)
	}

	// Raw reads walk the log batch by batch, byte-exact.
	var got []byte
	for off := d.LogStart; off < d.LogEnd; {
		res, err := c.ReadRaw(ctx, replayTopic, 1, off, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) == 0 || res.NextOffset <= off || res.LogEnd != d.LogEnd {
			t.Fatalf("read at %d: %d bytes, next %d, end %d", off, len(res.Data), res.NextOffset, res.LogEnd)
		}
		got = append(got, res.Data...)
		off = res.NextOffset
	}
	if !bytes.Equal(got, env.rawLogs[1]) {
		t.Fatalf("raw reads: %d bytes, want %d", len(got), len(env.rawLogs[1]))
	}
	if res, err := c.ReadRaw(ctx, replayTopic, 1, d.LogEnd, 0); err != nil || len(res.Data) != 0 || res.NextOffset != d.LogEnd {
		t.Fatalf("read at the end: %+v %v", res, err)
	}

	// Timestamps: every record's own time finds it; between records the
	// next one; past the end nothing.
	part, err := env.cat.Partition(ctx, replayTopic, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{0, want[0].Timestamp, want[3].Timestamp + 1, want[40].Timestamp, want[len(want)-1].Timestamp, want[len(want)-1].Timestamp + 1} {
		off, found, err := c.OffsetForTimestamp(ctx, replayTopic, 1, ts)
		wOff, _, wFound, werr := part.OffsetForTimestamp(ctx, ts)
		if err != nil || werr != nil || found != wFound || (found && off != wOff) {
			t.Fatalf("timestamp %d: got %d %v %v, catalog says %d %v %v", ts, off, found, err, wOff, wFound, werr)
		}
	}

	var ue *fetchcache.UnknownTopicOrPartitionError
	if _, err := c.ReadRaw(ctx, "missing", 0, 0, 0); !errors.As(err, &ue) || ue.Topic != "missing" {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := c.PartitionInfo(ctx, replayTopic, 5); !errors.As(err, &ue) || ue.Partition != 5 {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := c.Partitions(ctx, "missing"); !errors.As(err, &ue) {
		t.Fatalf("partitions of unknown topic: %v", err)
	}
	var oe *fetchcache.OffsetOutOfRangeError
	if _, err := c.ReadRaw(ctx, replayTopic, 1, d.LogEnd+5, 0); !errors.As(err, &oe) || oe.Offset != d.LogEnd+5 || oe.LogEnd != d.LogEnd || oe.LogStart != 0 {
		t.Fatalf("past the end: %v (%+v)", err, oe)
	}
}

// TestClientThrottle: 429 answers are retried after Retry-After while the
// budget lasts; then *httpapi.ThrottledError. Other errors are typed.
