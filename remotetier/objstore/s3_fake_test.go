package objstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tiered/tiered/remotetier/objstore"
)

// scriptedS3 answers HeadBucket with 200 and every other request with
// handle, which the test scripts.
type scriptedS3 struct {
	mu     sync.Mutex
	handle func(w http.ResponseWriter, r *http.Request, key string)
}

func (f *scriptedS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/bkt" || r.URL.Path == "/bkt/" {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle(w, r, strings.TrimPrefix(r.URL.Path, "/bkt/"))
}

func newScriptedS3(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, key string)) *objstore.S3 {
	t.Helper()
	srv := httptest.NewServer(&scriptedS3{handle: handle})
	t.Cleanup(srv.Close)
	b, err := objstore.NewS3(context.Background(), objstore.S3Config{Bucket: "bkt", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestS3GetRangeChecksTheAnswer: GetRange serves only the bytes it asked
// for. A store (or proxy) that ignores the Range header and answers 200
// with the whole object, or answers 206 with another range than the one
// asked, must not have that body served as the range.
func TestS3GetRangeChecksTheAnswer(t *testing.T) {
	ctx := context.Background()
	const object = "0123456789abcdefghij" // 20 bytes
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"range_ignored_200", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "20")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, object)
		}},
		{"other_range_206", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 0-4/20")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, object[:5])
		}},
		{"shorter_range_206", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 5-7/20")
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, object[5:8])
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newScriptedS3(t, func(w http.ResponseWriter, r *http.Request, key string) {
				if r.Method != http.MethodGet || r.Header.Get("Range") != "bytes=5-9" {
					s3Error(w, http.StatusBadRequest, "InvalidArgument")
					return
				}
				c.answer(w)
			})
			rc, err := b.GetRange(ctx, "obj", 5, 5)
			if err != nil {
				t.Logf("GetRange refused the answer: %v", err)
				return
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Logf("reading refused the answer: %v", err)
				return
			}
			if string(got) != object[5:10] {
				t.Fatalf("GetRange(5, 5) served %q without error, want %q or an error", got, object[5:10])
			}
		})
	}
}

// TestS3GetRangeShortBody: a range answer whose body ends before the
// bytes its Content-Range announces (a connection cut mid-body, or a
// chunked body that ends early) is a read error, never a short success.
func TestS3GetRangeShortBody(t *testing.T) {
	ctx := context.Background()
	const object = "0123456789abcdefghij"
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"reset_mid_body", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 5-9/20")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, object[5:7])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
		{"chunked_ends_early", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 5-9/20")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, object[5:7])
			w.(http.Flusher).Flush()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newScriptedS3(t, func(w http.ResponseWriter, r *http.Request, key string) {
				c.answer(w)
			})
			rc, err := b.GetRange(ctx, "obj", 5, 5)
			if err != nil {
				t.Logf("GetRange failed: %v", err)
				return
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err == nil {
				t.Fatalf("GetRange(5, 5) read %q and no error", got)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Logf("read error %v", err)
			}
		})
	}
}
