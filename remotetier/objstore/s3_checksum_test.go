package objstore_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// rangerFile is a file-like body (io.ReaderAt + io.Seeker) that states its
// CRC-32C per range, possibly wrongly.
type rangerFile struct {
	*io.SectionReader
	data  []byte
	lie   bool // report a wrong checksum for every range
	asked int
	mu    sync.Mutex
}

func (r *rangerFile) CRC32CRange(off, n int64) (uint32, bool) {
	r.mu.Lock()
	r.asked++
	r.mu.Unlock()
	sum := crc32.Checksum(r.data[off:off+n], crc32.MakeTable(crc32.Castagnoli))
	if r.lie {
		sum ^= 1
	}
	return sum, true
}

func newRangerFile(data []byte, lie bool) *rangerFile {
	return &rangerFile{SectionReader: io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), data: data, lie: lie}
}

// TestS3ChecksumIsVerified: bodies travel as UNSIGNED-PAYLOAD with an
// x-amz-checksum-crc32c header that the store checks: a body whose stated
// checksum is wrong is refused and nothing is stored, for a single
// PutObject and for a multipart upload; with the right one (stated by the
// reader or computed by the backend) the object lands intact.
func TestS3ChecksumIsVerified(t *testing.T) {
	ctx := context.Background()
	b := objtesting.NewMinIOBucket(t)
	small := objtesting.Pattern(31, 70_000)
	big := objtesting.Pattern(32, objstore.DefaultPartSize+3<<20) // two parts
	for _, c := range []struct {
		name string
		data []byte
	}{{"single", small}, {"multipart", big}} {
		t.Run(c.name, func(t *testing.T) {
			liar := newRangerFile(c.data, true)
			if _, err := b.Put(ctx, "sum/"+c.name+"/bad", liar, int64(len(c.data)), objstore.Condition{}); err == nil {
				t.Fatal("a body with a wrong x-amz-checksum-crc32c was stored")
			}
			if liar.asked == 0 {
				t.Fatal("the backend did not ask the reader for its checksums")
			}
			if _, err := b.Attributes(ctx, "sum/"+c.name+"/bad"); !objstore.IsNotFound(err) {
				t.Fatalf("after the refused put: %v, want not found", err)
			}
			honest := newRangerFile(c.data, false)
			if _, err := b.Put(ctx, "sum/"+c.name+"/good", honest, int64(len(c.data)), objstore.Condition{}); err != nil {
				t.Fatal(err)
			}
			if got := objtesting.MustGet(t, b, "sum/"+c.name+"/good"); !bytes.Equal(got, c.data) {
				t.Fatalf("stored %d bytes differing from the %d put", len(got), len(c.data))
			}
		})
	}
}

// TestS3PayloadIsUnsigned looks at the requests on the wire (through a
// reverse proxy to MinIO): PutObject and UploadPart carry UNSIGNED-PAYLOAD
// and a CRC-32C header, over plain HTTP.
func TestS3PayloadIsUnsigned(t *testing.T) {
	srv := testminio.Shared(t)
	bucket := srv.NewBucket(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{} // "PUT part" / "PUT object" → sha256 header + checksum presence
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			kind := "object"
			if r.URL.Query().Has("partNumber") {
				kind = "part"
			}
			mu.Lock()
			seen[kind] = r.Header.Get("X-Amz-Content-Sha256") + " crc32c=" + map[bool]string{true: "yes", false: "no"}[r.Header.Get("X-Amz-Checksum-Crc32c") != ""]
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	b, err := objstore.NewS3(context.Background(), objstore.S3Config{Bucket: bucket, Endpoint: front.URL, Region: testminio.Region, PathStyle: true,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(testminio.AccessKey, testminio.SecretKey, ""))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objtesting.MustPut(t, b, "one", []byte("small object"))
	big := objtesting.Pattern(33, objstore.DefaultPartSize+1)
	if _, err := b.Put(context.Background(), "two", bytes.NewReader(big), int64(len(big)), objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"object", "part"} {
		if got := seen[kind]; !strings.HasPrefix(got, "UNSIGNED-PAYLOAD ") || !strings.HasSuffix(got, "crc32c=yes") {
			t.Errorf("PUT %s: %q, want UNSIGNED-PAYLOAD with a CRC-32C header", kind, got)
		}
	}
	front.CloseClientConnections()
}
