package producer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/tiered/tiered/localtier"
)

// eofProbe reads a body and, when it reaches its end, measures the live
// heap: by then every line has been parsed and is held in whatever form
// Produce keeps until it appends, and nothing has been appended yet.
type eofProbe struct {
	r    io.Reader
	live uint64 // HeapAlloc after a GC, at EOF
}

func (p *eofProbe) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if errors.Is(err, io.EOF) && p.live == 0 {
		p.live = liveHeap()
	}
	return n, err
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestProduceMemoryFollowsTheBody: what Produce holds of a body before it
// appends (every line must be validated before anything is written) is
// about the body's size, not ~50 times it, so the HTTP produce budget,
// which counts body bytes, bounds it. The bound is 3 × the body plus
// 4 MiB: a record's encoded form is at most 8 bytes for the shortest line
// (`{}` and its newline, 3 bytes), any longer line encodes to less than
// 8/3 of its size, and the constant covers one open batch per partition
// and the append buffer (MaxAppendBytes).
func TestProduceMemoryFollowsTheBody(t *testing.T) {
	const bodySize = 8 << 20
	realistic := func() []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < bodySize; i++ {
			fmt.Fprintf(&b, `{"key":"user-%d","value":"{\"user\":%d,\"page\":\"/item/%d\",\"ms\":%d}"}`+"\n", i%5000, i%5000, i%997, i%300)
		}
		return b.Bytes()
	}
	for _, tc := range []struct {
		name  string
		parts int
		body  func() []byte
	}{
		{"minimal records", 1, func() []byte { return bytes.Repeat([]byte("{}\n"), bodySize/3) }},
		{"realistic records", 16, realistic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, clock := testNow, testClock
			d := openTopic(t, "mem", tc.parts, nil)
			body := tc.body()
			lines := bytes.Count(body, []byte("\n"))
			before := liveHeap()
			var ms0 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			probe := &eofProbe{r: bytes.NewReader(body)}
			res, err := produceFrom(d, "mem", probe, now.UnixMilli(), Options{Partition: -1, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			var ms1 runtime.MemStats
			runtime.ReadMemStats(&ms1)
			if res.Records != lines {
				t.Fatalf("produced %d records, want %d", res.Records, lines)
			}
			held := int64(probe.live) - int64(before)
			limit := int64(3*len(body) + 4<<20)
			t.Logf("body %d bytes, %d records: %d bytes live at the body's end (%.2f× the body), %d bytes allocated in all",
				len(body), lines, held, float64(held)/float64(len(body)), ms1.TotalAlloc-ms0.TotalAlloc)
			if held > limit {
				t.Fatalf("%d bytes live with the body parsed, over the bound of %d (3 × the %d-byte body + 4 MiB)", held, limit, len(body))
			}
		})
	}
}

// produceFrom produces the JSON lines of in the way serve and the CLI do.
func produceFrom(d *localtier.LogDir, topic string, in io.Reader, now int64, o Options) (Result, error) {
	return Produce(d, topic, Lines(in, now, "test"), o)
}

// TestProduceHoldCountsEncodedBatches: Options.Hold is told of the batches
// Produce holds until it appends: in all, exactly the bytes it appends (no
// codec: each batch is its header and its encoded records), which for
// minimal records is 2.7 times the body, and covers what is live at the
// body's end but for the constant of open batches and buffers. An error
// from Hold ends Produce with it, nothing written.
func TestProduceHoldCountsEncodedBatches(t *testing.T) {
	now, clock := testNow, testClock
	d := openTopic(t, "hold", 4, nil)
	logBytes := func() int64 {
		tp, _ := d.Topic("hold")
		var n int64
		for _, l := range tp.Partitions {
			for _, s := range l.Segments() {
				n += s.Size
			}
		}
		return n
	}
	body := bytes.Repeat([]byte("{}\n"), 1<<20)
	var held int64
	probe := &eofProbe{r: bytes.NewReader(body)}
	before := liveHeap()
	if _, err := produceFrom(d, "hold", probe, now.UnixMilli(), Options{Partition: -1, Now: clock, Hold: func(n int64) error {
		held += n
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if got := logBytes(); held != got {
		t.Fatalf("Hold was told of %d bytes; %d bytes were appended", held, got)
	}
	if held < 2*int64(len(body)) {
		t.Fatalf("Hold was told of %d bytes for a %d-byte body of minimal records: want the encoded batches, over twice the body", held, len(body))
	}
	if live := int64(probe.live) - int64(before); live > held+4<<20 {
		t.Fatalf("%d bytes live at the body's end, more than the %d told to Hold + 4 MiB", live, held)
	}

	full := errors.New("budget full")
	end := logBytes()
	var told int64
	_, err := produceFrom(d, "hold", bytes.NewReader(body), now.UnixMilli(), Options{Partition: -1, Now: clock, Hold: func(n int64) error {
		if told += n; told > 1<<20 {
			return full
		}
		return nil
	}})
	if !errors.Is(err, full) {
		t.Fatalf("Produce with Hold failing: %v, want its error", err)
	}
	if got := logBytes(); got != end {
		t.Fatalf("%d bytes appended after Hold failed", got-end)
	}
}
