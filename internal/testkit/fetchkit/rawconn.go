package fetchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RawConn speaks the wire protocol directly, for what clients never send.
type RawConn struct {
	T testing.TB
	C net.Conn
}

// DialRaw connects to addr with a 10 s deadline.
func DialRaw(t testing.TB, addr string) *RawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &RawConn{T: t, C: c}
}

// Send writes a request with header v1 or v2 (flexible) and the given
// body bytes.
func (r *RawConn) Send(key, version int16, corr int32, flexible bool, body []byte) {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := r.C.Write(append(frame, b...)); err != nil {
		r.T.Fatal(err)
	}
}

// Recv reads one response and returns its body after the correlation id.
func (r *RawConn) Recv(corr int32) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r.C, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		r.T.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := make([]byte, n-4)
	_, err := io.ReadFull(r.C, body)
	return body, err
}

// Request sends req with correlation id corr and decodes the response into
// resp (kmsg, the independent decoder). An error is a failed read (the
// server closed the connection) or a response that does not decode.
func (r *RawConn) Request(corr int32, req kmsg.Request, resp kmsg.Response) error {
	r.Send(req.Key(), req.GetVersion(), corr, req.IsFlexible(), req.AppendTo(nil))
	body, err := r.Recv(corr)
	if err != nil {
		return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
	}
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // the response header's tagged fields
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

// ClosedWithin fails unless the server closes c within d, reading and
// dropping whatever it still sends: a read that times out means the
// server still holds the connection open.
func ClosedWithin(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		_, err := c.Read(b[:])
		switch {
		case err == nil:
			continue // an answer still on its way
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			return
		default:
			t.Fatalf("connection still open %v later: %v", d, err)
		}
	}
}
