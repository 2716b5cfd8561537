package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/minio/minio-go/v7"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

func minioGet(t *testing.T, c *minio.Client, bucket, key string) ([]byte, minio.ObjectInfo) {
	t.Helper()
	ctx := context.Background()
	info, err := c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("minio-go stat %s: %v", key, err)
	}
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("minio-go get %s: %v", key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("minio-go read %s: %v", key, err)
	}
	return data, info
}

// TestS3VerifiedByMinioGo checks with an independent client that what the
// S3 backend writes is there byte for byte, and the other way round.
func TestS3VerifiedByMinioGo(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Shared(t)
	mc := srv.Client()
	b := objtesting.NewMinIOBucket(t)
	name := b.BucketName()

	small := objtesting.Pattern(21, 1000)
	big := objtesting.Pattern(22, 11<<20+3) // three parts
	for _, c := range []struct {
		key       string
		data      []byte
		src       io.Reader
		wantParts int // 0: single PutObject
	}{
		{"v/small", small, bytes.NewReader(small), 0},
		{"v/big-plain", big, io.MultiReader(bytes.NewReader(big)), 3},
		{"v/big-file", big, nil, 3},
		{"v/big-ifabsent", big, io.MultiReader(bytes.NewReader(big)), 3},
	} {
		src := c.src
		if src == nil {
			f := objtesting.TempFile(t, c.data)
			defer f.Close()
			src = f
		}
		cond := objstore.Condition{}
		if strings.HasSuffix(c.key, "ifabsent") {
			cond = objstore.IfAbsent()
		}
		a, err := b.Put(ctx, c.key, src, int64(len(c.data)), cond)
		if err != nil {
			t.Fatalf("put %s: %v", c.key, err)
		}
		got, info := minioGet(t, mc, name, c.key)
		if !bytes.Equal(got, c.data) {
			t.Fatalf("%s: minio-go read %d bytes that differ from the %d put", c.key, len(got), len(c.data))
		}
		if `"`+info.ETag+`"` != a.ETag || info.Size != int64(len(c.data)) {
			t.Errorf("%s: minio-go sees etag %s size %d; Put returned %+v", c.key, info.ETag, info.Size, a)
		}
		wantSuffix := ""
		if c.wantParts > 0 {
			wantSuffix = fmt.Sprintf("-%d", c.wantParts)
		}
		if c.wantParts > 0 && !strings.HasSuffix(info.ETag, wantSuffix) || c.wantParts == 0 && strings.Contains(info.ETag, "-") {
			t.Errorf("%s: etag %s, want a %d-part upload", c.key, info.ETag, c.wantParts)
		}
	}

	// minio-go writes, tiered reads; its ETag drives an IfMatch.
	other := objtesting.Pattern(23, 3000)
	if _, err := mc.PutObject(ctx, name, "w/by-minio-go", bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, attrs, err := objstore.GetWithAttrs(ctx, b, "w/by-minio-go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, other) {
		t.Fatalf("tiered read of minio-go's object: %d bytes, %v", len(got), err)
	}
	info, err := mc.StatObject(ctx, name, "w/by-minio-go", minio.StatObjectOptions{})
	if err != nil || `"`+info.ETag+`"` != attrs.ETag {
		t.Fatalf("etag from minio-go %s, from tiered %s (%v)", info.ETag, attrs.ETag, err)
	}
	if _, err := b.Put(ctx, "w/by-minio-go", strings.NewReader("swapped"), 7, objstore.IfMatch(`"`+info.ETag+`"`)); err != nil {
		t.Fatalf("IfMatch with minio-go's etag: %v", err)
	}
	if got, _ := minioGet(t, mc, name, "w/by-minio-go"); string(got) != "swapped" {
		t.Errorf("after the swap minio-go reads %q", got)
	}
}

// TestS3FailedMultipartIsAborted: a reader failing mid-object and a lost
// precondition at CompleteMultipartUpload both leave no incomplete upload.
func TestS3FailedMultipartIsAborted(t *testing.T) {
	ctx := context.Background()
	mc := testminio.Shared(t).Client()
	b := objtesting.NewMinIOBucket(t)
	boom := errors.New("segment file vanished")
	_, err := b.Put(ctx, "mp/failing", &objtesting.FailingReader{Data: objtesting.Pattern(1, objstore.MinPartSize+5000), Err: boom}, objtesting.BigSize, objstore.Condition{})
	if !errors.Is(err, boom) {
		t.Fatalf("put = %v, want the reader's error", err)
	}
	objtesting.MustPut(t, b, "mp/exists", []byte("x"))
	big := objtesting.Pattern(2, objtesting.BigSize)
	_, err = b.Put(ctx, "mp/exists", bytes.NewReader(big), int64(len(big)), objstore.IfAbsent())
	if !objstore.IsPreconditionFailed(err) {
		t.Fatalf("multipart IfAbsent over an object = %v, want ErrPreconditionFailed", err)
	}
	for u := range mc.ListIncompleteUploads(ctx, b.BucketName(), "mp/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("incomplete upload left behind: %s %s", u.Key, u.UploadID)
	}
	if got := objtesting.MustGet(t, b, "mp/exists"); string(got) != "x" {
		t.Errorf("mp/exists = %q", got)
	}
}

// TestS3OpenByURL opens MinIO through a bucket URL with the standard
// credential chain (environment), and checks the prefix lands in the keys.
func TestS3OpenByURL(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Shared(t)
	name := srv.NewBucket(t)
	testminio.SetCredentialsEnv(t)
	b, err := objstore.Open(ctx, srv.URL(name, "pre/fix"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objtesting.MustPut(t, b, "k", []byte("under a prefix"))
	if got, _ := minioGet(t, srv.Client(), name, "pre/fix/k"); string(got) != "under a prefix" {
		t.Errorf("minio-go reads %q at pre/fix/k", got)
	}
}

func TestS3OpenFailsFastWithOneLine(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Shared(t)
	name := srv.NewBucket(t)
	closedPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}()
	for _, c := range []struct {
		name, url string
		env       func(t testing.TB)
		want      string
		is        error
	}{
		{"missing_bucket", srv.URL("no-such-bucket", ""), testminio.SetCredentialsEnv, "bucket does not exist", objstore.ErrBucketNotFound},
		{"unreachable", "s3://" + name + "?endpoint=http://" + closedPort + "&path_style=true", testminio.SetCredentialsEnv, "cannot reach endpoint http://" + closedPort, nil},
		{"missing_credentials", srv.URL(name, ""), testminio.IsolateAWSEnv, "no usable AWS credentials", nil},
		{"wrong_credentials", srv.URL(name, ""), func(t testing.TB) {
			testminio.IsolateAWSEnv(t)
			t.Setenv("AWS_ACCESS_KEY_ID", "nobody")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
		}, "access denied", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env(t)
			b, err := objstore.Open(ctx, c.url)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			t.Logf("error line: %s", msg)
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("Open error %q, want one line containing %q", msg, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Open error %v is not %v", err, c.is)
			}
			if errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("open error matches ErrNotFound (object): %v", err)
			}
			for _, secret := range []string{testminio.SecretKey, "wrong-secret-value"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error shows a secret: %s", msg)
				}
			}
		})
	}
}

// fakeS3 answers canned S3 errors, to check the error mapping for answers
// MinIO does not give on demand.
type fakeS3 struct {
	mu      sync.Mutex
	headers map[string]http.Header // last request headers by key
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>canned</Message><RequestId>1</RequestId></Error>`, code)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := strings.TrimPrefix(r.URL.Path, "/bkt/")
	f.mu.Lock()
	f.headers[r.Method+" "+key] = r.Header.Clone()
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/bkt" || r.URL.Path == "/bkt/" && r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodHead && key == "ten-bytes":
		w.Header().Set("Content-Length", "10")
		w.Header().Set("ETag", `"abc"`)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodHead:
		w.WriteHeader(http.StatusNotFound) // HEAD errors have no body
	case key == "ten-bytes" && r.Header.Get("Range") != "":
		s3Error(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
	case key == "missing":
		s3Error(w, http.StatusNotFound, "NoSuchKey")
	case key == "no-bucket":
		s3Error(w, http.StatusNotFound, "NoSuchBucket")
	case key == "exists":
		s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
	case key == "conflict":
		s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
	case key == "denied":
		s3Error(w, http.StatusForbidden, "AccessDenied")
	default:
		s3Error(w, http.StatusBadRequest, "InvalidArgument")
	}
}

func TestS3ErrorMapping(t *testing.T) {
	ctx := context.Background()
	fake := &fakeS3{headers: map[string]http.Header{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	b, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: "bkt", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	get := func(key string) error {
		rc, err := b.Get(ctx, key)
		if err == nil {
			rc.Close()
		}
		return err
	}
	put := func(key string, cond objstore.Condition) error {
		_, err := b.Put(ctx, key, strings.NewReader("data"), 4, cond)
		return err
	}
	rangeErr := func(off int64) error {
		rc, err := b.GetRange(ctx, "ten-bytes", off, 5)
		if err == nil {
			n, _ := io.Copy(io.Discard, rc)
			rc.Close()
			if n != 0 {
				return fmt.Errorf("read %d bytes", n)
			}
		}
		return err
	}
	_, headErr := b.Attributes(ctx, "missing")
	for _, c := range []struct {
		name string
		err  error
		is   error // nil: must match no sentinel
	}{
		{"get_no_such_key", get("missing"), objstore.ErrNotFound},
		{"head_404_without_body", headErr, objstore.ErrNotFound},
		{"get_no_such_bucket", get("no-bucket"), objstore.ErrBucketNotFound},
		{"put_412", put("exists", objstore.IfAbsent()), objstore.ErrPreconditionFailed},
		{"put_409_conflict", put("conflict", objstore.IfAbsent()), nil}, // says nothing of whether the key exists
		{"put_if_match_409_conflict", put("conflict", objstore.IfMatch(`"e"`)), objstore.ErrPreconditionFailed},
		{"put_if_match_missing_key", put("missing", objstore.IfMatch(`"e"`)), objstore.ErrPreconditionFailed},
		{"put_unconditional_404", put("missing", objstore.Condition{}), objstore.ErrNotFound},
		{"get_range_beyond_end", rangeErr(11), objstore.ErrInvalidRange},
		{"get_range_at_end_is_empty", rangeErr(10), nil},
		{"delete_missing_is_ok", b.Delete(ctx, "missing"), nil},
		{"access_denied", get("denied"), objstore.ErrAccessDenied},
		{"put_access_denied", put("denied", objstore.IfAbsent()), objstore.ErrAccessDenied},
		{"bad_request", get("other"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sentinels := []error{objstore.ErrNotFound, objstore.ErrPreconditionFailed, objstore.ErrInvalidRange, objstore.ErrBucketNotFound, objstore.ErrAccessDenied}
			if c.is == nil && (c.name == "get_range_at_end_is_empty" || c.name == "delete_missing_is_ok") {
				if c.err != nil {
					t.Fatalf("got %v, want success", c.err)
				}
				return
			}
			if c.err == nil {
				t.Fatal("no error")
			}
			for _, s := range sentinels {
				if want := s == c.is; errors.Is(c.err, s) != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, s, !want, want)
				}
			}
		})
	}
	// The preconditions went out as the right headers.
	if h := fake.headers["PUT exists"]; h.Get("If-None-Match") != "*" || h.Get("If-Match") != "" {
		t.Errorf("IfAbsent sent If-None-Match %q If-Match %q", h.Get("If-None-Match"), h.Get("If-Match"))
	}
	if h := fake.headers["PUT missing"]; h.Get("If-None-Match") != "" { // the last PUT was unconditional
		t.Errorf("unconditional put sent If-None-Match %q", h.Get("If-None-Match"))
	}
	put("denied", objstore.IfMatch(`"etag-1"`))
	if h := fake.headers["PUT denied"]; h.Get("If-Match") != `"etag-1"` {
		t.Errorf("IfMatch sent If-Match %q", h.Get("If-Match"))
	}
}

func staticCreds() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(testminio.AccessKey, testminio.SecretKey, "")
}

// TestS3PutFromFileSections: bodies that are sections of a file (sent with
// sendfile from a descriptor of their own) land byte for byte — a single
// PutObject and a multipart upload whose parts go out concurrently, from a
// section at an odd offset, several Puts of the same file at once, a file
// already unlinked — and the caller's file offset does not move.
func TestS3PutFromFileSections(t *testing.T) {
	ctx := context.Background()
	b := objtesting.NewMinIOBucket(t)
	data := objtesting.Pattern(41, 2*objstore.DefaultPartSize+5<<20+7)
	f := objtesting.TempFile(t, data)
	defer f.Close()
	if _, err := f.Seek(12345, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key     string
		off, n  int64
		section bool // an io.SectionReader over the file, else the file itself
	}{
		{"fs/small", 3, 70_000, true},
		{"fs/one-part", 1 << 20, objstore.DefaultPartSize, true},
		{"fs/three-parts", 17, int64(len(data)) - 20, true},
		{"fs/whole-file-from-its-offset", 12345, int64(len(data)) - 12345, false},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cases))
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r io.Reader = f
			if c.section {
				r = io.NewSectionReader(f, c.off, c.n)
			}
			_, errs[i] = b.Put(ctx, c.key, r, c.n, objstore.Condition{})
		}()
	}
	wg.Wait()
	for i, c := range cases {
		if errs[i] != nil {
			t.Fatalf("put %s: %v", c.key, errs[i])
		}
		if got := objtesting.MustGet(t, b, c.key); !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Errorf("%s: stored %d bytes that differ from the %d put", c.key, len(got), c.n)
		}
	}
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != 12345 {
		t.Errorf("the caller's file offset is %d (%v), want 12345 as before the Puts", pos, err)
	}

	// A file deleted after it was opened is still read through its
	// descriptor.
	g := objtesting.TempFile(t, data)
	defer g.Close()
	if err := os.Remove(g.Name()); err != nil {
		t.Fatal(err)
	}
	n := int64(objstore.DefaultPartSize + 1)
	if _, err := b.Put(ctx, "fs/unlinked", io.NewSectionReader(g, 5, n), n, objstore.Condition{}); err != nil {
		t.Fatalf("put from an unlinked file: %v", err)
	}
	if got := objtesting.MustGet(t, b, "fs/unlinked"); !bytes.Equal(got, data[5:5+n]) {
		t.Errorf("unlinked: stored %d bytes that differ from the %d put", len(got), n)
	}
}
