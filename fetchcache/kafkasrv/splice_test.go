package kafkasrv

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestSplicedFetchBytes: for every Fetch version served, a response whose
// batches are spliced in from parts is, byte for byte, the response kmsg
// encodes with the batches copied in — for empty, one-part and many-part
// partitions across topics — and kmsg decodes it back.
func TestSplicedFetchBytes(t *testing.T) {
	batches := [][]byte{bytes.Repeat([]byte{7}, 300), bytes.Repeat([]byte{9}, 5000)}
	views := []fetchcache.View{
		{Parts: [][]byte{batches[0]}, Len: 300},
		{},
		{Parts: [][]byte{batches[1][:1], batches[1][1:4000], batches[1][4000:]}, Len: 5000},
	}
	for v := fetchAPI.min; v <= fetchAPI.max; v++ {
		build := func() (*kmsg.FetchResponse, []*fetchPart) {
			r := kmsg.NewPtrFetchResponse()
			r.Version = v
			var parts []*fetchPart
			for ti, topic := range []string{"a", "bb"} {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = topic
				rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(views))
				r.Topics = append(r.Topics, rt)
				for pi := range views {
					rp := &r.Topics[ti].Partitions[pi]
					*rp = kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.HighWatermark, rp.RecordBatches = int32(pi), 42, []byte{}
					parts = append(parts, &fetchPart{resp: rp, data: views[pi]})
				}
			}
			return r, parts
		}
		r, parts := build()
		got := bytes.Join(spliceBatches(r, parts).(*splicedFetch).encode(77), nil)
		plain, plainParts := build()
		for _, fp := range plainParts {
			fp.resp.RecordBatches = append([]byte{}, fp.data.Bytes()...)
		}
		want := appendResponse(nil, 77, plain)
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: spliced response (%d bytes) differs from the copied one (%d bytes)", v, len(got), len(want))
		}
		dec := kmsg.NewPtrFetchResponse()
		dec.Version = v
		body := got[8:]
		if dec.IsFlexible() {
			body = body[1:] // the response header's tags
		}
		if err := dec.ReadFrom(body); err != nil {
			t.Fatalf("v%d: kmsg cannot decode the spliced response: %v", v, err)
		}
		if p := dec.Topics[1].Partitions[2]; !bytes.Equal(p.RecordBatches, batches[1]) {
			t.Fatalf("v%d: decoded batches of bb-2: %d bytes, want %d", v, len(p.RecordBatches), len(batches[1]))
		}
	}
}

// TestCombinedKafkaFetchNoCopy: serve's cold Kafka read — a Fetch of
// offsets only the bucket holds, through the combined catalog and the
// chunk cache — allocates far less than the bytes it serves (the batches
// are written from the cache's memory); a copy into the response would
// allocate at least as much as it serves.
func TestCombinedKafkaFetchNoCopy(t *testing.T) {
	cat, end := fetchkit.ColdCombined(t)
	s, err := NewKafkaServer(KafkaOptions{Catalog: cat, Logger: fetchkit.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	part, err := cat.Partition(context.Background(), "cold", 0)
	if err != nil {
		t.Fatal(err)
	}
	// pass fetches every remote offset, 256 KiB per partition and request,
	// checking each response against Read, and counts the bytes served and
	// what the handler alone allocated.
	pass := func() (served int64, allocs uint64) {
		var before, after runtime.MemStats
		for off := int64(0); off < end; {
			q := kmsg.NewPtrFetchRequest()
			q.Version, q.MaxBytes = 12, 1<<20
			qt := kmsg.NewFetchRequestTopic()
			qt.Topic = "cold"
			qp := kmsg.NewFetchRequestTopicPartition()
			qp.FetchOffset, qp.PartitionMaxBytes = off, 256<<10
			qt.Partitions = append(qt.Partitions, qp)
			q.Topics = append(q.Topics, qt)
			frame := requestFrame(q, 1)
			runtime.ReadMemStats(&before)
			resp, _, err := s.handle(nil, frame)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			allocs += after.TotalAlloc - before.TotalAlloc
			whole := bytes.Join(resp, nil)
			served += int64(len(whole))
			data, err := part.Read(context.Background(), off, 256<<10)
			if err != nil || len(data) == 0 || !bytes.Contains(whole, data) {
				t.Fatalf("fetch at %d: the response does not hold the batches Read returns (%v)", off, err)
			}
			off = fetchcache.LastBatchNext(data)
		}
		return served, allocs
	}
	pass() // warm the cache
	served, allocs := pass()
	perMiB := float64(allocs) / (float64(served) / (1 << 20))
	t.Logf("served %d bytes over Kafka, the handler allocated %d (%.0f bytes per MiB served)", served, allocs, perMiB)
	if served < 1<<20 {
		t.Fatalf("served only %d bytes: the setup is too small to measure", served)
	}
	if perMiB > 128<<10 {
		t.Fatalf("serve's cold Kafka fetch allocated %.0f bytes per MiB served, want < 128 KiB (no copy of the batch bytes)", perMiB)
	}
}
