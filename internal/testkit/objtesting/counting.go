package objtesting

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/tiered/tiered/remotetier/objstore"
)

// ReadCounter counts the reads (Get, GetRange, Attributes) made of the
// bucket it wraps, for tests that bound the requests a reader makes.
type ReadCounter struct {
	objstore.BucketReader
	reads atomic.Int64
}

// Reads is the number of reads so far.
func (b *ReadCounter) Reads() int64 { return b.reads.Load() }

func (b *ReadCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.reads.Add(1)
	return b.BucketReader.Get(ctx, key)
}

func (b *ReadCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	b.reads.Add(1)
	return b.BucketReader.GetRange(ctx, key, off, n)
}

func (b *ReadCounter) Attributes(ctx context.Context, key string) (objstore.Attrs, error) {
	b.reads.Add(1)
	return b.BucketReader.Attributes(ctx, key)
}
