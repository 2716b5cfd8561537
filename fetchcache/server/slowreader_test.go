package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/httpapi"
)

// TestHTTPSlowButReadingClientServed: WriteTimeout cuts off a client that
// stopped reading, not one that reads a large raw response steadily but
// takes longer than WriteTimeout for the whole of it: the deadline moves
// with the writes.
func TestHTTPSlowButReadingClientServed(t *testing.T) {
	const wt = 300 * time.Millisecond
	addr, _ := startBig(t, httpapi.HTTPOptions{WriteTimeout: wt})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET /v1/topics/big/partitions/0/records?offset=0&max_bytes=%d HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", 64<<20, httpapi.MediaRaw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Read steadily, never pausing near WriteTimeout, for about 4 times
	// WriteTimeout in all.
	start := time.Now()
	per := resp.ContentLength / 40
	var got int64
	buf := make([]byte, 32<<10)
	for got < resp.ContentLength {
		n, err := io.ReadFull(resp.Body, buf[:min(int64(len(buf)), resp.ContentLength-got)])
		got += int64(n)
		if err != nil {
			t.Fatalf("after %d of %d bytes in %v: %v", got, resp.ContentLength, time.Since(start), err)
		}
		if got%per < int64(n) {
			time.Sleep(wt / 10)
		}
	}
}
