package objstore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

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
