package daemon

import (
	"context"
	"io"
	"strings"
	"testing"
)

// holdBody is a produce body that counts what the Writer holds for it.
type holdBody struct {
	io.Reader
	held int64
}

func (b *holdBody) Hold(n int64) error { b.held += n; return nil }

// TestServeProduceHoldsThroughBody: serve's HTTP Writer tells the body
// (the produce budget's Holder) of the encoded batches it holds until it
// appends them, so a body of small records counts at their size, not at
// the smaller body's.
func TestServeProduceHoldsThroughBody(t *testing.T) {
	s, _ := startServe(t, nil)
	body := &holdBody{Reader: strings.NewReader(strings.Repeat("{}\n", 100_000))}
	if _, err := (serveWriter{s}).Produce(context.Background(), "held", -1, true, body); err != nil {
		t.Fatal(err)
	}
	if body.held < 2*300_000 {
		t.Fatalf("the Writer held %d bytes through the body for 100,000 minimal records (a 300,000-byte body): want their encoded batches, over twice the body", body.held)
	}
}
