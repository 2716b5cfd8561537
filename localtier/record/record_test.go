package record

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/tiered/tiered/localtier/codec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const fixtures = "../../testdata/fixtures"

func sampleRecords(base int64, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Offset:    base + int64(i),
			Timestamp: 1700000000000 + int64(i*7),
			Key:       []byte{'k', byte('a' + i%26)},
			Value:     bytes.Repeat([]byte{byte(i)}, i*13),
		}
		switch i % 4 {
		case 1:
			recs[i].Key = nil
		case 2:
			recs[i].Value = nil // tombstone
		case 3:
			recs[i].Headers = []Header{{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte("h2"), Value: nil}, {Key: []byte(""), Value: []byte{}}}
		}
	}
	return recs
}

var allCodecs = []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}

// kmsgDecode decodes a batch with franz-go's kmsg, decompressing with our
// codec package (covered against client-written fixtures separately).
func kmsgDecode(t testing.TB, buf []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(buf); err != nil {
		t.Fatalf("kmsg RecordBatch.ReadFrom: %v", err)
	}
	if got := crc32.Checksum(buf[21:12+kb.Length], castagnoli); int32(got) != kb.CRC {
		t.Fatalf("kmsg-read CRC %08x, computed %08x", uint32(kb.CRC), got)
	}
	raw := kb.Records
	if c := codec.Codec(kb.Attributes & 7); c != codec.None {
		var err error
		raw, err = codec.Decompress(c, nil, raw, 1<<26)
		if err != nil {
			t.Fatalf("decompress: %v", err)
		}
	}
	var out []kmsg.Record
	for len(raw) > 0 {
		var kr kmsg.Record
		if err := kr.ReadFrom(raw); err != nil {
			t.Fatalf("kmsg Record.ReadFrom: %v", err)
		}
		n := varintLen(int64(kr.Length)) + int(kr.Length)
		raw = raw[n:]
		out = append(out, kr)
	}
	if len(out) != int(kb.NumRecords) {
		t.Fatalf("kmsg decoded %d records, header says %d", len(out), kb.NumRecords)
	}
	return kb, out
}

func TestEncodeDecodedByKmsg(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			recs := sampleRecords(100, 37)
			spec := NewBatchSpec(100, c)
			spec.PartitionLeaderEpoch = 5
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 4242, 3, 17
			var e Encoder
			buf, err := e.AppendBatch(nil, spec, recs)
			if err != nil {
				t.Fatal(err)
			}
			kb, krs := kmsgDecode(t, buf)
			if kb.FirstOffset != 100 || kb.PartitionLeaderEpoch != 5 || kb.Magic != 2 || kb.LastOffsetDelta != 36 ||
				kb.ProducerID != 4242 || kb.ProducerEpoch != 3 || kb.FirstSequence != 17 || int(kb.Attributes&7) != int(c) {
				t.Fatalf("kmsg header mismatch: %+v", kb)
			}
			if kb.FirstTimestamp != recs[0].Timestamp || kb.MaxTimestamp != recs[36].Timestamp {
				t.Fatalf("timestamps: first %d max %d", kb.FirstTimestamp, kb.MaxTimestamp)
			}
			for i, kr := range krs {
				r := recs[i]
				if kb.FirstOffset+int64(kr.OffsetDelta) != r.Offset || kb.FirstTimestamp+kr.TimestampDelta64 != r.Timestamp {
					t.Fatalf("record %d offset/timestamp mismatch", i)
				}
				if !sameNullable(kr.Key, r.Key) || !sameNullable(kr.Value, r.Value) || len(kr.Headers) != len(r.Headers) {
					t.Fatalf("record %d: kmsg key %q value %q, want %q %q", i, kr.Key, kr.Value, r.Key, r.Value)
				}
				for j, h := range kr.Headers {
					if h.Key != string(r.Headers[j].Key) || !sameNullable(h.Value, r.Headers[j].Value) {
						t.Fatalf("record %d header %d mismatch", i, j)
					}
				}
			}
			// And our own decoder agrees.
			var d Decoder
			got, err := d.Records(Batch(buf))
			if err != nil {
				t.Fatal(err)
			}
			assertRecords(t, got, recs)
		})
	}
}

func sameNullable(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func assertRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || !sameNullable(g.Key, w.Key) || !sameNullable(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got off=%d ts=%d key=%q value=%q, want off=%d ts=%d key=%q value=%q",
				i, g.Offset, g.Timestamp, g.Key, g.Value, w.Offset, w.Timestamp, w.Key, w.Value)
		}
		for j := range g.Headers {
			if !bytes.Equal(g.Headers[j].Key, w.Headers[j].Key) || !sameNullable(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d mismatch", i, j)
			}
		}
	}
}

// kmsgEncode builds an uncompressed batch with kmsg, fixing up the CRC.
func kmsgEncode(base int64, recs []Record, attrs int16) []byte {
	var raw []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp - recs[0].Timestamp, OffsetDelta: int32(r.Offset - base), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		body := kr.AppendTo(nil) // with Length 0, a one-byte varint
		kr.Length = int32(len(body) - 1)
		raw = kr.AppendTo(raw)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: base, PartitionLeaderEpoch: 9, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(recs[len(recs)-1].Offset - base), FirstTimestamp: recs[0].Timestamp,
		MaxTimestamp: recs[len(recs)-1].Timestamp, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: raw,
	}
	kb.Length = int32(49 + len(raw))
	buf := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(buf[17:], crc32.Checksum(buf[21:], castagnoli))
	return buf
}

func TestKmsgEncodedDecodedByUs(t *testing.T) {
	recs := sampleRecords(5000, 50)
	buf := kmsgEncode(5000, recs, 0)
	it := NewIter(buf)
	it.Verify = true
	b, ok := it.Next()
	if !ok {
		t.Fatalf("iter: %v truncated=%v", it.Err(), it.Truncated())
	}
	if b.BaseOffset() != 5000 || b.LastOffset() != 5049 || b.PartitionLeaderEpoch() != 9 || b.RecordCount() != 50 {
		t.Fatalf("header: base %d last %d epoch %d count %d", b.BaseOffset(), b.LastOffset(), b.PartitionLeaderEpoch(), b.RecordCount())
	}
	var d Decoder
	got, err := d.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, got, recs)
	// Byte-identical: our encoder writes exactly what kmsg writes.
	spec := NewBatchSpec(5000, codec.None)
	spec.PartitionLeaderEpoch = 9
	var e Encoder
	ours, err := e.AppendBatch(nil, spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, buf) {
		t.Fatalf("our encoding differs from kmsg's:\nours %x\nkmsg %x", ours, buf)
	}
}

func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRskafkaFixtures(t *testing.T) {
	want := map[string]codec.Codec{
		"nocompression": codec.None, "gzip": codec.Gzip, "lz4": codec.LZ4, "zstd": codec.Zstd,
		"snappy": codec.Snappy, "snappy_java": codec.Snappy, "null_key": codec.None,
	}
	for name, c := range want {
		t.Run(name, func(t *testing.T) {
			buf := readFixture(t, "rskafka/"+name+".batch.bin")
			it := NewIter(buf)
			it.Verify = true
			b, ok := it.Next()
			if !ok {
				t.Fatalf("no batch: %v", it.Err())
			}
			if b.Codec() != c {
				t.Fatalf("codec %v, want %v", b.Codec(), c)
			}
			var d Decoder
			recs, err := d.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != int(b.RecordCount()) || len(recs) == 0 {
				t.Fatalf("%d records, header says %d", len(recs), b.RecordCount())
			}
			if name == "null_key" && recs[0].Key != nil {
				t.Fatalf("null_key fixture decoded a non-null key %q", recs[0].Key)
			}
			// kmsg agrees on every record.
			_, krs := kmsgDecode(t, buf)
			for i, kr := range krs {
				if !sameNullable(kr.Key, recs[i].Key) || !sameNullable(kr.Value, recs[i].Value) || len(kr.Headers) != len(recs[i].Headers) {
					t.Fatalf("record %d differs from kmsg", i)
				}
			}
			if _, ok := it.Next(); ok || it.Err() != nil || it.Truncated() {
				t.Fatalf("trailing data after the batch: err=%v", it.Err())
			}
		})
	}
}

// TestKafkaGoFixtures decodes fetch-response record sets mixing magic 0/1
// messages (plain and gzip wrappers) and v2 batches.
func TestKafkaGoFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "kafka-go", "*.records.bin"))
	if len(files) == 0 {
		t.Fatal("no kafka-go fixtures")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".records.bin")
		t.Run(name, func(t *testing.T) {
			buf, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			it := NewIter(buf)
			it.Verify = true
			var d Decoder
			var magics []string
			next := int64(-1)
			n := 0
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				m := "v" + string(rune('0'+b.Magic()))
				if b.Codec() != codec.None {
					m += "c"
				}
				magics = append(magics, m)
				recs, err := d.Records(b)
				if err != nil {
					t.Fatalf("batch %d: %v", len(magics), err)
				}
				for _, r := range recs {
					if next >= 0 && r.Offset != next {
						t.Fatalf("offset %d follows %d", r.Offset, next-1)
					}
					next = r.Offset + 1
					var v struct{ Count *int }
					if err := json.Unmarshal(r.Value, &v); err != nil || v.Count == nil {
						t.Fatalf("offset %d value %q is not the fixture's JSON", r.Offset, r.Value)
					}
					n++
				}
				if b.NextOffset() != next {
					t.Fatalf("batch next offset %d, records end at %d", b.NextOffset(), next)
				}
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
			if n == 0 {
				t.Fatal("no records")
			}
			// The file name lists the kinds of batch the broker returned.
			all := strings.Join(magics, " ")
			for _, want := range []string{"v1", "v2"} {
				if strings.Contains(name, want) && !strings.Contains(all, want) {
					t.Fatalf("name promises %s, decoded %v", want, magics)
				}
			}
			if strings.Contains(name, "c") && !strings.Contains(all, "c") {
				t.Fatalf("name promises a compressed batch, decoded %v", magics)
			}
		})
	}
}

func TestCorruption(t *testing.T) {
	var e Encoder
	good, err := e.AppendBatch(nil, NewBatchSpec(10, codec.None), sampleRecords(10, 5))
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name      string
		buf       []byte
		truncated bool
		reason    string
		decodeErr bool
	}{
		{name: "bad_checksum", buf: mut(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), reason: "checksum mismatch"},
		{name: "bad_magic", buf: mut(func(b []byte) []byte { b[16] = 7; return b }), reason: "unknown magic 7"},
		{name: "short_length", buf: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 10); return b }), reason: "below the minimum"},
		{name: "torn_tail", buf: good[:len(good)-3], truncated: true},
		{name: "torn_header", buf: good[:10], truncated: true},
		{name: "count_too_high", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 6)
			Batch(b).UpdateCRC()
			return b
		}), decodeErr: true},
		{name: "count_too_low", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 4)
			Batch(b).UpdateCRC()
			return b
		}), decodeErr: true},
		{name: "hostile_count", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 0x7fffffff)
			Batch(b).UpdateCRC()
			return b
		}), decodeErr: true},
		// The header check refuses a count the offsets cannot hold before
		// anything decodes (the decodeErr cases above decode the batch
		// directly, as a reader without Iter would).
		{name: "count_past_delta", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 6)
			Batch(b).UpdateCRC()
			return b
		}), reason: "record count 6 does not fit the last offset delta 4"},
		{name: "negative_count", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 0xffffffff)
			Batch(b).UpdateCRC()
			return b
		}), reason: "record count -1 does not fit"},
		{name: "negative_delta", buf: mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
			Batch(b).UpdateCRC()
			return b
		}), reason: "negative last offset delta -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it := NewIter(tc.buf)
			it.Verify = true
			_, ok := it.Next()
			if tc.truncated {
				if ok || it.Err() != nil || !it.Truncated() || it.Pos() != 0 {
					t.Fatalf("want clean truncation, got ok=%v err=%v truncated=%v", ok, it.Err(), it.Truncated())
				}
				return
			}
			if tc.decodeErr {
				b := Batch(tc.buf)
				var d Decoder
				_, err := d.Records(b)
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Offset != 10 {
					t.Fatalf("want CorruptError at offset 10, got %v", err)
				}
				// The declared count (up to 2^31) must not size any allocation.
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := 0; i < 5; i++ {
					_, _ = (&Decoder{}).Records(b)
				}
				runtime.ReadMemStats(&after)
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
					t.Fatalf("hostile count drove %d bytes of allocation", grew)
				}
				return
			}
			if ok {
				t.Fatal("corrupt batch accepted")
			}
			var ce *CorruptError
			if !errors.As(it.Err(), &ce) || !strings.Contains(ce.Error(), tc.reason) || ce.Pos != 0 {
				t.Fatalf("want CorruptError %q at 0, got %v", tc.reason, it.Err())
			}
			werr := WithFile(it.Err(), "/d/00000000000000000000.log", 4096)
			if !strings.Contains(werr.Error(), "/d/00000000000000000000.log at position 4096") {
				t.Fatalf("WithFile: %v", werr)
			}
		})
	}
}

func TestIterDoesNotAllocate(t *testing.T) {
	var e Encoder
	var buf []byte
	for i := 0; i < 20; i++ {
		var err error
		buf, err = e.AppendBatch(buf, NewBatchSpec(int64(i*5), codec.None), sampleRecords(int64(i*5), 5))
		if err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(50, func() {
		it := NewIter(buf)
		it.Verify = true
		n := 0
		for {
			if _, ok := it.Next(); !ok {
				break
			}
			n++
		}
		if n != 20 || it.Err() != nil {
			panic("bad iteration")
		}
	})
	if allocs != 0 {
		t.Fatalf("iteration allocated %v times per pass", allocs)
	}
}

func TestControlAndHorizon(t *testing.T) {
	key, val := EndTxnMarker(true, 7)
	spec := NewBatchSpec(42, codec.None)
	spec.Control, spec.Transactional = true, true
	spec.ProducerID, spec.ProducerEpoch = 99, 1
	var e Encoder
	buf, err := e.AppendBatch(nil, spec, []Record{{Offset: 42, Timestamp: 1000, Key: key, Value: val}})
	if err != nil {
		t.Fatal(err)
	}
	b := Batch(buf)
	if !b.IsControl() || !b.IsTransactional() || b.HasDeleteHorizon() {
		t.Fatalf("attributes %x", b.Attributes())
	}
	var d Decoder
	recs, err := d.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	_, typ, err := ParseControlKey(recs[0].Key)
	if err != nil || typ != ControlCommit {
		t.Fatalf("control type %d err %v", typ, err)
	}
	_, epoch, err := ParseEndTxnValue(recs[0].Value)
	if err != nil || epoch != 7 {
		t.Fatalf("coordinator epoch %d err %v", epoch, err)
	}
	// kmsg's own end-txn marker encoding agrees with ours.
	kk := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyTypeCommit}
	kv := kmsg.EndTxnMarker{CoordinatorEpoch: 7}
	if !bytes.Equal(kk.AppendTo(nil), key) || !bytes.Equal(kv.AppendTo(nil), val) {
		t.Fatalf("control key %x value %x, kmsg %x %x", key, val, kk.AppendTo(nil), kv.AppendTo(nil))
	}

	spec = NewBatchSpec(0, codec.None)
	spec.DeleteHorizon = 5000
	buf, err = e.AppendBatch(nil, spec, []Record{{Offset: 0, Timestamp: 4000, Key: []byte("k")}, {Offset: 3, Timestamp: 4500, Key: []byte("j")}})
	if err != nil {
		t.Fatal(err)
	}
	b = Batch(buf)
	if !b.HasDeleteHorizon() || b.DeleteHorizon() != 5000 || b.MaxTimestamp() != 4500 || b.LastOffsetDelta() != 3 {
		t.Fatalf("horizon %d max %d lod %d", b.DeleteHorizon(), b.MaxTimestamp(), b.LastOffsetDelta())
	}
	recs, err = d.Records(b)
	if err != nil || recs[0].Timestamp != 4000 || recs[1].Timestamp != 4500 || recs[1].Offset != 3 {
		t.Fatalf("records %+v err %v", recs, err)
	}
}

func TestLogAppendTimeRecordsTakeBatchTime(t *testing.T) {
	var e Encoder
	buf, err := e.AppendBatch(nil, NewBatchSpec(0, codec.None), sampleRecords(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	Batch(buf).SetMaxTimestampLogAppend(99999)
	if err := Batch(buf).VerifyCRC(); err != nil {
		t.Fatal(err)
	}
	var d Decoder
	recs, _ := d.Records(Batch(buf))
	for _, r := range recs {
		if r.Timestamp != 99999 {
			t.Fatalf("record timestamp %d, want the log append time", r.Timestamp)
		}
	}
}

func FuzzDecodeBatches(f *testing.F) {
	for _, p := range []string{"rskafka/gzip.batch.bin", "rskafka/lz4.batch.bin", "rskafka/zstd.batch.bin", "rskafka/snappy_java.batch.bin", "rskafka/null_key.batch.bin", "kafka-go/v1c-v1-v1c.records.bin", "kafka-go/v2bc-v1-v1c.records.bin"} {
		f.Add(readFixture(f, p))
	}
	f.Add(hostileCountBatch(f, 1<<20))
	f.Fuzz(func(t *testing.T, data []byte) {
		it := NewIter(data)
		d := Decoder{MaxUncompressed: 1 << 20}
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			_ = b.VerifyCRC()
			recs, err := d.Records(b)
			if err != nil && !IsCorrupt(err) {
				t.Fatalf("untyped error: %v", err)
			}
			for _, r := range recs {
				_ = len(r.Key) + len(r.Value)
			}
		}
		if it.Pos() > len(data) {
			t.Fatal("position past the end")
		}
	})
}
