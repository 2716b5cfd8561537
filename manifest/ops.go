package manifest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
)

// Default sealing policy. A segment entry is about 800 bytes of JSON, a
// sub-manifest reference about 330. A root holds at most 256 segments inline
// (about 200 KB) and one reference per 256 older segments; a sealed
// sub-manifest about 200 KB. Serving an offset of a partition with 100,000
// segments reads at most about 530 KB (docs/format/manifest.md).
const (
	DefaultInlineMax   = 256
	DefaultSubSegments = 256
)

// Policy says when the root's inline segments are sealed into sub-manifests.
type Policy struct {
	// InlineMax is the most segments the root holds inline. A commit that
	// leaves more seals the oldest SubSegments at a time into new
	// sub-manifests until at most InlineMax remain.
	InlineMax int
	// SubSegments is the number of segments per sealed sub-manifest, at
	// most InlineMax.
	SubSegments int
}

// DefaultPolicy returns DefaultInlineMax and DefaultSubSegments.
func DefaultPolicy() Policy {
	return Policy{InlineMax: DefaultInlineMax, SubSegments: DefaultSubSegments}
}

// Validate checks 1 <= SubSegments <= InlineMax.
func (p Policy) Validate() error {
	if p.SubSegments < 1 || p.SubSegments > p.InlineMax {
		return fmt.Errorf("manifest policy: want 1 <= SubSegments (%d) <= InlineMax (%d)", p.SubSegments, p.InlineMax)
	}
	return nil
}

// NewSub is a sub-manifest a commit created: Data must be stored at Ref.Key
// (if absent: the key names the content) before the commit's root.
type NewSub struct {
	Ref  SubRef
	Data []byte
}

// Commit is the result of a commit function.
//
// Protocol: the data objects of new segments are already stored; store every
// Subs entry; then write Root (EncodeRoot) at its key with a conditional
// write (If-None-Match: * when the previous manifest had generation 0,
// If-Match its ETag otherwise). On a lost race re-read the manifest and redo
// the commit from it. Only after Root is stored may Unreferenced keys be
// deleted.
type Commit struct {
	Root *Manifest
	Subs []NewSub
	// Unreferenced lists, sorted, the keys (segment objects and
	// sub-manifests) that the previous manifest referenced and Root does not.
	Unreferenced []string
}

// Append commits segs (in offset order) after the last committed segment.
// A segment that starts below the end of the committed segments, or ends
// below the log start offset, is a *ConflictError: use Reconcile to decide
// about a candidate first, Replace to rewrite committed offsets. Gaps are
// allowed, and so is a first segment (of a manifest without segments) that
// starts below the log start offset: offsets below the log start are not
// served. Append does no I/O.
func Append(m *Manifest, p Policy, segs ...Segment) (*Commit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	end, haveEnd := m.segmentsEnd()
	for _, s := range segs {
		switch {
		case haveEnd && s.BaseOffset < end:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset, Reason: fmt.Sprintf(
				"starts below %d, the end of the committed segments; only Replace may rewrite committed offsets", end)}
		case s.LastOffset < m.LogStartOffset:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset,
				Reason: fmt.Sprintf("entirely below the log start offset %d", m.LogStartOffset)}
		}
		end, haveEnd = max(end, s.LastOffset+1), true
	}
	inline := append(slices.Clone(m.Segments), segs...)
	sealed, inline, subs, err := seal(m, p, slices.Clone(m.Sealed), inline)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	return finish(m, m.LogStartOffset, sealed, inline, subs, nil)
}

// Replace commits segs (compacted segments, in offset order) in place of
// every committed segment inside [from, to], in one commit. Every new
// segment must lie inside [from, to]; a committed segment that straddles
// from or to is a *ConflictError (a replace never cuts a segment). Gaps
// inside the range are allowed, but the end of the committed offsets never
// moves back: a replace of the newest segments must keep one ending where
// they ended (Kafka's cleaner keeps the last batch), or an uploader would
// offer those offsets again. A recorded gap loses the offsets a new
// segment holds: the source had them (a compacted partition's cleaner hole
// taken for a loss before the uploader knew it compacted). segs may be empty: a range the cleaner
// emptied loses its segments and becomes a compaction gap (the log start
// offset stays). Sealed sub-manifests holding replaced segments are loaded
// through r and rewritten as new immutable objects.
func Replace(ctx context.Context, r Resolver, m *Manifest, p Policy, from, to int64, segs []Segment) (*Commit, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if from < 0 || from > to {
		return nil, fmt.Errorf("replace: bad range [%d, %d]", from, to)
	}
	prev := from - 1
	for _, s := range segs {
		switch {
		case s.BaseOffset < from || s.LastOffset > to:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset,
				Reason: fmt.Sprintf("outside the replaced range [%d, %d]", from, to)}
		case s.BaseOffset <= prev:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset,
				Reason: "replacement segments overlap or are out of order"}
		case s.LastOffset < m.LogStartOffset:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset,
				Reason: fmt.Sprintf("entirely below the log start offset %d", m.LogStartOffset)}
		}
		prev = s.LastOffset
	}
	i0 := sort.Search(len(m.Sealed), func(i int) bool { return m.Sealed[i].LastOffset >= from })
	i1 := sort.Search(len(m.Sealed), func(i int) bool { return m.Sealed[i].BaseOffset > to })
	// The region rewritten: the sub-manifests overlapping [from, to] and,
	// when no sub-manifest follows the range, the inline segments.
	inlineTouched := i1 == len(m.Sealed)
	oldKeys := map[string]bool{}
	var region []Segment
	for i := i0; i < i1; i++ {
		sub, err := m.LoadSub(ctx, r, i)
		if err != nil {
			return nil, fmt.Errorf("replace: %w", err)
		}
		oldKeys[m.Sealed[i].Key] = true
		region = append(region, sub.Segments...)
	}
	if inlineTouched {
		region = append(region, m.Segments...)
	}
	var before, after []Segment
	for _, s := range region {
		for _, k := range s.Keys() {
			oldKeys[k] = true
		}
		switch {
		case s.LastOffset < from:
			before = append(before, s)
		case s.BaseOffset > to:
			after = append(after, s)
		case s.BaseOffset < from || s.LastOffset > to:
			return nil, &ConflictError{Base: s.BaseOffset, Last: s.LastOffset,
				Reason: fmt.Sprintf("committed segment straddles a boundary of the replaced range [%d, %d]", from, to)}
		}
	}
	merged := slices.Concat(before, segs, after)
	var sealed []SubRef
	var inline []Segment
	var subs []NewSub
	var err error
	if inlineTouched {
		sealed, inline, subs, err = seal(m, p, slices.Clone(m.Sealed[:i0]), merged)
		if err != nil {
			return nil, fmt.Errorf("replace: %w", err)
		}
	} else {
		sealed = slices.Clone(m.Sealed[:i0])
		for chunk := range slices.Chunk(merged, p.SubSegments) {
			ns, err := makeSub(m, chunk)
			if err != nil {
				return nil, fmt.Errorf("replace: %w", err)
			}
			sealed = append(sealed, ns.Ref)
			subs = append(subs, ns)
		}
		sealed = append(sealed, m.Sealed[i1:]...)
		inline = slices.Clone(m.Segments)
	}
	newKeys := map[string]bool{}
	for _, s := range merged {
		for _, k := range s.Keys() {
			newKeys[k] = true
		}
	}
	for _, ns := range subs {
		newKeys[ns.Ref.Key] = true
	}
	// A sub-manifest with unchanged content has an unchanged key: it is
	// neither written again nor unreferenced.
	subs = slices.DeleteFunc(subs, func(ns NewSub) bool { return oldKeys[ns.Ref.Key] })
	base := m
	if gaps := gapsOutside(m.Gaps, segs); !slices.Equal(gaps, m.Gaps) {
		cp := *m
		cp.Gaps = gaps
		base = &cp
	}
	c, err := finish(base, m.LogStartOffset, sealed, inline, subs, minus(oldKeys, newKeys))
	if err == nil && c.Root.NextOffset() < m.NextOffset() {
		return nil, &ConflictError{Base: from, Last: to, Reason: fmt.Sprintf(
			"the replace would move the end of the committed offsets back from %d to %d; keep a segment ending at %d",
			m.NextOffset(), c.Root.NextOffset(), m.NextOffset()-1)}
	}
	return c, err
}

// RemoveBelow raises the log start offset to newStart (remote retention) and
// drops every segment whose offsets are all below it; the segment holding
// newStart stays. Sealed sub-manifests wholly below are loaded through r to
// list their objects; one straddling newStart is rewritten. A newStart below
// the current log start is an error: the log start never moves back.
func RemoveBelow(ctx context.Context, r Resolver, m *Manifest, newStart int64) (*Commit, error) {
	if newStart < m.LogStartOffset {
		return nil, fmt.Errorf("remove below %d: the log start offset is already %d", newStart, m.LogStartOffset)
	}
	unref := map[string]bool{}
	drop := func(s Segment) {
		for _, k := range s.Keys() {
			unref[k] = true
		}
	}
	i0 := sort.Search(len(m.Sealed), func(i int) bool { return m.Sealed[i].LastOffset >= newStart })
	for i := range i0 {
		sub, err := m.LoadSub(ctx, r, i)
		if err != nil {
			return nil, fmt.Errorf("remove below %d: %w", newStart, err)
		}
		unref[m.Sealed[i].Key] = true
		for _, s := range sub.Segments {
			drop(s)
		}
	}
	var sealed []SubRef
	var subs []NewSub
	if i0 < len(m.Sealed) && m.Sealed[i0].BaseOffset < newStart {
		sub, err := m.LoadSub(ctx, r, i0)
		if err != nil {
			return nil, fmt.Errorf("remove below %d: %w", newStart, err)
		}
		k := sort.Search(len(sub.Segments), func(j int) bool { return sub.Segments[j].LastOffset >= newStart })
		if k == 0 {
			sealed = append(sealed, m.Sealed[i0])
		} else {
			for _, s := range sub.Segments[:k] {
				drop(s)
			}
			ns, err := makeSub(m, sub.Segments[k:])
			if err != nil {
				return nil, fmt.Errorf("remove below %d: %w", newStart, err)
			}
			unref[m.Sealed[i0].Key] = true
			sealed = append(sealed, ns.Ref)
			subs = append(subs, ns)
		}
		i0++
	}
	sealed = append(sealed, m.Sealed[i0:]...)
	k := sort.Search(len(m.Segments), func(j int) bool { return m.Segments[j].LastOffset >= newStart })
	for _, s := range m.Segments[:k] {
		drop(s)
	}
	return finish(m, newStart, sealed, slices.Clone(m.Segments[k:]), subs, minus(unref, nil))
}

// Range is a candidate segment's offsets, inclusive.
type Range struct{ Base, Last int64 }

// Action is Reconcile's verdict.
type Action int

// Reconcile verdicts.
const (
	// ActionAppend: the candidate starts at or after the first uncommitted
	// offset; upload and Append it.
	ActionAppend Action = iota + 1
	// ActionSkip: every offset of the candidate is committed already (by
	// this uploader before a restart, by another uploader, or removed by
	// retention or compaction); do not upload it.
	ActionSkip
	// ActionConflict: the candidate starts inside the committed range and
	// extends beyond it, as when a new leader cut its segments at other
	// offsets. Committing it would give offsets [Base, Next) to two
	// segments. The uploader must upload a cut copy holding only the
	// candidate's batches from Next on (Next is a batch boundary on every
	// in-sync replica, since replicas copy batches byte for byte), or, when
	// no batch starts at Next, report the conflict and not commit.
	ActionConflict
)

func (a Action) String() string {
	switch a {
	case ActionAppend:
		return "append"
	case ActionSkip:
		return "skip"
	case ActionConflict:
		return "conflict"
	}
	return "unknown"
}

// Decision is Reconcile's answer: the verdict and the manifest's first
// uncommitted offset it was made against. Gap is true for an append that
// leaves offsets [Next, candidate.Base) uncommitted: expected after local
// compaction, a sign of lost data otherwise; the caller decides.
type Decision struct {
	Action Action
	Next   int64
	Gap    bool
}

// Reconcile decides what to do with a candidate segment against the
// committed manifest, so a restart, a lost race or a new leader never leaves
// an offset in two segments.
//
// The rules: a candidate ending below NextOffset is skipped. One starting at
// or after the end of the committed segments is appended, even if it starts
// below the log start offset (when there are no segments: retention removed
// them all, or none was ever committed), since no committed segment holds
// those offsets. Anything else overlaps a committed segment: conflict.
func Reconcile(committed *Manifest, candidate Range) Decision {
	next := committed.NextOffset()
	end, haveEnd := committed.segmentsEnd()
	switch {
	case candidate.Last < next:
		return Decision{Action: ActionSkip, Next: next}
	case !haveEnd || candidate.Base >= end:
		return Decision{Action: ActionAppend, Next: next, Gap: candidate.Base > next}
	}
	return Decision{Action: ActionConflict, Next: next}
}

// seal moves the oldest inline segments into new sub-manifests while more
// than p.InlineMax remain.
func seal(m *Manifest, p Policy, sealed []SubRef, inline []Segment) ([]SubRef, []Segment, []NewSub, error) {
	var subs []NewSub
	for len(inline) > p.InlineMax {
		ns, err := makeSub(m, inline[:p.SubSegments])
		if err != nil {
			return nil, nil, nil, err
		}
		sealed = append(sealed, ns.Ref)
		subs = append(subs, ns)
		inline = inline[p.SubSegments:]
	}
	return sealed, slices.Clone(inline), subs, nil
}

// makeSub encodes segs as a sub-manifest of m's partition.
func makeSub(m *Manifest, segs []Segment) (NewSub, error) {
	s := &SubManifest{Prefix: m.Prefix, Topic: m.Topic, Partition: m.Partition, TopicID: m.TopicID, Segments: slices.Clone(segs)}
	data, err := EncodeSub(s)
	if err != nil {
		return NewSub{}, err
	}
	sum := sha256.Sum256(data)
	key, err := subKey(m.Prefix, m.Topic, m.TopicID, m.Partition, segs[0].BaseOffset, segs[len(segs)-1].LastOffset, sum)
	if err != nil {
		return NewSub{}, err
	}
	return NewSub{Ref: summarize(key, int64(len(data)), SHA256Checksum(sum), segs), Data: data}, nil
}

// finish builds and validates the next root.
func finish(m *Manifest, logStart int64, sealed []SubRef, inline []Segment, subs []NewSub, unref []string) (*Commit, error) {
	root := &Manifest{Prefix: m.Prefix, Topic: m.Topic, Partition: m.Partition, TopicID: m.TopicID, Generation: m.Generation + 1,
		LogStartOffset: logStart, Sealed: sealed, Segments: inline, Gaps: gapsFrom(m.Gaps, logStart), OpenTxns: slices.Clone(m.OpenTxns)}
	if err := root.Validate(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	root.idx = buildIndex(root.Sealed, root.Segments)
	return &Commit{Root: root, Subs: subs, Unreferenced: unref}, nil
}

// minus returns the keys of a not in b, sorted.
func minus(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
