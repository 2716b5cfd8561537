package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
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
	// instead of hanging the caller until its context ends. It also bounds
	// how long a connection may go without moving a byte while a request
	// body is sent or a response body read (a store that stalls half-way).
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
	hc := awshttp.NewBuildableClient()
	if check := dialCheck.Load(); check != nil {
		hc = hc.WithDialerOptions(func(d *net.Dialer) {
			d.Control = func(network, address string, _ syscall.RawConn) error { return (*check)(network, address) }
		})
	}
	opts := []func(*awsconfig.LoadOptions) error{
		// A buildable client lets the config apply AWS_CA_BUNDLE; its
		// transport is taken out below so Close can drop idle connections.
		// The credential chain's own clients (instance metadata, STS, SSO)
		// are built from it too.
		awsconfig.WithHTTPClient(hc),
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		// The SDK's default logger writes lines such as "SDK <time> WARN
		// falling back to IMDSv1: ..." to stderr, ahead of the one-line
		// error NewS3 returns for the same cause; they go to the default
		// slog logger at debug level instead (which tiered's commands do
		// not print).
		awsconfig.WithLogger(sdkLogger{}),
	}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.Credentials != nil {
		// Explicit credentials: nothing may ask the EC2 instance
		// metadata service (169.254.169.254), for credentials or region.
		opts = append(opts, awsconfig.WithCredentialsProvider(c.Credentials),
			awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled))
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
	// The same bound applies to a store that stops reading a request body
	// or stops sending a response body half-way, which the header timeout
	// does not cover: every connection fails once it has moved no byte
	// for that long while a read or write waits.
	if dial := tr.DialContext; dial != nil {
		stall := tr.ResponseHeaderTimeout
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: conn, stall: stall}, nil
		}
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

var dialCheck atomic.Pointer[func(network, address string) error]

// SetDialCheck makes every S3 client opened afterwards ask check before
// each connection it or its credential chain (instance metadata, STS, SSO)
// opens, with the resolved address ("169.254.169.254:80"); an error refuses
// the dial before anything is sent. nil removes the check. It returns the
// previous check. Tests use it to keep all traffic on loopback
// (testminio.Main installs one); tiered itself never sets it.
func SetDialCheck(check func(network, address string) error) (previous func(network, address string) error) {
	var p *func(string, string) error
	if check != nil {
		p = &check
	}
	if old := dialCheck.Swap(p); old != nil {
		return *old
	}
	return nil
}

// sdkLogger sends the SDK's log lines to slog at debug level.
type sdkLogger struct{}

func (sdkLogger) Logf(class logging.Classification, format string, v ...any) {
	slog.Debug("aws sdk: "+fmt.Sprintf(format, v...), "sdk_level", string(class))
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
	case code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable:
		kind = ErrInvalidRange
	case code == "AccessDenied" || status == http.StatusForbidden:
		kind = ErrAccessDenied
	}
	return &opError{op: op, key: key, kind: kind, err: err}
}

// mapPutErr is mapErr for PutObject and CompleteMultipartUpload: S3 (and
// MinIO) answer an If-Match on a missing key with 404 NoSuchKey, which for
// the caller is a lost precondition like any other.
//
// AWS answers 409 ConditionalRequestConflict when conditional writes to one
// key race, before either has finished. For If-Match the caller re-reads
// the ETag and retries, as after a lost race (what AWS advises). For
// If-None-Match it says nothing about whether the key exists, so it is no
// ErrPreconditionFailed (which would tell the caller the key exists, when
// the racing write may yet fail): a plain error, retried as any other.
func mapPutErr(key string, cond Condition, err error) error {
	var ae smithy.APIError
	conflict := errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
	err = mapErr("put", key, err)
	if _, ok := cond.MatchETag(); ok && (conflict || errors.Is(err, ErrNotFound)) {
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
	if length > math.MaxInt64-off {
		length = -1 // the range reaches past any object's end: to the end
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
	n, err := checkContentRange(off, length, aws.ToString(out.ContentRange), out.ContentLength)
	if err != nil {
		out.Body.Close()
		return nil, &opError{op: "get range", key: key, err: fmt.Errorf("asked %s: %w", rng, err)}
	}
	return &exactReader{rc: out.Body, left: n}, nil
}

// checkContentRange checks that the answer to a GetRange of length bytes
// at off (length < 0: to the end) is that range: its Content-Range must
// start at off and end where the range ends (cut at the object's end), and
// its Content-Length, when given, must agree. An answer without a
// Content-Range (a store or proxy that ignored the Range header and sent
// the whole object) is the range only when the range is the whole object.
// It returns how many bytes the body must have.
func checkContentRange(off, length int64, contentRange string, contentLength *int64) (int64, error) {
	if contentRange == "" {
		if off == 0 && contentLength != nil && *contentLength >= 0 && (length < 0 || length >= *contentLength) {
			return *contentLength, nil
		}
		return 0, errors.New("the store answered without a Content-Range (it ignored the Range header): check that no proxy or gateway in front of the bucket drops Range headers")
	}
	var first, last, total int64
	if _, err := fmt.Sscanf(contentRange, "bytes %d-%d/%d", &first, &last, &total); err != nil {
		return 0, fmt.Errorf("unusable Content-Range %q", contentRange)
	}
	end := total // exclusive end of the range asked, cut at the object's end
	if length >= 0 && off+length < total {
		end = off + length
	}
	n := last - first + 1
	if first != off || last != end-1 || n <= 0 {
		return 0, fmt.Errorf("the store answered Content-Range %q", contentRange)
	}
	if contentLength != nil && *contentLength >= 0 && *contentLength != n {
		return 0, fmt.Errorf("the store answered Content-Range %q with Content-Length %d", contentRange, *contentLength)
	}
	return n, nil
}

// exactReader yields exactly left bytes of rc: a body that ends sooner is
// io.ErrUnexpectedEOF, never a short success.
type exactReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *exactReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if err == io.EOF && r.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (r *exactReader) Close() error { return r.rc.Close() }

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
	// Keys come URL-encoded: XML 1.0 cannot carry most control
	// characters, and a listing with one would fail to decode.
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, EncodingType: s3types.EncodingTypeUrl}
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
			key := aws.ToString(o.Key)
			if page.EncodingType == s3types.EncodingTypeUrl {
				if key, err = url.QueryUnescape(key); err != nil {
					return &opError{op: "list", key: prefix, err: fmt.Errorf("undecodable key %q in the listing: %w", aws.ToString(o.Key), err)}
				}
			}
			if err := fn(ObjectInfo{Key: key, Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)}); err != nil {
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

// stallConn is a connection whose reads and writes fail once no byte has
// moved for stall: each read or write pushes the deadline of both
// directions stall ahead (a request written extends the wait for its
// answer on a read already pending, as net/http's on an idle connection).
type stallConn struct {
	net.Conn
	stall time.Duration
	armed atomic.Int64 // when the deadline was last moved (Unix ns)
}

// extend moves the deadline stall ahead, at most every quarter of stall (a
// stall fails after 3/4 to 1 × stall): a deadline per read or write would
// cost two timer updates for every socket read of every GET.
func (c *stallConn) extend() {
	now := time.Now()
	if last := c.armed.Load(); now.UnixNano()-last < int64(c.stall/4) {
		return
	}
	c.armed.Store(now.UnixNano())
	c.Conn.SetDeadline(now.Add(c.stall))
}

func (c *stallConn) Read(p []byte) (int, error) {
	c.extend()
	return c.Conn.Read(p)
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.extend()
	return c.Conn.Write(p)
}

// stallChunk is how much ReadFrom sends under one deadline.
const stallChunk = 1 << 20

// ReadFrom keeps the connection's own ReadFrom (sendfile of a request body
// from a file, see fileBodyTransport), in chunks of stallChunk bytes that
// each get a fresh deadline.
func (c *stallConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	// net/http hands a body limited to its length; sendfile looks
	// through one *io.LimitedReader only, so the chunks limit its R.
	src, left := r, int64(-1)
	if lr, ok := r.(*io.LimitedReader); ok {
		src, left = lr.R, lr.N
		defer func() { lr.N = left }()
	}
	var total int64
	for left != 0 {
		n := int64(stallChunk)
		if left > 0 && left < n {
			n = left
		}
		c.extend()
		k, err := rf.ReadFrom(&io.LimitedReader{R: src, N: n})
		total += k
		if left > 0 {
			left -= k
		}
		if err != nil || k < n {
			return total, err
		}
	}
	return total, nil
}

type s3Reader struct {
	io.ReadCloser
	attrs Attrs
}

func (r *s3Reader) Attrs() Attrs { return r.attrs }
