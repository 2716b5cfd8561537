package remotetier

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// setBrokerLogStart writes the broker's log-start-offset-checkpoint as a
// DeleteRecords leaves it: orders-0 starts at start.
func setBrokerLogStart(t testing.TB, dir string, start int64) {
	t.Helper()
	err := checkpoint.WriteOffsets(vfs.Default, filepath.Join(dir, checkpoint.LogStartOffsetFile),
		map[checkpoint.TopicPartition]int64{{Topic: "orders", Partition: 0}: start})
	if err != nil {
		t.Fatal(err)
	}
}

// A DeleteRecords moves the broker's log start past whole segments, which
// the broker deletes only at its next retention check. The sidecar must
// not upload those segments (Kafka serves none of their offsets any more):
// on the first commit the remote log starts at the source's log start, on
// a later one the deleted offsets are a gap, never served.
func TestSidecarLogStartPastWholeSegments(t *testing.T) {
	ctx := context.Background()
	t.Run("first commit", func(t *testing.T) {
		dir, _, l, view := upBrokerLog(t, 5)
		segs := l.Segments()
		start := segs[2].BaseOffset + 5 // segments 0 and 1 wholly below
		setBrokerLogStart(t, dir, start)
		mem := objstore.NewMemory()
		u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		m := upLoad(t, mem, "orders", 0)
		if m.LogStartOffset != start {
			t.Errorf("remote log start %d, want the source's %d", m.LogStartOffset, start)
		}
		for _, s := range upAllSegments(t, mem, m) {
			if s.LastOffset < start {
				t.Errorf("segment %d-%d, wholly below the source's log start %d, was uploaded", s.BaseOffset, s.LastOffset, start)
			}
		}
	})
	t.Run("later commit", func(t *testing.T) {
		dir, _, l, view := upBrokerLog(t, 5)
		segs := l.Segments()
		mem := objstore.NewMemory()
		// The first pass sees only the first segment below the high
		// watermark.
		u := upUploader(t, mem, hwSource{NewBrokerSource(view, nil), segs[1].BaseOffset}, Options{})
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		start := segs[3].BaseOffset + 5
		setBrokerLogStart(t, dir, start)
		u = upUploader(t, mem, NewBrokerSource(view, nil), Options{})
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		m := upLoad(t, mem, "orders", 0)
		for _, s := range upAllSegments(t, mem, m) {
			if s.BaseOffset >= segs[1].BaseOffset && s.LastOffset < start {
				t.Errorf("segment %d-%d, wholly below the source's log start %d, was uploaded", s.BaseOffset, s.LastOffset, start)
			}
		}
		if _, lost := m.LostAt(segs[2].BaseOffset); !lost {
			t.Errorf("offset %d, deleted at the source before its upload, is not a gap: %+v", segs[2].BaseOffset, m.Gaps)
		}
	})
}

// hwSource lowers every partition's high watermark to hw.
type hwSource struct {
	Source
	hw int64
}

func (s hwSource) Partitions(ctx context.Context) ([]Partition, error) {
	ps, err := s.Source.Partitions(ctx)
	for i := range ps {
		ps[i].HighWatermark = min(ps[i].HighWatermark, s.hw)
	}
	return ps, err
}
