package fetchcache

import (
	"context"
	"slices"

	"github.com/tiered/tiered/localtier/record"
)

// View is a read's whole record batches as parts, in order (a batch may
// span two parts), and the offset after the last batch. Parts may be a
// cache's shared memory: they must never be modified.
type View struct {
	Parts [][]byte
	Len   int   // total length of Parts
	Next  int64 // the offset after the last batch; the requested offset when empty

	// served, when set, is told of a cut (Served).
	served func(kept int, next int64)
}

// Served tells the partition that read v what its reader was sent of it:
// the first kept bytes of the read (counted from the read's first byte,
// also on a Prefix of it), the whole batches before offset next. When that
// is less than the read returned (a limit cut it), a remote partition's
// next read at next continues the sequential read without an offset index
// lookup (remotelog.RemoteLog.Served). Views of other partitions ignore it.
func (v View) Served(kept int, next int64) {
	if v.served != nil {
		v.served(kept, next)
	}
}

// Bytes returns the view as one slice: its only part as is, or a copy of
// the parts joined.
func (v View) Bytes() []byte {
	switch len(v.Parts) {
	case 0:
		return nil
	case 1:
		return v.Parts[0]
	}
	out := make([]byte, 0, v.Len)
	for _, p := range v.Parts {
		out = append(out, p...)
	}
	return out
}

// Prefix is the view of v's first n bytes (0 <= n <= v.Len), told of cuts
// as v is.
func (v View) Prefix(n int) View {
	out := View{Len: n, Next: v.Next, served: v.served}
	for _, p := range v.Parts {
		if n == 0 {
			break
		}
		k := min(n, len(p))
		out.Parts = append(out.Parts, p[:k])
		n -= k
	}
	return out
}

// Append is v followed by w, a read of the same partition that continued v
// at v.Next (its batches start there). A cut of the result (Served) is
// told to the read it falls in: v's for kept bytes within v, counted from
// v's first byte; w's for bytes past v, counted from w's first byte (all of
// v was then sent, and w's read continued it).
func (v View) Append(w View) View {
	switch {
	case v.Len == 0:
		return w
	case w.Len == 0:
		return v
	}
	out := View{Parts: slices.Concat(v.Parts, w.Parts), Len: v.Len + w.Len, Next: w.Next}
	if v.served != nil || w.served != nil {
		n := v.Len
		out.served = func(kept int, next int64) {
			if kept <= n {
				v.Served(kept, next)
				return
			}
			w.Served(kept-n, next)
		}
	}
	return out
}

// SharedReader is implemented by partitions that can serve a read as the
// memory their batches already lie in — a remote partition's cached chunks
// — so a response writes them without a copy. A chunk evicted while a
// response is written stays alive (garbage collected) until the write ends,
// so the memory outside the cache's budget is bounded by the responses in
// flight, as it would be with a copy per response.
type SharedReader interface {
	ReadView(ctx context.Context, offset int64, maxBytes int) (View, error)
}

// ReadView reads like part.Read, as a View: through SharedReader when the
// partition has it, else Read's bytes as the one part.
func ReadView(ctx context.Context, part Partition, offset int64, maxBytes int) (View, error) {
	if sr, ok := part.(SharedReader); ok {
		return sr.ReadView(ctx, offset, maxBytes)
	}
	data, err := part.Read(ctx, offset, maxBytes)
	if err != nil {
		return View{}, err
	}
	v := View{Len: len(data), Next: offset}
	if len(data) > 0 {
		v.Parts, v.Next = [][]byte{data}, LastBatchNext(data)
	}
	return v, nil
}

// ReadShared is part.Read for responses that only read the data before
// they are written (Kafka Fetch): batches that lie in one cached chunk are
// returned as that chunk's memory, without a copy; the result must not be
// modified.
func ReadShared(ctx context.Context, part Partition, offset int64, maxBytes int) ([]byte, error) {
	sr, ok := part.(SharedReader)
	if !ok {
		return part.Read(ctx, offset, maxBytes)
	}
	v, err := sr.ReadView(ctx, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	return v.Bytes(), nil
}

// LastBatchNext is the offset after the last whole batch of data, or -1
// when data holds none.
func LastBatchNext(data []byte) int64 {
	it := record.NewIter(data)
	next := int64(-1)
	for {
		b, ok := it.Next()
		if !ok {
			return next
		}
		next = b.NextOffset()
	}
}
