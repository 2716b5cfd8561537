package manifest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// TestGapsRecorded: a gap appended with AppendLost survives encoding, is
// found by LostAt, makes reads inside it an out-of-range error, is carried by
// later commits and dropped once retention moves the log start past it.
func TestGapsRecorded(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	p := Policy{InlineMax: 2, SubSegments: 1}
	m := build(t, st, p, []Segment{testSeg(t, 0, 99, 1000), testSeg(t, 100, 199, 2000)}, 2)
	lost := Gap{BaseOffset: 200, LastOffset: 349, DetectedMs: 1_700_000_000_000}
	c, err := AppendLost(m, p, lost, testSeg(t, 350, 449, 3000))
	if err != nil {
		t.Fatal(err)
	}
	data := st.apply(t, c)
	if !bytes.Contains(data, []byte(`"gaps":[`)) {
		t.Fatalf("encoded root has no gaps field:\n%s", data)
	}
	got, err := DecodeRoot(c.Root.Key(), data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Gaps) != 1 || got.Gaps[0] != lost || got.LostOffsets() != 150 {
		t.Fatalf("decoded gaps %+v, want [%+v]", got.Gaps, lost)
	}
	for _, tc := range []struct {
		off  int64
		lost bool
	}{{199, false}, {200, true}, {300, true}, {349, true}, {350, false}} {
		if _, ok := got.LostAt(tc.off); ok != tc.lost {
			t.Errorf("LostAt(%d) = %v, want %v", tc.off, ok, tc.lost)
		}
	}
	e := &LostOffsetsError{Offset: 300, Gap: lost}
	if !errors.Is(e, ErrOffsetOutOfRange) || !errors.Is(e, kafkaerr.ErrOffsetOutOfRange) || !strings.Contains(e.Error(), "[200, 349]") {
		t.Fatalf("LostOffsetsError %q does not match offset out of range", e)
	}
	// A later append keeps the gap; retention below it keeps it; retention
	// past it drops it.
	c2, err := Append(got, p, testSeg(t, 450, 499, 4000))
	if err != nil {
		t.Fatal(err)
	}
	st.apply(t, c2)
	if len(c2.Root.Gaps) != 1 {
		t.Fatalf("append dropped the gap: %+v", c2.Root.Gaps)
	}
	c3, err := RemoveBelow(ctx, st, c2.Root, 150)
	if err != nil {
		t.Fatal(err)
	}
	if len(c3.Root.Gaps) != 1 {
		t.Fatalf("retention below the gap dropped it: %+v", c3.Root.Gaps)
	}
	c4, err := RemoveBelow(ctx, st, c3.Root, 400)
	if err != nil {
		t.Fatal(err)
	}
	if len(c4.Root.Gaps) != 0 {
		t.Fatalf("retention past the gap kept it: %+v", c4.Root.Gaps)
	}
	if data := st.apply(t, c4); bytes.Contains(data, []byte("gaps")) {
		t.Fatalf("a root without gaps spells the field:\n%s", data)
	}
}

// TestGapsRefused: gaps that overlap committed offsets, each other, or the
// segment they precede are refused, by AppendLost and by the decoder.
func TestGapsRefused(t *testing.T) {
	st := newMemStore()
	p := DefaultPolicy()
	m := build(t, st, p, []Segment{testSeg(t, 0, 99, 1000)}, 1)
	for _, tc := range []struct {
		name string
		gap  Gap
		next int64
	}{
		{"inside committed", Gap{BaseOffset: 50, LastOffset: 120}, 200},
		{"over the next segment", Gap{BaseOffset: 100, LastOffset: 200}, 200},
		{"not a range", Gap{BaseOffset: 150, LastOffset: 120}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := AppendLost(m, p, tc.gap, testSeg(t, tc.next, tc.next+9, 2000)); err == nil {
				t.Fatalf("AppendLost(%+v) succeeded", tc.gap)
			}
		})
	}
	c, err := AppendLost(m, p, Gap{BaseOffset: 100, LastOffset: 149}, testSeg(t, 150, 199, 2000))
	if err != nil {
		t.Fatal(err)
	}
	data := st.apply(t, c)
	for name, bad := range map[string]string{
		"overlapping segment": `{"base_offset":100,"last_offset":160,"detected_ms":0}`,
		"past the end":        `{"base_offset":100,"last_offset":149,"detected_ms":0},{"base_offset":300,"last_offset":310,"detected_ms":0}`,
		"out of order":        `{"base_offset":120,"last_offset":149,"detected_ms":0},{"base_offset":100,"last_offset":110,"detected_ms":0}`,
	} {
		t.Run(name, func(t *testing.T) {
			b := bytes.Replace(data, []byte(`{"base_offset":100,"last_offset":149,"detected_ms":0}`), []byte(bad), 1)
			var ce *CorruptManifestError
			if _, err := DecodeRoot(c.Root.Key(), b); !errors.As(err, &ce) || !strings.Contains(err.Error(), "gaps[") {
				t.Fatalf("DecodeRoot = %v, want a corrupt manifest naming the gap", err)
			}
		})
	}
}

// TestReplaceTrimsGapsItsSegmentsHold: a replacing segment holding offsets
// recorded lost (a compacted partition's cleaner hole taken for a loss)
// takes them out of the gap; the parts of the gap it does not hold stay,
// and a replace without segments keeps the gap whole.
func TestReplaceTrimsGapsItsSegmentsHold(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	p := DefaultPolicy()
	m := build(t, st, p, []Segment{testSeg(t, 0, 99, 1000)}, 1)
	lost := Gap{BaseOffset: 100, LastOffset: 199, DetectedMs: 1}
	c, err := AppendLost(m, p, lost, testSeg(t, 200, 299, 2000))
	if err != nil {
		t.Fatal(err)
	}
	st.apply(t, c)
	m = c.Root
	for _, tc := range []struct {
		name     string
		from, to int64
		segs     []Segment
		want     []Gap
	}{
		{"whole", 0, 299, []Segment{testSeg(t, 0, 299, 3000)}, nil},
		{"head", 0, 149, []Segment{testSeg(t, 0, 149, 3000)}, []Gap{{150, 199, 1}}},
		{"tail", 150, 299, []Segment{testSeg(t, 150, 299, 3000)}, []Gap{{100, 149, 1}}},
		{"inside", 0, 299, []Segment{testSeg(t, 0, 99, 3000), testSeg(t, 120, 129, 3000), testSeg(t, 200, 299, 3000)},
			[]Gap{{100, 119, 1}, {130, 199, 1}}},
		{"none held", 0, 99, nil, []Gap{lost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Replace(ctx, st, m, p, tc.from, tc.to, tc.segs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Root.Gaps, tc.want) {
				t.Fatalf("gaps %+v, want %+v", c.Root.Gaps, tc.want)
			}
			if len(m.Gaps) != 1 || m.Gaps[0] != lost {
				t.Fatalf("the replace changed the manifest it started from: %+v", m.Gaps)
			}
		})
	}
}
