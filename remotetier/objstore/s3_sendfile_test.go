package objstore

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordingTransport answers every request with 200 after reading its body.
type recordingTransport struct {
	body     io.ReadCloser
	received []byte
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.body = req.Body
	var err error
	if req.Body != nil {
		r.received, err = io.ReadAll(req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// sendfileTestFile is objtesting.TempFile, which this internal test cannot
// import (objtesting imports objstore: an import cycle).
func sendfileTestFile(t *testing.T, data []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestFileBodyTransport: a plain-HTTP request whose context names a file
// section of its length gets a private descriptor of the file as its body,
// which yields exactly the section (then EOF although the file goes on),
// and the original body is closed; every other request keeps its body.
func TestFileBodyTransport(t *testing.T) {
	if !sendfileBodies {
		t.Skip("file bodies are sent as they are on this system")
	}
	data := []byte(strings.Repeat("0123456789abcdef", 4096))
	f := sendfileTestFile(t, data)
	const off, n = 1000, 30000
	section := &fileSection{SectionReader: io.NewSectionReader(f, off, n), f: f, off: off}
	for _, c := range []struct {
		name    string
		url     string
		length  int64
		marked  bool
		swapped bool
	}{
		{"http", "http://store.test/b/k", n, true, true},
		{"https", "https://store.test/b/k", n, true, false},
		{"other length", "http://store.test/b/k", n - 1, true, false},
		{"not marked", "http://store.test/b/k", n, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.marked {
				ctx = withFileBody(ctx, section)
			}
			orig := &closeRecorder{Reader: bytes.NewReader(data[off : off+n])}
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.url, orig)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = c.length
			rec := &recordingTransport{}
			if _, err := (fileBodyTransport{rec}).RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			_, isFile := rec.body.(*sectionFile)
			if isFile != c.swapped {
				t.Fatalf("body sent is %T, swapped %v, want %v", rec.body, isFile, c.swapped)
			}
			if c.swapped && !orig.closed {
				t.Error("the request's own body was not closed")
			}
			if !bytes.Equal(rec.received, data[off:off+n]) {
				t.Errorf("received %d bytes that differ from the section's %d", len(rec.received), n)
			}
			if req.Body != orig {
				t.Error("the caller's request was modified")
			}
		})
	}
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
		t.Errorf("the file's own offset moved to %d (%v), want 0", pos, err)
	}
}

// TestFileBodyTransportOverTCP sends a file section through net/http's
// transport to a real server: it receives exactly the section, whatever
// follows it in the file.
func TestFileBodyTransportOverTCP(t *testing.T) {
	if !sendfileBodies {
		t.Skip("file bodies are sent as they are on this system")
	}
	data := bytes.Repeat([]byte("tiered segment bytes "), 400_000) // 8 MB
	f := sendfileTestFile(t, data)
	received := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		received <- got
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	// spy notes whether the request reaching net/http has the private
	// descriptor as its body: without it the test would pass on the
	// caller's body alone.
	var swapped bool
	spy := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		_, swapped = req.Body.(*sectionFile)
		return srv.Client().Transport.RoundTrip(req)
	})
	client := &http.Client{Transport: fileBodyTransport{spy}}
	for _, s := range [][2]int64{{0, int64(len(data))}, {7, 5 << 20}, {int64(len(data)) - 10, 10}} {
		off, n := s[0], s[1]
		section := &fileSection{SectionReader: io.NewSectionReader(f, off, n), f: f, off: off}
		req, err := http.NewRequestWithContext(withFileBody(context.Background(), section), http.MethodPut, srv.URL+"/k",
			io.NopCloser(io.NewSectionReader(f, off, n)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = n
		req.Header.Set("Expect", "100-continue")
		swapped = false
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("section %d+%d: %v", off, n, err)
		}
		resp.Body.Close()
		if !swapped {
			t.Fatalf("section %d+%d: sent from the caller's body, want the file's own descriptor", off, n)
		}
		got := <-received
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data[off:off+n]) {
			t.Fatalf("section %d+%d: status %d, server got %d bytes (equal %v); want 200 and the section's %d bytes", off, n, resp.StatusCode, len(got), bytes.Equal(got, data[off:off+n]), n)
		}
	}
}
