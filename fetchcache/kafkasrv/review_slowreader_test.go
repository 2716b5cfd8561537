package kafkasrv

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestReviewSlowReaderGetsLongResponse holds that a Fetch response longer
// than the write timeout takes to read, to a client that keeps reading, is
// written whole: the write timeout bounds a client that stops reading, as
// Kafka's idle expiry (which any progress resets) and the HTTP API's
// moving write deadline do. A deadline on the whole response cuts such a
// response every time, so a consumer on a slow link asking for 50 MB
// responses (fetch.max.bytes) is disconnected at the same offset for ever.
func TestReviewSlowReaderGetsLongResponse(t *testing.T) {
	const wt = 400 * time.Millisecond
	c, n := bigFetch(t, wt)
	// Read steadily, 256 KiB every 40 ms (about 6 MB/s): a 12 MB response
	// takes about two seconds, five times the write timeout, yet no 400 ms
	// pass without a megabyte read.
	start := time.Now()
	got := 0
	buf := make([]byte, 256<<10)
	for got < n {
		k, err := io.ReadFull(c, buf[:min(len(buf), n-got)])
		got += k
		if err != nil {
			t.Fatalf("response cut after %d of %d bytes in %v (write timeout %v): %v", got, n, time.Since(start), wt, err)
		}
		time.Sleep(40 * time.Millisecond)
	}
}

// TestReviewStoppedReaderDisconnected: a client that stops reading a
// response is still disconnected after the write timeout.
func TestReviewStoppedReaderDisconnected(t *testing.T) {
	c, n := bigFetch(t, 200*time.Millisecond)
	time.Sleep(2 * time.Second)
	if k, err := io.ReadFull(c, make([]byte, n)); err == nil {
		t.Fatalf("a client that stopped reading for 2 s got all %d bytes", k)
	}
}

// bigFetch serves a partition of 12 MB with write timeout wt and sends a
// Fetch for all of it on a connection with a small receive buffer; it
// returns the connection, the response's size prefix read.
func bigFetch(t *testing.T, wt time.Duration) (net.Conn, int) {
	e := fetchkit.NewEnv(t)
	e.Topic("big", 1, map[string]string{"internal.segment.bytes": "67108864", "index.interval.bytes": "4096"})
	var recs []fetchkit.Rec
	for i := range 24 {
		recs = append(recs, fetchkit.Rec{Timestamp: ts0 + int64(i), Value: bytes.Repeat([]byte{byte(i)}, 512<<10)})
	}
	e.Produce(e.Log("big", 0), fetchkit.ProduceOpts{Per: 1}, recs)
	addr := startKafka(t, e.Cat, KafkaOptions{WriteTimeout: wt})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &fetchkit.RawConn{T: t, C: c}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.SessionEpoch, req.MaxWaitMillis = 11, 64<<20, -1, 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.Send(fetchKey, 11, 7, false, req.AppendTo(nil))

	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 12<<20 {
		t.Fatalf("response of %d bytes, want the whole 12 MB", n)
	}
	return c, n
}
