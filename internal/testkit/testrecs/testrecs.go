// Package testrecs owns the record helpers that the fetch service's own
// tests and the MinIO integration tests share: a record as produced and as
// expected back, a field-by-field comparison that tells null from empty,
// the expected answer read straight from a local log, and a franz-go
// consumer that reads records back over the Kafka protocol.
package testrecs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
)

// Rec is a record as produced and as expected back.
type Rec struct {
	Offset    int64
	Timestamp int64
	Key       []byte // nil: null key
	Value     []byte // nil: tombstone
	Headers   []record.Header
}

func (r Rec) String() string {
	return fmt.Sprintf("{%d ts=%d key=%q value=%.40q headers=%d}", r.Offset, r.Timestamp, r.Key, r.Value, len(r.Headers))
}

// FromRecord copies a decoded record (its bytes may alias a buffer).
func FromRecord(r record.Record) Rec {
	hs := make([]record.Header, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, record.Header{Key: clone(h.Key), Value: clone(h.Value)})
	}
	if len(hs) == 0 {
		hs = nil
	}
	return Rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value), Headers: hs}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// SameBytes is bytes.Equal that also tells null from empty.
func SameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Same compares records field by field, null-ness included; headers only
// when withHeaders.
func Same(t testing.TB, got, want []Rec, withHeaders bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d\nfirst got: %v\nfirst want: %v", len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || !SameBytes(g.Key, w.Key) || !SameBytes(g.Value, w.Value) {
			t.Fatalf("record %d: got %v, want %v", i, g, w)
		}
		if !withHeaders {
			continue
		}
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if !bytes.Equal(g.Headers[j].Key, w.Headers[j].Key) || !SameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
}

// FromLog reads every data record of l from its start (control batches
// left out): the expected answer of a READ_UNCOMMITTED consumer.
func FromLog(t testing.TB, l *localtier.Log) []Rec {
	t.Helper()
	var out []Rec
	var dec record.Decoder
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIter(res.Data)
		progressed := false
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if b.NextOffset() <= off {
				continue
			}
			progressed = true
			if !b.IsControl() {
				recs, err := dec.Records(b)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if r.Offset >= off {
						out = append(out, FromRecord(r))
					}
				}
			}
			off = b.NextOffset()
		}
		if !progressed {
			t.Fatalf("no progress reading at %d", off)
		}
	}
	return out
}

// ConsumeKgo reads want records of topic/partition from start with a
// franz-go consumer (1 minute at most) and returns them.
func ConsumeKgo(t testing.TB, addr, topic string, p int32, start kgo.Offset, want int, opts ...kgo.Opt) []Rec {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: start}}),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []Rec
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(out), want)
		}
		fs.EachError(func(tp string, part int32, err error) {
			t.Fatalf("fetch %s-%d: %v", tp, part, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			tr := Rec{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				tr.Headers = append(tr.Headers, record.Header{Key: []byte(h.Key), Value: h.Value})
			}
			out = append(out, tr)
		})
	}
	return out
}

// LegacyMessage frames one magic 1 message (an old broker's log holds
// them): offset, size, CRC-32 (IEEE) over magic..value, magic, attributes,
// timestamp, key and value (nil: null).
func LegacyMessage(offset int64, attrs int8, ts int64, key, value []byte) []byte {
	body := []byte{1, byte(attrs)}
	body = binary.BigEndian.AppendUint64(body, uint64(ts))
	for _, f := range [][]byte{key, value} {
		if f == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
			continue
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(f)))
		body = append(body, f...)
	}
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body))
	return append(out, body...)
}
