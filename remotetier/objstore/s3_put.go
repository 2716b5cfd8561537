package objstore

// Put for the S3 backend: single PutObject or multipart upload, part bodies
// taken from the caller's reader (file sections when it has them) with their
// CRC-32C checksums.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// CRC32CRanger is implemented by Put readers (io.ReaderAt + io.Seeker) that
// already know the CRC-32C (Castagnoli) of their bytes, such as a segment
// the uploader has just read to check it. CRC32CRange returns the checksum
// of the n bytes at off, counted from the reader's position when Put was
// called, and false when it does not know it (the backend then reads the
// bytes to compute it). The S3 backend uses it for the x-amz-checksum-crc32c
// of each request; the other backends need no checksum.
type CRC32CRanger interface {
	CRC32CRange(off, n int64) (sum uint32, ok bool)
}

// source hands out seekable part bodies from a Put's reader: sections of
// an io.ReaderAt when it has one (a file: nothing buffered), else buffers
// filled from the reader; each with its CRC-32C.
type source struct {
	r    io.Reader
	ra   io.ReaderAt  // nil when r is a plain reader
	sums CRC32CRanger // nil when r does not know its checksums
	base int64        // r's offset when ra != nil
	pos  int64        // bytes handed out so far
	// file, when set, is the file ra reads, ra's offset 0 being fileOff
	// in it: request bodies are then sent from it with sendfile.
	file    *os.File
	fileOff int64
}

func newSource(r io.Reader) *source {
	s := &source{r: r}
	ra, okRA := r.(io.ReaderAt)
	sk, okSK := r.(io.Seeker)
	if okRA && okSK {
		if cur, err := sk.Seek(0, io.SeekCurrent); err == nil {
			s.ra, s.base = ra, cur
			s.sums, _ = r.(CRC32CRanger)
			s.file, s.fileOff = fileUnder(r)
		}
	}
	return s
}

// fileUnder returns the file r reads by position and the file offset of
// r's offset 0: r itself, or the file under an io.SectionReader (or a type
// embedding one) over a file; nil for anything else.
func fileUnder(r io.Reader) (*os.File, int64) {
	if f, ok := r.(*os.File); ok {
		return f, 0
	}
	if o, ok := r.(interface {
		Outer() (io.ReaderAt, int64, int64)
	}); ok {
		if f, off, _ := o.Outer(); f != nil {
			if f, ok := f.(*os.File); ok {
				return f, off
			}
		}
	}
	return nil, 0
}

// next returns a body of up to want bytes, its length and its CRC-32C;
// n < want means the reader is exhausted. buf is used (and returned as
// body) only for plain readers.
func (s *source) next(ctx context.Context, want int64, buf []byte) (body io.ReadSeeker, n int64, sum uint32, err error) {
	if s.ra != nil {
		known := false
		if s.sums != nil {
			// Find how many bytes exist, reading nothing into memory,
			// and ask the reader for their checksum.
			if n, err = sectionLen(s.ra, s.base+s.pos, want); err != nil {
				return nil, 0, 0, err
			}
			sum, known = s.sums.CRC32CRange(s.pos, n)
		}
		if !known {
			// One pass over the section (page cache for a file) at
			// CRC-32C speed, which also finds its length.
			if n, sum, err = crcSection(s.ra, s.base+s.pos, want); err != nil {
				return nil, 0, 0, err
			}
		}
		body = io.NewSectionReader(s.ra, s.base+s.pos, n)
		if s.file != nil {
			body = &fileSection{SectionReader: body.(*io.SectionReader), f: s.file, off: s.fileOff + s.base + s.pos}
		}
	} else {
		k, err := io.ReadFull(readerWithContext(ctx, s.r), buf[:want])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, 0, 0, err
		}
		n = int64(k)
		sum = crc32.Checksum(buf[:k], castagnoli)
		body = bytes.NewReader(buf[:k])
	}
	s.pos += n
	return body, n, sum, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// crcSection reads up to want bytes at off and returns how many exist and
// their CRC-32C.
func crcSection(ra io.ReaderAt, off, want int64) (n int64, sum uint32, err error) {
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	buf := *bp
	for n < want {
		k, err := ra.ReadAt(buf[:min(int64(len(buf)), want-n)], off+n)
		sum = crc32.Update(sum, castagnoli, buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return n, sum, nil
}

// crcHeader is the x-amz-checksum-crc32c value: base64 of the big-endian
// checksum.
func crcHeader(sum uint32) *string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return aws.String(base64.StdEncoding.EncodeToString(b[:]))
}

// unsignedPayload signs a request's payload as UNSIGNED-PAYLOAD (its
// x-amz-checksum-crc32c header protects it instead of a SHA-256).
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// sectionLen reports how many of want bytes at off can be read, probing
// with 1-byte reads (binary search over the file end would need Stat, which
// an io.ReaderAt does not offer).
func sectionLen(ra io.ReaderAt, off, want int64) (int64, error) {
	if want == 0 {
		return 0, nil
	}
	var one [1]byte
	if _, err := ra.ReadAt(one[:], off+want-1); err == nil {
		return want, nil
	} else if err != io.EOF {
		return 0, err
	}
	lo, hi := int64(0), want-1 // bytes [off, off+lo) exist; byte off+hi does not
	for lo < hi {
		mid := lo + (hi-lo+1)/2 // test byte off+mid-1
		if _, err := ra.ReadAt(one[:], off+mid-1); err == nil {
			lo = mid
		} else if err == io.EOF {
			hi = mid - 1
		} else {
			return 0, err
		}
	}
	return lo, nil
}

// exhausted reports whether the reader has no byte after the ones handed
// out (a Put with a declared size must not leave any).
func (s *source) exhausted(ctx context.Context) (bool, error) {
	var one [1]byte
	if s.ra != nil {
		_, err := s.ra.ReadAt(one[:], s.base+s.pos)
		if err == io.EOF {
			return true, nil
		}
		return false, err
	}
	n, err := io.ReadFull(readerWithContext(ctx, s.r), one[:])
	if n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		return true, nil
	}
	return false, err
}

func (b *S3) getBuf() []byte {
	if p, ok := b.bufPool.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, b.partSize)
}

func (b *S3) putBuf(buf []byte) { b.bufPool.Put(&buf) }

func applyCond(cond Condition, ifNoneMatch, ifMatch **string) {
	switch cond.kind {
	case condIfAbsent:
		*ifNoneMatch = aws.String("*")
	case condIfMatch:
		*ifMatch = aws.String(cond.etag)
	}
}

// Put implements Bucket. Objects up to PartSize go in one PutObject;
// larger ones (or unknown size past PartSize) use a multipart upload whose
// CompleteMultipartUpload carries the precondition. A failed multipart
// upload is aborted, so no part lingers.
func (b *S3) Put(ctx context.Context, key string, r io.Reader, size int64, cond Condition) (Attrs, error) {
	if err := validateKey(key); err != nil {
		return Attrs{}, &opError{op: "put", key: key, kind: ErrInvalidKey, err: err}
	}
	partSize := b.partSize
	if size > partSize*maxParts {
		partSize = (size + maxParts - 1) / maxParts
	}
	src := newSource(r)
	var buf []byte
	if src.ra == nil {
		buf = b.getBuf()
		if int64(len(buf)) < partSize {
			buf = make([]byte, partSize)
		}
		defer b.putBuf(buf)
	}
	want := partSize
	if size >= 0 && size < want {
		want = size
	}
	body, n, sum, err := src.next(ctx, want, buf)
	if err != nil {
		return Attrs{}, &opError{op: "put", key: key, err: err}
	}
	if n < partSize || size == partSize {
		// Everything fits one request.
		if size >= 0 && n != size {
			return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, n)}
		}
		if size >= 0 {
			if done, err := src.exhausted(ctx); err != nil {
				return Attrs{}, &opError{op: "put", key: key, err: err}
			} else if !done {
				return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, size+1)}
			}
		}
		in := &s3.PutObjectInput{Bucket: &b.bucket, Key: &key, Body: body, ContentLength: aws.Int64(n),
			ChecksumCRC32C: crcHeader(sum)}
		applyCond(cond, &in.IfNoneMatch, &in.IfMatch)
		var attempts atomic.Int32
		out, err := b.client.PutObject(withFileBody(ctx, body), in, unsignedPayload, countAttempts(&attempts))
		if err != nil {
			err = mapPutErr(key, cond, err)
			if IsPreconditionFailed(err) && attempts.Load() > 1 {
				// The SDK retried: the precondition may have failed
				// against this Put's own first attempt, which the store
				// committed before its answer was lost.
				if a, ok := b.ownWrite(ctx, key, n, in.ChecksumCRC32C); ok {
					return a, nil
				}
			}
			return Attrs{}, err
		}
		return Attrs{Size: n, ETag: aws.ToString(out.ETag), LastModified: b.now()}, nil
	}
	return b.putMultipart(ctx, key, src, body, n, sum, size, partSize, buf, cond)
}

func (b *S3) putMultipart(ctx context.Context, key string, src *source, first io.ReadSeeker, firstN int64, firstSum uint32, size, partSize int64, firstBuf []byte, cond Condition) (_ Attrs, err error) {
	created, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key,
		ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32c})
	if err != nil {
		return Attrs{}, mapErr("put", key, err)
	}
	uploadID := created.UploadId
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, aerr := b.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: uploadID})
			if aerr != nil {
				err = errors.Join(err, fmt.Errorf("abort multipart upload: %w", aerr))
			}
		}
	}()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		parts    []s3types.CompletedPart
		firstErr error
		wg       sync.WaitGroup
	)
	// Buffers cycle through free; the first part's buffer is firstBuf.
	free := make(chan []byte, b.partConc)
	slots := make(chan struct{}, b.partConc)
	upload := func(num int32, body io.ReadSeeker, n int64, sum uint32, buf []byte) {
		defer wg.Done()
		defer func() { <-slots }()
		crc := crcHeader(sum)
		out, err := b.client.UploadPart(withFileBody(pctx, body), &s3.UploadPartInput{Bucket: &b.bucket, Key: &key, UploadId: uploadID,
			PartNumber: aws.Int32(num), Body: body, ContentLength: aws.Int64(n), ChecksumCRC32C: crc}, unsignedPayload)
		if buf != nil {
			free <- buf
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = mapErr("put", key, fmt.Errorf("upload part %d: %w", num, err))
				cancel()
			}
			return
		}
		parts = append(parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumCRC32C: crc})
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}

	total := firstN
	slots <- struct{}{}
	wg.Add(1)
	go upload(1, first, firstN, firstSum, firstBuf)
	var readErr error
	allocated := 1
	for num := int32(2); ; num++ {
		if failed() != nil {
			break
		}
		want := partSize
		if size >= 0 && size-total < want {
			want = size - total
		}
		if want == 0 {
			break
		}
		if num > maxParts {
			readErr = fmt.Errorf("object larger than %d parts of %d bytes", maxParts, partSize)
			break
		}
		slots <- struct{}{}
		var buf []byte
		if src.ra == nil {
			select {
			case buf = <-free:
			default:
				if allocated < b.partConc {
					buf = make([]byte, partSize)
					allocated++
				} else {
					buf = <-free
				}
			}
		}
		body, n, sum, err := src.next(pctx, want, buf)
		if err != nil || n == 0 {
			<-slots
			if buf != nil {
				free <- buf
			}
			readErr = err
			break
		}
		total += n
		wg.Add(1)
		go upload(num, body, n, sum, buf)
		if n < want {
			break
		}
	}
	wg.Wait()
	if err := failed(); err != nil {
		return Attrs{}, err
	}
	if readErr != nil {
		return Attrs{}, &opError{op: "put", key: key, err: readErr}
	}
	if size >= 0 {
		if total != size {
			return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, total)}
		}
		if done, err := src.exhausted(ctx); err != nil {
			return Attrs{}, &opError{op: "put", key: key, err: err}
		} else if !done {
			return Attrs{}, &opError{op: "put", key: key, kind: ErrSizeMismatch, err: sizeErr(size, size+1)}
		}
	}
	sortParts(parts)
	in := &s3.CompleteMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: uploadID,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}
	applyCond(cond, &in.IfNoneMatch, &in.IfMatch)
	var attempts atomic.Int32
	out, err := b.client.CompleteMultipartUpload(ctx, in, countAttempts(&attempts))
	if err != nil {
		var ae smithy.APIError
		if attempts.Load() > 1 && (IsPreconditionFailed(mapPutErr(key, cond, err)) || errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload") {
			// The SDK retried: the first attempt may have completed the
			// upload before its answer was lost, and the retry found the
			// upload gone or the precondition lost to this very object.
			if a, ok := b.ownWrite(ctx, key, total, compositeCRC(parts)); ok {
				return a, nil
			}
		}
		return Attrs{}, mapPutErr(key, cond, err)
	}
	return Attrs{Size: total, ETag: aws.ToString(out.ETag), LastModified: b.now()}, nil
}

// countAttempts counts the attempts the SDK's retry loop makes of a call.
func countAttempts(n *atomic.Int32) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("tieredCountAttempts",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					n.Add(1)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// compositeCRC is the CRC-32C S3 gives a multipart object created with
// ChecksumAlgorithm CRC32C: the checksum of its parts' checksums, then
// "-" and the part count.
func compositeCRC(parts []s3types.CompletedPart) *string {
	var raw []byte
	for _, p := range parts {
		sum, err := base64.StdEncoding.DecodeString(aws.ToString(p.ChecksumCRC32C))
		if err != nil {
			return nil
		}
		raw = append(raw, sum...)
	}
	return aws.String(aws.ToString(crcHeader(crc32.Checksum(raw, castagnoli))) + "-" + strconv.Itoa(len(parts)))
}

// ownWrite reports whether the object at key is the size bytes of
// CRC-32C crc that a Put sent, and its attributes.
func (b *S3) ownWrite(ctx context.Context, key string, size int64, crc *string) (Attrs, bool) {
	if crc == nil {
		return Attrs{}, false
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key, ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil || aws.ToInt64(out.ContentLength) != size || out.ChecksumCRC32C == nil || aws.ToString(out.ChecksumCRC32C) != aws.ToString(crc) {
		return Attrs{}, false
	}
	return Attrs{Size: size, ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified)}, true
}

func sortParts(parts []s3types.CompletedPart) {
	slices.SortFunc(parts, func(a, b s3types.CompletedPart) int {
		return cmp.Compare(aws.ToInt32(a.PartNumber), aws.ToInt32(b.PartNumber))
	})
}
