package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/testminio"
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

// fakeObject is one object of a statefulS3.
type fakeObject struct {
	data, etag, crc string
}

// statefulS3 is a tiny S3 of PutObject (with If-None-Match / If-Match),
// HeadObject and GetObject whose first PutObject of each key is stored but
// answered 500, as when the store commits a write and the answer is lost.
func statefulS3(objects map[string]*fakeObject, failFirstPut bool) func(w http.ResponseWriter, r *http.Request, key string) {
	puts := map[string]int{}
	version := 0
	return func(w http.ResponseWriter, r *http.Request, key string) {
		body, _ := io.ReadAll(r.Body)
		cur := objects[key]
		switch r.Method {
		case http.MethodHead:
			if cur == nil {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(cur.data)))
			w.Header().Set("ETag", cur.etag)
			if r.Header.Get("X-Amz-Checksum-Mode") == "ENABLED" && cur.crc != "" {
				w.Header().Set("X-Amz-Checksum-Crc32c", cur.crc)
			}
			w.WriteHeader(http.StatusOK)
		case http.MethodPut:
			if r.Header.Get("If-None-Match") == "*" && cur != nil {
				s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
			if m := r.Header.Get("If-Match"); m != "" {
				if cur == nil {
					s3Error(w, http.StatusNotFound, "NoSuchKey")
					return
				}
				if m != cur.etag {
					s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
					return
				}
			}
			version++
			o := &fakeObject{data: string(body), etag: fmt.Sprintf(`"v%d"`, version), crc: r.Header.Get("X-Amz-Checksum-Crc32c")}
			objects[key] = o
			puts[key]++
			if failFirstPut && puts[key] == 1 {
				s3Error(w, http.StatusInternalServerError, "InternalError")
				return
			}
			w.Header().Set("ETag", o.etag)
			w.WriteHeader(http.StatusOK)
		default:
			s3Error(w, http.StatusBadRequest, "InvalidArgument")
		}
	}
}

// TestS3RetriedConditionalPutSeesItsOwnWrite: when the store commits a
// conditional PutObject but its answer is lost (500) and the SDK retries,
// the retry fails its precondition against the object the first attempt
// wrote. That Put succeeded and must be reported so: as
// ErrPreconditionFailed the caller believes another writer won. An object
// that is not this Put's content still fails the precondition.
func TestS3RetriedConditionalPutSeesItsOwnWrite(t *testing.T) {
	ctx := context.Background()
	objects := map[string]*fakeObject{"manifest": {data: "old", etag: `"v0"`}}
	b := newScriptedS3(t, statefulS3(objects, true))

	a, err := b.Put(ctx, "data", strings.NewReader("new data"), 8, objstore.IfAbsent())
	if err != nil {
		t.Errorf("IfAbsent put whose first attempt landed = %v, want success", err)
	} else if a.ETag != objects["data"].etag {
		t.Errorf("IfAbsent put returned etag %s, stored %s", a.ETag, objects["data"].etag)
	}

	a, err = b.Put(ctx, "manifest", strings.NewReader("new"), 3, objstore.IfMatch(`"v0"`))
	if err != nil {
		t.Errorf("IfMatch put whose first attempt landed = %v, want success", err)
	} else if a.ETag != objects["manifest"].etag {
		t.Errorf("IfMatch put returned etag %s, stored %s", a.ETag, objects["manifest"].etag)
	}

	// Another writer's object: the precondition is lost.
	objects2 := map[string]*fakeObject{"k": {data: "theirs", etag: `"x"`, crc: "AAAAAA=="}}
	b2 := newScriptedS3(t, statefulS3(objects2, false))
	if _, err := b2.Put(ctx, "k", strings.NewReader("mine!!"), 6, objstore.IfAbsent()); !objstore.IsPreconditionFailed(err) {
		t.Errorf("IfAbsent over another writer's object = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b2.Put(ctx, "k", strings.NewReader("mine!!"), 6, objstore.IfMatch(`"y"`)); !objstore.IsPreconditionFailed(err) {
		t.Errorf("IfMatch with a stale etag = %v, want ErrPreconditionFailed", err)
	}
}

// TestS3RetriedConditionalPutOnMinIO: the same against MinIO, through a
// proxy that lets the first conditional PutObject of each key reach MinIO
// and then answers 500 in its place.
func TestS3RetriedConditionalPutOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Shared(t)
	bucket := srv.NewBucket(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	lost := map[string]bool{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conditional := r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != ""
		mu.Lock()
		drop := r.Method == http.MethodPut && conditional && !lost[r.URL.Path]
		lost[r.URL.Path] = lost[r.URL.Path] || drop
		mu.Unlock()
		if !drop {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("first attempt through the proxy: HTTP %d", rec.Code)
		}
		s3Error(w, http.StatusInternalServerError, "InternalError")
	}))
	defer front.Close()
	defer front.CloseClientConnections()
	b, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: bucket, Endpoint: front.URL, Region: testminio.Region, PathStyle: true,
		Credentials: staticCreds()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a1, err := b.Put(ctx, "k", strings.NewReader("v1"), 2, objstore.IfAbsent())
	if err != nil {
		t.Fatalf("IfAbsent put whose first attempt landed = %v, want success", err)
	}
	a2, err := b.Put(ctx, "m", strings.NewReader("v0"), 2, objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lost["/"+bucket+"/m"] = false // the next conditional PUT of m is answered 500
	mu.Unlock()
	a3, err := b.Put(ctx, "m", strings.NewReader("v2"), 2, objstore.IfMatch(a2.ETag))
	if err != nil {
		t.Fatalf("IfMatch put whose first attempt landed = %v, want success", err)
	}
	for key, a := range map[string]objstore.Attrs{"k": a1, "m": a3} {
		got, err := b.Attributes(ctx, key)
		if err != nil || got.ETag != a.ETag {
			t.Errorf("%s: stored etag %s (%v), Put returned %s", key, got.ETag, err, a.ETag)
		}
	}
	// Another writer's object still fails the precondition after a retry.
	if _, err := b.Put(ctx, "m", strings.NewReader("v3"), 2, objstore.IfAbsent()); !objstore.IsPreconditionFailed(err) {
		t.Errorf("IfAbsent over an existing object = %v, want ErrPreconditionFailed", err)
	}
}

// TestS3ListOddKeys: List reports every valid key as it was stored, as the
// memory bucket does, including keys with characters XML 1.0 cannot carry
// (a control character made the whole listing fail to decode) and
// characters URL encoding must not confuse.
func TestS3ListOddKeys(t *testing.T) {
	ctx := context.Background()
	keys := []string{"odd/a\rb", "odd/c\r\nd", "odd/e\x01f", "odd/g\th", "odd/pct%41", "odd/pl+us", "odd/sp ace", "odd/é"}
	for _, b := range []objstore.Bucket{objtesting.NewMinIOBucket(t), objstore.NewMemory()} {
		for _, k := range keys {
			objtesting.MustPut(t, b, k, []byte("x"))
		}
		var got []string
		if err := b.List(ctx, "odd/", func(o objstore.ObjectInfo) error { got = append(got, o.Key); return nil }); err != nil {
			t.Fatalf("%T: list: %v", b, err)
		}
		if !slices.Equal(got, keys) {
			t.Errorf("%T lists %q, want %q", b, got, keys)
		}
	}
}

// TestS3RetriedCompleteMultipartSeesItsOwnWrite: when MinIO completes a
// multipart upload but the answer is lost (500) and the SDK retries
// CompleteMultipartUpload, the retry finds the upload gone (NoSuchUpload)
// or, with IfAbsent, the object it just made (412). The Put succeeded and
// must say so; over another writer's object it still loses.
func TestS3RetriedCompleteMultipartSeesItsOwnWrite(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Shared(t)
	bucket := srv.NewBucket(t)
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	lost := map[string]bool{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := r.Method == http.MethodPost && r.URL.Query().Has("uploadId") && !lost[r.URL.Path]
		lost[r.URL.Path] = lost[r.URL.Path] || drop
		mu.Unlock()
		if !drop {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("first CompleteMultipartUpload through the proxy: HTTP %d", rec.Code)
		}
		s3Error(w, http.StatusInternalServerError, "InternalError")
	}))
	defer front.Close()
	defer front.CloseClientConnections()
	b, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: bucket, Endpoint: front.URL, Region: testminio.Region, PathStyle: true,
		PartSize: objstore.MinPartSize, Credentials: staticCreds()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := objtesting.Pattern(51, 2*objstore.MinPartSize+10) // three parts
	for _, c := range []struct {
		key  string
		cond objstore.Condition
	}{{"plain", objstore.Condition{}}, {"ifabsent", objstore.IfAbsent()}} {
		a, err := b.Put(ctx, c.key, bytes.NewReader(data), int64(len(data)), c.cond)
		if err != nil {
			t.Errorf("%s: put whose CompleteMultipartUpload landed = %v, want success", c.key, err)
			continue
		}
		if got, err := b.Attributes(ctx, c.key); err != nil || got.ETag != a.ETag || got.Size != int64(len(data)) {
			t.Errorf("%s: stored %+v (%v), Put returned %+v", c.key, got, err, a)
		}
	}
	other := objtesting.Pattern(52, len(data))
	if _, err := b.Put(ctx, "plain", bytes.NewReader(other), int64(len(other)), objstore.IfAbsent()); !objstore.IsPreconditionFailed(err) {
		t.Errorf("IfAbsent over another object = %v, want ErrPreconditionFailed", err)
	}
	if got := objtesting.MustGet(t, b, "plain"); !bytes.Equal(got, data) {
		t.Errorf("plain: %d bytes that differ from the first put", len(got))
	}
}

// TestS3StalledStoreFailsTheCall: a store that stops sending a response
// body half-way, or stops reading a request body, fails the call after
// ResponseHeaderTimeout without progress (the SDK may retry it), instead
// of hanging a caller whose context has no deadline forever.
func TestS3StalledStoreFailsTheCall(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bkt" || r.URL.Path == "/bkt/" {
			return
		}
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "01234")
			w.(http.Flusher).Flush()
		}
		<-stop // and never read a PUT's body
	}))
	defer srv.Close()
	defer srv.CloseClientConnections()
	defer close(stop)
	b, err := objstore.NewS3(context.Background(), objstore.S3Config{Bucket: "bkt", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		ResponseHeaderTimeout: 500 * time.Millisecond, Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := objtesting.Pattern(61, objstore.MinPartSize) // more than the socket buffers hold
	for name, call := range map[string]func() error{
		"get_body": func() error {
			rc, err := b.Get(context.Background(), "k")
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			return err
		},
		"put_body": func() error {
			_, err := b.Put(context.Background(), "p", io.MultiReader(bytes.NewReader(data)), int64(len(data)), objstore.Condition{})
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: succeeded against a stalled store", name)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s: still waiting for a stalled store after 15s", name)
		}
	}
}

// TestS3GetRangeHugeLength: a length reaching past the end is cut at the
// end whatever its size, as on the memory bucket; off+length overflowing
// int64 made the S3 backend send a Range header the store ignores.
func TestS3GetRangeHugeLength(t *testing.T) {
	ctx := context.Background()
	data := objtesting.Pattern(71, 100)
	for _, b := range []objstore.Bucket{objtesting.NewMinIOBucket(t), objstore.NewMemory()} {
		objtesting.MustPut(t, b, "huge", data)
		rc, err := b.GetRange(ctx, "huge", 5, math.MaxInt64)
		if err != nil {
			t.Errorf("%T: GetRange(5, MaxInt64): %v", b, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data[5:]) {
			t.Errorf("%T: GetRange(5, MaxInt64) read %d bytes (%v), want the %d from offset 5", b, len(got), err, len(data)-5)
		}
	}
}
