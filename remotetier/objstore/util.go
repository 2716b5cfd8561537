package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// checkCondition decides a Put precondition against the current state.
// etag is called only when the object exists and an IfMatch needs it.
func checkCondition(cond Condition, exists bool, etag func() string) error {
	switch cond.kind {
	case condIfAbsent:
		if exists {
			return errors.New("object already exists")
		}
	case condIfMatch:
		if !exists {
			return errors.New("object does not exist")
		}
		if cur := etag(); cur != cond.etag {
			return fmt.Errorf("current etag %s, want %s", cur, cond.etag)
		}
	}
	return nil
}

func sizeErr(want, got int64) error {
	if got > want {
		return fmt.Errorf("reader yielded more than the declared %d bytes", want)
	}
	return fmt.Errorf("reader yielded %d bytes, declared %d", got, want)
}

// readerWithContext stops a copy loop once ctx is done.
func readerWithContext(ctx context.Context, r io.Reader) io.Reader {
	if ctx.Done() == nil {
		return r
	}
	return ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type attrsReadCloser struct {
	io.ReadCloser
	attrs Attrs
}

func (r *attrsReadCloser) Attrs() Attrs { return r.attrs }

// keepAttrs returns wrapped, still offering inner's Attrs when inner had
// them, so wrappers never hide (or invent) the attributes of a Get.
func keepAttrs(inner, wrapped io.ReadCloser) io.ReadCloser {
	if ar, ok := inner.(AttrsReader); ok {
		return &attrsReadCloser{ReadCloser: wrapped, attrs: ar.Attrs()}
	}
	return wrapped
}
