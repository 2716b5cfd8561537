package kafkasrv

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// requestFrame encodes req as a frame body (header v1/v2 and body, no size).
func requestFrame(req kmsg.Request, corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 2)
	b = append(b, "fz"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// FuzzKafkaRequest feeds arbitrary frames to the request decoder and the
// handlers: no panic, and decoding never allocates more than a bounded
// multiple of the frame (hostile length fields cost nothing).
func FuzzKafkaRequest(f *testing.F) {
	e := fetchkit.NewEnv(f)
	e.Topic("t", 2, nil)
	e.Produce(e.Log("t", 0), fetchkit.ProduceOpts{Codec: codec.LZ4}, fetchkit.GenRecs(20, ts0, "f"))
	s, err := NewKafkaServer(KafkaOptions{Catalog: e.Cat, MaxFetchWait: time.Millisecond, FetchPollInterval: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	kc := &kafkaConn{s: s, stopping: make(chan struct{})}

	seeds := []kmsg.Request{}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "x", "1"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -3
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	fe := kmsg.NewPtrFetchRequest()
	fe.Version, fe.MaxBytes, fe.IsolationLevel, fe.SessionEpoch = 12, 1000, 1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 3, 500
	ft.Partitions = append(ft.Partitions, fp)
	fe.Topics = append(fe.Topics, ft)
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks = 9, -1
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version = 5
	seeds = append(seeds, av, md, lo, fe, pr, jg)
	for _, r := range seeds {
		f.Add(requestFrame(r, 1))
	}
	fe4 := *fe
	fe4.Version = 4
	f.Add(requestFrame(&fe4, 2))
	f.Add([]byte{0, 18, 0, 9, 0, 0, 0, 1})                                                     // ApiVersions v9
	f.Add([]byte{0, 1, 0, 11, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff})                 // huge counts
	f.Add(append([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 0}, bytes.Repeat([]byte{0xff}, 40)...)) // flexible garbage

	f.Fuzz(func(t *testing.T, frame []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, _ = decodeRequest(frame)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(256*len(frame))+1<<20 {
			t.Fatalf("decoding a %d-byte frame allocated %d bytes", len(frame), alloc)
		}
		resp, _, err := s.handle(kc, frame)
		if n := len(bytes.Join(resp, nil)); err == nil && resp != nil && n < 8 {
			t.Fatalf("response of %d bytes", n)
		}
	})
}

func TestReadFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		ok   bool
	}{
		{"ok", append([]byte{0, 0, 0, 3}, 1, 2, 3), 10, true},
		{"empty", []byte{0, 0, 0, 0}, 10, true},
		{"too_large", append([]byte{0, 0, 0, 11}, make([]byte, 11)...), 10, false},
		{"negative", []byte{0xff, 0xff, 0xff, 0xff}, 10, false},
		{"short", append([]byte{0, 0, 0, 5}, 1, 2), 10, false},
		{"huge_claim_few_bytes", []byte{0x7f, 0xff, 0xff, 0xff, 1}, 1<<31 - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tc.in), nil, tc.max)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, ok %v", err, tc.ok)
			}
			if tc.ok && !bytes.Equal(got, tc.in[4:]) {
				t.Fatalf("frame %v", got)
			}
			if !tc.ok && cap(got) > 1<<20 {
				t.Fatalf("allocated %d bytes for a refused frame", cap(got))
			}
		})
	}
}
