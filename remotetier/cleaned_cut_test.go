package remotetier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// memSource is a Source over segments held in memory (no index files: the
// uploader builds them).
type memSource struct {
	p    Partition
	logs map[int64][]byte // .log bytes by base offset
}

func (s *memSource) Partitions(context.Context) ([]Partition, error) { return []Partition{s.p}, nil }

func (s *memSource) Open(_ context.Context, _ Partition, seg SegmentMeta) (SegmentReader, error) {
	data, ok := s.logs[seg.BaseOffset]
	if !ok {
		return nil, fmt.Errorf("segment %d: %w", seg.BaseOffset, ErrSegmentGone)
	}
	return &memSegment{Reader: bytes.NewReader(data), data: data}, nil
}

type memSegment struct {
	*bytes.Reader
	data []byte
}

func (m *memSegment) Size() int64                        { return int64(len(m.data)) }
func (m *memSegment) LogReaderAt() (io.ReaderAt, error)  { return bytes.NewReader(m.data), nil }
func (m *memSegment) Unchanged() error                   { return nil }
func (m *memSegment) OffsetIndex() ([]byte, bool, error) { return nil, false, nil }
func (m *memSegment) TimeIndex() ([]byte, bool, error)   { return nil, false, nil }
func (m *memSegment) TxnIndex() ([]byte, bool, error)    { return nil, false, nil }
func (m *memSegment) Close() error                       { return nil }
func (s *memSource) segment(base, next, nextBase int64, data []byte) SegmentMeta {
	s.logs[base] = data
	return SegmentMeta{BaseOffset: base, NextOffset: next, NextBase: nextBase, Size: int64(len(data)), MaxTimestamp: upNow.UnixMilli()}
}

// TestUploadCleanedSegmentPastCommittedEnd: a compacted partition's leader
// changed. The new leader's cleaned segment starts inside a committed
// segment (its segments are cut elsewhere) and its cleaner removed the
// whole batch at the committed end. The uploader appends from the next
// batch (the offsets between are the cleaner's) instead of failing every
// pass on a cut no batch starts at.
func TestUploadCleanedSegmentPastCommittedEnd(t *testing.T) {
	ctx := context.Background()
	batch := func(base int64) []byte { return keyedBatch(t, base, 5) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	mem := objstore.NewMemory()
	part := cleanedPartition()

	// The old leader: [0, 10) and [10, 20) committed.
	old := &memSource{p: part, logs: map[int64][]byte{}}
	old.p.Segments = []SegmentMeta{old.segment(0, 10, 10, cat(batch(0), batch(5))), old.segment(10, 20, 20, cat(batch(10), batch(15)))}
	if _, err := upUploader(t, mem, old, Options{}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if m := upLoad(t, mem, "c", 0); m.NextOffset() != 20 {
		t.Fatalf("committed end %d, want 20", m.NextOffset())
	}
	// The new leader's cleaned segment starts at 15, inside [10, 20); its
	// cleaner removed the batch [20, 24].
	lead := &memSource{p: part, logs: map[int64][]byte{}}
	lead.p.Segments = []SegmentMeta{lead.segment(15, 30, 30, cat(batch(15), batch(25)))}
	for pass := range 2 {
		if _, err := upUploader(t, mem, lead, Options{}).RunOnce(ctx); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	m := upLoad(t, mem, "c", 0)
	if m.NextOffset() != 30 {
		t.Fatalf("committed end %d after the new leader's segment, want 30", m.NextOffset())
	}
	rl, err := remotelog.OpenRemoteLog(ctx, mem, "", "c", 0, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rl.Read(ctx, 20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIter(res.Data)
	b, ok := it.Next()
	if !ok || b.BaseOffset() != 25 {
		t.Fatalf("read at 20: first batch %v (ok %v), want the batch at 25", b.BaseOffset(), ok)
	}
}
