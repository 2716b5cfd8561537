package fetchcache

import (
	"context"
)

// rawRead is what readRaw returns: whole batches as parts, and the offset
// after the last one.
type rawRead struct {
	parts [][]byte
	n     int
	next  int64 // the requested offset when parts is empty
}

// readRaw reads like part.Read for a raw response. A remote partition's
// batches come back as the cached chunk memory they lie in
// (remotetier.RemoteLog.ReadView), which the response writes without a
// copy; the parts must not be modified. A chunk evicted while a response
// is written stays alive (garbage collected) until the write ends, so the
// memory outside the cache's budget is bounded by the responses in flight,
// as it was with a copy per response. Other partitions go through Read.
func readRaw(ctx context.Context, part Partition, offset int64, maxBytes int) (rawRead, error) {
	rp, ok := part.(*remotePartition)
	if !ok {
		data, err := part.Read(ctx, offset, maxBytes)
		if err != nil {
			return rawRead{}, err
		}
		r := rawRead{n: len(data), next: offset}
		if len(data) > 0 {
			r.parts, r.next = [][]byte{data}, lastBatchNext(data)
		}
		return r, nil
	}
	// As remotePartition.Read: past the manifest's end, re-read it first.
	if offset > rp.log.LogEndOffset() {
		if err := rp.refresh(ctx, 0); err != nil {
			return rawRead{}, err
		}
	}
	v, err := rp.log.ReadView(ctx, offset, maxBytes)
	if err != nil {
		return rawRead{}, rp.mapErr(err)
	}
	return rawRead{parts: v.Parts, n: v.Len, next: v.NextOffset}, nil
}

// readShared is part.Read for responses that only read the data before
// they are written (Kafka Fetch): a remote partition's batches that lie in
// one cached chunk are returned as that chunk's memory, without a copy;
// the result must not be modified.
func readShared(ctx context.Context, part Partition, offset int64, maxBytes int) ([]byte, error) {
	if _, ok := part.(*remotePartition); !ok {
		return part.Read(ctx, offset, maxBytes)
	}
	rr, err := readRaw(ctx, part, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	switch len(rr.parts) {
	case 0:
		return nil, nil
	case 1:
		return rr.parts[0], nil
	}
	out := make([]byte, 0, rr.n)
	for _, p := range rr.parts {
		out = append(out, p...)
	}
	return out, nil
}
