package objstore

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
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3 defaults.
const (
	DefaultPartSize        = 16 << 20
	MinPartSize            = 5 << 20 // S3's minimum for every part but the last
	DefaultPartConcurrency = 2
	DefaultOpenTimeout     = 10 * time.Second
	// DefaultResponseHeaderTimeout is S3Config.ResponseHeaderTimeout's default.
	DefaultResponseHeaderTimeout = 60 * time.Second
	DefaultRegion                = "us-east-1"
	maxParts                     = 10000
)

// S3Config selects and tunes an S3-compatible bucket.
type S3Config struct {
	Bucket string
	// Endpoint is the service URL (http://127.0.0.1:9000); empty means AWS.
	Endpoint string
	// Region; empty means the AWS chain's region, else DefaultRegion.
	Region string
	// PathStyle addresses the bucket as endpoint/bucket (MinIO and most
	// S3-compatible stores) instead of bucket.endpoint.
	PathStyle bool
	// PartSize is the multipart part size and the largest object sent with
	// a single PutObject (default DefaultPartSize, at least MinPartSize).
	PartSize int64
	// PartConcurrency is how many parts of one object upload at once
	// (default DefaultPartConcurrency). A Put from a reader that is not an
	// io.ReaderAt buffers at most PartSize × PartConcurrency bytes; a Put
	// from a file (io.ReaderAt + io.Seeker) buffers nothing.
	PartConcurrency int
	// OpenTimeout bounds the credential lookup and HeadBucket done by
	// NewS3 (default DefaultOpenTimeout).
	OpenTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers once
	// a request is sent (default DefaultResponseHeaderTimeout), so a store
	// that stops answering fails the attempt (and the SDK retries it)
	// instead of hanging the caller until its context ends.
	ResponseHeaderTimeout time.Duration
	// Credentials overrides the standard AWS credential chain
	// (environment AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, shared files,
	// web identity, container and instance roles). Never logged.
	Credentials aws.CredentialsProvider
}

// S3 is the S3 backend (aws-sdk-go-v2). Multipart uploads are done here
// rather than with feature/s3/manager (deprecated) or transfermanager (v0,
// unstable API): the code is short, carries the Put precondition to
// CompleteMultipartUpload itself, uploads parts straight from an
// io.ReaderAt without buffering, and aborts the upload on any failure.
//
// Payload integrity: PutObject and UploadPart bodies are signed as
// UNSIGNED-PAYLOAD and carry an x-amz-checksum-crc32c header instead, which
// the store checks against the bytes it received before storing them (a
// mismatch fails the request). Over plain HTTP the SDK would otherwise hash
// every body with SHA-256 for the signature, reading it twice and costing
// about ten times the CPU of CRC-32C; over HTTPS it would send no checksum
// at all. Multipart uploads are created with ChecksumAlgorithm CRC32C so
// every part is checked. A Put reader that already knows the CRC-32C of its
// bytes (CRC32CRanger) spares the extra pass over them. A body that is a
// file, or an io.SectionReader over one, goes out with sendfile over plain
// HTTP (fileBodyTransport).
type S3 struct {
	client    *s3.Client
	transport *http.Transport
	bucket    string
	endpoint  string
	partSize  int64
	partConc  int
	bufPool   sync.Pool
	now       func() time.Time
}

// NewS3 builds the client and checks, within OpenTimeout, that credentials
// resolve and the bucket exists and is reachable, so a bad configuration
// fails at start-up with one clear line.
func NewS3(ctx context.Context, c S3Config) (*S3, error) {
	if c.Bucket == "" {
		return nil, errors.New("open s3 bucket: missing bucket name")
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < MinPartSize {
		return nil, fmt.Errorf("open s3 bucket %s: part size %d below the S3 minimum %d", c.Bucket, c.PartSize, MinPartSize)
	}
	if c.PartConcurrency <= 0 {
		c.PartConcurrency = DefaultPartConcurrency
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	opts := []func(*awsconfig.LoadOptions) error{
		// A buildable client lets the config apply AWS_CA_BUNDLE; its
		// transport is taken out below so Close can drop idle connections.
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient()),
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(c.Credentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("open s3 bucket %s: load AWS config: %w", c.Bucket, err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return nil, fmt.Errorf("open s3 bucket %s: unexpected HTTP client %T", c.Bucket, cfg.HTTPClient)
	}
	tr := bc.GetTransport()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = c.ResponseHeaderTimeout
	if tr.ResponseHeaderTimeout <= 0 {
		tr.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	cfg.HTTPClient = &http.Client{
		Transport: fileBodyTransport{tr},
		// Like the SDK's own client: S3 redirects are errors to report.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.PathStyle
	})
	b := &S3{client: client, transport: tr, bucket: c.Bucket, endpoint: c.Endpoint,
		partSize: c.PartSize, partConc: c.PartConcurrency, now: time.Now}
	if b.endpoint == "" {
		b.endpoint = "AWS S3 (" + cfg.Region + ")"
	}

	octx, cancel := context.WithTimeout(ctx, c.OpenTimeout)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(octx); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("open s3 bucket %s: no usable AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or configure the AWS credential chain): %s", c.Bucket, rootCause(err))
	}
	if _, err := client.HeadBucket(octx, &s3.HeadBucketInput{Bucket: aws.String(c.Bucket)}); err != nil {
		tr.CloseIdleConnections()
		return nil, b.openError(err, c.OpenTimeout)
	}
	return b, nil
}

func (b *S3) openError(err error, timeout time.Duration) error {
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ne net.Error
	switch {
	case status == http.StatusNotFound:
		return fmt.Errorf("open s3 bucket %s at %s: %w", b.bucket, b.endpoint, ErrBucketNotFound)
	case status == http.StatusForbidden:
		return fmt.Errorf("open s3 bucket %s: access denied at %s (check the credentials and the bucket policy)", b.bucket, b.endpoint)
	case status == http.StatusMovedPermanently:
		return fmt.Errorf("open s3 bucket %s: the bucket is in another region (set region=)", b.bucket)
	case status == http.StatusBadRequest:
		return fmt.Errorf("open s3 bucket %s: bad request at %s (wrong region or invalid bucket name?)", b.bucket, b.endpoint)
	case status != 0:
		return fmt.Errorf("open s3 bucket %s: %s answered HTTP %d", b.bucket, b.endpoint, status)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("open s3 bucket %s: endpoint %s did not answer within %s", b.bucket, b.endpoint, timeout)
	case errors.As(err, &ne):
		return fmt.Errorf("open s3 bucket %s: cannot reach endpoint %s: %s", b.bucket, b.endpoint, rootCause(err))
	}
	return fmt.Errorf("open s3 bucket %s at %s: %s", b.bucket, b.endpoint, rootCause(err))
}

// rootCause returns the innermost error's message: the SDK's wrapping
// repeats operation names and request ids that only lengthen the line.
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// mapErr turns an SDK error into an opError recognisable by errors.Is.
func mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &opError{op: op, key: key, err: err}
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var kind error
	switch {
	case code == "NoSuchBucket":
		kind = ErrBucketNotFound
	case code == "NoSuchKey" || code == "NotFound" || (status == http.StatusNotFound && code != "NoSuchUpload"):
		kind = ErrNotFound
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		kind = ErrPreconditionFailed
	case code == "ConditionalRequestConflict":
		// AWS: a concurrent conditional write to the same key; another
		// writer is winning. The caller re-reads as after any lost race.
		kind = ErrPreconditionFailed
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		kind = ErrInvalidRange
	}
	return &opError{op: op, key: key, kind: kind, err: err}
}

// mapPutErr is mapErr for PutObject and CompleteMultipartUpload: S3 (and
// MinIO) answer an If-Match on a missing key with 404 NoSuchKey, which for
// the caller is a lost precondition like any other.
func mapPutErr(key string, cond Condition, err error) error {
	err = mapErr("put", key, err)
	if _, ok := cond.MatchETag(); ok && errors.Is(err, ErrNotFound) {
		var oe *opError
		if errors.As(err, &oe) {
			return &opError{op: oe.op, key: oe.key, kind: ErrPreconditionFailed, err: oe.err}
		}
	}
	return err
}

// Get implements BucketReader.
func (b *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := validateKey(key); err != nil {
		return nil, &opError{op: "get", key: key, kind: ErrInvalidKey, err: err}
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return nil, mapErr("get", key, err)
	}
	return &s3Reader{ReadCloser: out.Body, attrs: Attrs{
		Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified),
	}}, nil
}

// GetRange implements BucketReader. S3 answers 416 for any range starting
// at or after the end; those cases (and length 0) are resolved with a
// HeadObject so that off == size gives an empty reader as on the other
// backends.
func (b *S3) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := validateKey(key); err != nil {
		return nil, &opError{op: "get range", key: key, kind: ErrInvalidKey, err: err}
	}
	if err := checkRange(key, off, length); err != nil {
		return nil, err
	}
	emptyOrInvalid := func() (io.ReadCloser, error) {
		attrs, err := b.Attributes(ctx, key)
		if err != nil {
			return nil, err
		}
		if _, err := clampRange(key, attrs.Size, off, length); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if length == 0 {
		return emptyOrInvalid()
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-"
	if length > 0 {
		rng += strconv.FormatInt(off+length-1, 10)
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key, Range: &rng})
	if err != nil {
		err = mapErr("get range", key, err)
		if errors.Is(err, ErrInvalidRange) {
			return emptyOrInvalid()
		}
		return nil, err
	}
	return out.Body, nil
}

// Attributes implements BucketReader.
func (b *S3) Attributes(ctx context.Context, key string) (Attrs, error) {
	if err := validateKey(key); err != nil {
		return Attrs{}, &opError{op: "attributes", key: key, kind: ErrInvalidKey, err: err}
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return Attrs{}, mapErr("attributes", key, err)
	}
	return Attrs{Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified)}, nil
}

// List implements BucketReader (ListObjectsV2, which S3 returns in UTF-8
// binary key order).
func (b *S3) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket}
	if prefix != "" {
		in.Prefix = &prefix
	}
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return mapErr("list", prefix, err)
		}
		for _, o := range page.Contents {
			if err := fn(ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements Bucket. S3 DeleteObject already succeeds on a missing
// key.
func (b *S3) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return &opError{op: "delete", key: key, kind: ErrInvalidKey, err: err}
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		err = mapErr("delete", key, err)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
	}
	return err
}

// BucketName returns the S3 bucket's name.
func (b *S3) BucketName() string { return b.bucket }

// Close implements Bucket: it drops idle connections.
func (b *S3) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

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
		out, err := b.client.PutObject(withFileBody(ctx, body), in, unsignedPayload)
		if err != nil {
			return Attrs{}, mapPutErr(key, cond, err)
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
	out, err := b.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return Attrs{}, mapPutErr(key, cond, err)
	}
	return Attrs{Size: total, ETag: aws.ToString(out.ETag), LastModified: b.now()}, nil
}

func sortParts(parts []s3types.CompletedPart) {
	slices.SortFunc(parts, func(a, b s3types.CompletedPart) int {
		return cmp.Compare(aws.ToInt32(a.PartNumber), aws.ToInt32(b.PartNumber))
	})
}

type s3Reader struct {
	io.ReadCloser
	attrs Attrs
}

func (r *s3Reader) Attrs() Attrs { return r.attrs }

// Request bodies from files, by sendfile.
//
// The SDK hands net/http its own wrapper of a request body, so even a
// section of a file goes out through a 32 KiB buffer: the bytes are read
// from the page cache into memory and written to the socket in 32 KiB
// system calls, for every request. When a Put's body is a section of a
// file, the request's context names it, and fileBodyTransport gives net/http
// a private descriptor of the same file positioned at the section instead,
// which net/http sends with sendfile(2): no copy through this process and
// a few system calls per request. The bytes sent are those the body's
// x-amz-checksum-crc32c was computed over (the store rejects any other), so
// a file changed meanwhile fails the request as it would have anyway.

// fileSection is a request body that is n bytes at off of f.
type fileSection struct {
	*io.SectionReader
	f   *os.File
	off int64
}

type fileBodyKey struct{}

// withFileBody returns ctx naming body, when it is a fileSection, as the
// body of the request made with it.
func withFileBody(ctx context.Context, body io.Reader) context.Context {
	if sec, ok := body.(*fileSection); ok && sendfileBodies {
		return context.WithValue(ctx, fileBodyKey{}, sec)
	}
	return ctx
}

// sendfileBodies: only Linux reopens a descriptor as an independent file
// description through /proc/self/fd.
var sendfileBodies = runtime.GOOS == "linux"

// fileBodyTransport sends the body of a plain-HTTP request whose context
// names a fileSection (withFileBody) of the same length from a private
// descriptor of that file (see above); any other request, or one whose file
// cannot be reopened, goes out as it is.
type fileBodyTransport struct {
	http.RoundTripper
}

func (t fileBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sec, ok := req.Context().Value(fileBodyKey{}).(*fileSection)
	if !ok || req.Body == nil || req.URL.Scheme != "http" || req.ContentLength != sec.Size() {
		return t.RoundTripper.RoundTrip(req)
	}
	f, err := reopenAt(sec.f, sec.off)
	if err != nil {
		return t.RoundTripper.RoundTrip(req)
	}
	r := new(http.Request)
	*r = *req
	r.Body = &sectionFile{f: f, end: sec.off + sec.Size()}
	r.GetBody = nil
	req.Body.Close() // never read; r's body is closed by the transport
	return t.RoundTripper.RoundTrip(r)
}

// reopenAt opens f again, as a file description of its own (its own
// offset), and positions it at off.
func reopenAt(f *os.File, off int64) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var g *os.File
	var oerr error
	// Inside Control the descriptor cannot be closed and reused.
	if err := rc.Control(func(fd uintptr) {
		g, oerr = os.Open("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, oerr
	}
	a, err1 := f.Stat()
	b, err2 := g.Stat()
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		g.Close()
		return nil, errors.New("reopened another file")
	}
	if _, err := g.Seek(off, io.SeekStart); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// sectionFile reads a file from its offset up to end. net/http finds its
// descriptor through syscall.Conn and sends it with sendfile; Read serves
// the few bytes it reads itself (to fill a buffer after the headers, and to
// check the body holds no more than its length).
type sectionFile struct {
	f   *os.File
	end int64
}

func (s *sectionFile) Read(p []byte) (int, error) {
	pos, err := s.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	if pos >= s.end {
		return 0, io.EOF
	}
	if rest := s.end - pos; int64(len(p)) > rest {
		p = p[:rest]
	}
	return s.f.Read(p)
}

func (s *sectionFile) SyscallConn() (syscall.RawConn, error) { return s.f.SyscallConn() }
func (s *sectionFile) Close() error                          { return s.f.Close() }
