package manifest

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// maxGaps bounds Manifest.Gaps: a root recording more holes than this is
// corrupt (each one is an alarm an operator acts on; a partition losing
// segments at every pass is stopped long before).
const maxGaps = 4096

// Gap is a range of offsets the remote tier will never hold: the source
// (a broker's retention, a DeleteRecords) deleted them before they were
// uploaded. A read inside it is answered as Kafka answers a deleted range,
// OFFSET_OUT_OF_RANGE (LostOffsetsError), never with the batches after it.
type Gap struct {
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"` // inclusive
	// DetectedMs is when the uploader found the offsets gone (Unix ms).
	DetectedMs int64 `json:"detected_ms"`
}

// LostOffsetsError reports a read of an offset inside a recorded Gap. It
// matches ErrOffsetOutOfRange (Kafka's answer for offsets the log no longer
// has, as RemoteLogManager answers an offset no remote segment holds).
type LostOffsetsError struct {
	Offset int64
	Gap    Gap
}

func (e *LostOffsetsError) Error() string {
	return fmt.Sprintf("offset %d out of range: offsets [%d, %d] were deleted at the source before they were uploaded (lost)",
		e.Offset, e.Gap.BaseOffset, e.Gap.LastOffset)
}

// Is makes errors.Is(err, ErrOffsetOutOfRange) true.
func (e *LostOffsetsError) Is(target error) bool {
	return target == ErrOffsetOutOfRange || target == kafkaerr.ErrOffsetOutOfRange
}

// LostAt returns the recorded gap holding offset, if any.
func (m *Manifest) LostAt(offset int64) (Gap, bool) {
	i := sort.Search(len(m.Gaps), func(i int) bool { return m.Gaps[i].LastOffset >= offset })
	if i < len(m.Gaps) && m.Gaps[i].BaseOffset <= offset {
		return m.Gaps[i], true
	}
	return Gap{}, false
}

// LostOffsets is the number of offsets in the recorded gaps.
func (m *Manifest) LostOffsets() int64 {
	var n int64
	for _, g := range m.Gaps {
		n += g.LastOffset - g.BaseOffset + 1
	}
	return n
}

// AppendLost is Append that also records lost as a gap: offsets the source
// deleted before they were uploaded, which must lie at or after the end of
// the committed segments and below the first of segs.
func AppendLost(m *Manifest, p Policy, lost Gap, segs ...Segment) (*Commit, error) {
	end := m.NextOffset()
	switch {
	case lost.BaseOffset > lost.LastOffset || lost.DetectedMs < 0:
		return nil, fmt.Errorf("append: bad gap [%d, %d]", lost.BaseOffset, lost.LastOffset)
	case lost.BaseOffset < end:
		return nil, &ConflictError{Base: lost.BaseOffset, Last: lost.LastOffset,
			Reason: fmt.Sprintf("a gap must start at or after %d, the end of the committed segments", end)}
	case len(segs) > 0 && lost.LastOffset >= segs[0].BaseOffset:
		return nil, &ConflictError{Base: lost.BaseOffset, Last: lost.LastOffset,
			Reason: fmt.Sprintf("a gap must end below the first appended segment (base offset %d)", segs[0].BaseOffset)}
	}
	withGap := *m
	withGap.Gaps = append(slices.Clone(m.Gaps), lost)
	return Append(&withGap, p, segs...)
}

// gapsFrom keeps the gaps that still lie (partly) at or above logStart.
func gapsFrom(gaps []Gap, logStart int64) []Gap {
	i := sort.Search(len(gaps), func(i int) bool { return gaps[i].LastOffset >= logStart })
	if i == len(gaps) {
		return nil
	}
	return slices.Clone(gaps[i:])
}

// gapsOutside is gaps without the offsets segs (in offset order) hold. A
// gap partly inside a segment keeps the parts outside it.
func gapsOutside(gaps []Gap, segs []Segment) []Gap {
	if len(gaps) == 0 || len(segs) == 0 {
		return gaps
	}
	out := make([]Gap, 0, len(gaps))
	for _, g := range gaps {
		parts := []Gap{g}
		for _, s := range segs {
			var next []Gap
			for _, p := range parts {
				if s.LastOffset < p.BaseOffset || s.BaseOffset > p.LastOffset {
					next = append(next, p)
					continue
				}
				if p.BaseOffset < s.BaseOffset {
					next = append(next, Gap{BaseOffset: p.BaseOffset, LastOffset: s.BaseOffset - 1, DetectedMs: p.DetectedMs})
				}
				if p.LastOffset > s.LastOffset {
					next = append(next, Gap{BaseOffset: s.LastOffset + 1, LastOffset: p.LastOffset, DetectedMs: p.DetectedMs})
				}
			}
			parts = next
		}
		out = append(out, parts...)
	}
	return out
}

// validateGaps checks the gaps are sorted, apart, below the end of the
// committed offsets, and clear of every inline segment.
func (m *Manifest) validateGaps() error {
	if len(m.Gaps) > maxGaps {
		return invalidf("%d gaps, more than %d", len(m.Gaps), maxGaps)
	}
	prevLast := int64(-1)
	next := m.NextOffset()
	for i, g := range m.Gaps {
		switch {
		case g.BaseOffset < 0 || g.LastOffset < g.BaseOffset:
			return invalidf("gaps[%d] [%d, %d] is not a range", i, g.BaseOffset, g.LastOffset)
		case g.BaseOffset <= prevLast:
			return invalidf("gaps[%d] [%d, %d] overlaps or precedes the gap before (last offset %d)", i, g.BaseOffset, g.LastOffset, prevLast)
		case g.LastOffset >= next:
			return invalidf("gaps[%d] [%d, %d] reaches the end of the committed offsets %d", i, g.BaseOffset, g.LastOffset, next)
		case g.LastOffset < m.LogStartOffset:
			return invalidf("gaps[%d] [%d, %d] is below the log start offset %d", i, g.BaseOffset, g.LastOffset, m.LogStartOffset)
		case g.DetectedMs < 0:
			return invalidf("gaps[%d] has negative detected_ms %d", i, g.DetectedMs)
		}
		prevLast = g.LastOffset
		j := sort.Search(len(m.Segments), func(j int) bool { return m.Segments[j].LastOffset >= g.BaseOffset })
		if j < len(m.Segments) && m.Segments[j].BaseOffset <= g.LastOffset {
			return invalidf("gaps[%d] [%d, %d] overlaps segment [%d, %d]", i, g.BaseOffset, g.LastOffset,
				m.Segments[j].BaseOffset, m.Segments[j].LastOffset)
		}
	}
	return nil
}
