package manifest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestOpenTxns: open transactions survive encoding and later commits, set
// the last stable offset (never below the log start), and a root without
// any encodes as earlier releases wrote it.
func TestOpenTxns(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	p := Policy{InlineMax: 2, SubSegments: 1}
	m := build(t, st, p, []Segment{testSeg(t, 0, 99, 1000), testSeg(t, 100, 199, 2000)}, 2)
	if got := m.LastStableOffset(); got != 200 {
		t.Fatalf("last stable offset %d without open transactions, want the end 200", got)
	}
	c, err := Append(m, p, testSeg(t, 200, 299, 3000))
	if err != nil {
		t.Fatal(err)
	}
	open := []OpenTxn{{ProducerID: 8, FirstOffset: 150}, {ProducerID: 7, FirstOffset: 250}}
	if err := c.Root.SetOpenTxns(open); err != nil {
		t.Fatal(err)
	}
	data := st.apply(t, c)
	if !bytes.Contains(data, []byte(`"open_txns":[`)) {
		t.Fatalf("encoded root has no open_txns:\n%s", data)
	}
	got, err := DecodeRoot(c.Root.Key(), data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.OpenTxns, open) || got.LastStableOffset() != 150 {
		t.Fatalf("decoded open %v, last stable %d; want %v, 150", got.OpenTxns, got.LastStableOffset(), open)
	}
	// Later commits carry them; retention past the first offset clamps
	// the last stable offset to the new log start.
	c2, err := Append(got, p, testSeg(t, 300, 399, 4000))
	if err != nil {
		t.Fatal(err)
	}
	st.apply(t, c2)
	c3, err := RemoveBelow(ctx, st, c2.Root, 200)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c3.Root.OpenTxns, open) || c3.Root.LastStableOffset() != 200 {
		t.Fatalf("after retention: open %v, last stable %d; want %v, 200 (the log start)", c3.Root.OpenTxns, c3.Root.LastStableOffset(), open)
	}
	c4, err := Append(c3.Root, p, testSeg(t, 400, 499, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if err := c4.Root.SetOpenTxns(nil); err != nil {
		t.Fatal(err)
	}
	if data := st.apply(t, c4); bytes.Contains(data, []byte("open_txns")) {
		t.Fatalf("a root without open transactions spells the field:\n%s", data)
	}
}

// TestOpenTxnsRefused: malformed open transactions are refused by the
// encoder and the decoder, naming the entry.
func TestOpenTxnsRefused(t *testing.T) {
	st := newMemStore()
	p := DefaultPolicy()
	m := build(t, st, p, []Segment{testSeg(t, 0, 99, 1000)}, 1)
	c, err := Append(m, p, testSeg(t, 100, 199, 2000))
	if err != nil {
		t.Fatal(err)
	}
	good := `{"producer_id":7,"first_offset":150}`
	if err := c.Root.SetOpenTxns([]OpenTxn{{ProducerID: 7, FirstOffset: 150}}); err != nil {
		t.Fatal(err)
	}
	data := st.apply(t, c)
	for name, bad := range map[string]string{
		"negative producer": `{"producer_id":-1,"first_offset":150}`,
		"past the end":      `{"producer_id":7,"first_offset":200}`,
		"producer twice":    `{"producer_id":7,"first_offset":150},{"producer_id":7,"first_offset":160}`,
		"out of order":      `{"producer_id":7,"first_offset":150},{"producer_id":8,"first_offset":120}`,
	} {
		t.Run(name, func(t *testing.T) {
			b := bytes.Replace(data, []byte(good), []byte(bad), 1)
			var ce *CorruptManifestError
			if _, err := DecodeRoot(c.Root.Key(), b); !errors.As(err, &ce) || !strings.Contains(err.Error(), "open_txns[") {
				t.Fatalf("DecodeRoot = %v, want a corrupt manifest naming the entry", err)
			}
			root := *c.Root
			if err := root.SetOpenTxns([]OpenTxn{{ProducerID: -1, FirstOffset: 150}}); err == nil || len(root.OpenTxns) != 1 || root.OpenTxns[0].ProducerID != 7 {
				t.Fatalf("SetOpenTxns took a negative producer id (%v), or changed the root on error: %v", err, root.OpenTxns)
			}
			root.OpenTxns = []OpenTxn{{ProducerID: -1, FirstOffset: 150}}
			if _, err := EncodeRoot(&root); err == nil {
				t.Fatal("EncodeRoot took a negative producer id")
			}
		})
	}
}
