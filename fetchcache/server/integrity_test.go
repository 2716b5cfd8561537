package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// servedBatch is one batch of the partition as written, and where.
type servedBatch struct {
	seg   int // index of its segment
	pos   int64
	bytes record.Batch
}

// TestCorruptBatchesAreNeverServed corrupts one batch of a partition behind
// the service's back — a flipped bit in its base offset (outside the CRC)
// or a checksummed byte — in a local segment file (serve) or in the
// uploaded object (fetch, through the caching bucket), and reads the
// partition from its start over Kafka Fetch, HTTP raw and HTTP JSON lines,
// each client advancing as a consumer does. Every interface serves the
// batches before the bad one byte for byte (records with their offsets),
// never the bad one or anything after it: Kafka answers CORRUPT_MESSAGE for
// the partition, HTTP 500 CORRUPT_MESSAGE, at the bad batch's offset, and
// tiered_fetch_corrupt_objects_total counts the refusals.
func TestCorruptBatchesAreNeverServed(t *testing.T) {
	flips := []struct {
		name string
		flip func(b []byte)
	}{
		{"base offset bit down", func(b []byte) {
			o := binary.BigEndian.Uint64(b)
			binary.BigEndian.PutUint64(b, o&(o-1))
		}},
		{"base offset bit up", func(b []byte) { b[6] ^= 0x01 }}, // +256
		{"checksummed byte", func(b []byte) { b[len(b)-2] ^= 0x10 }},
	}
	for _, tier := range []string{"local", "remote"} {
		for _, f := range flips {
			t.Run(tier+"/"+f.name, func(t *testing.T) {
				corruptAndRead(t, tier, f.flip)
			})
		}
	}
}

func corruptAndRead(t *testing.T, tier string, flip func([]byte)) {
	e := fetchkit.NewEnv(t)
	e.Topic("t", 1, map[string]string{"internal.segment.bytes": "8192", "index.interval.bytes": "1024", "remote.storage.enable": "true"})
	l := e.Log("t", 0)
	recs := e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, Per: 8}, fetchkit.GenRecs(400, ts0, "i"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	// The batches as written, segment by segment.
	var batches []servedBatch
	segs := l.Segments()
	for i, s := range segs {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		it := record.NewIter(data)
		for {
			pos := it.Pos()
			b, ok := it.Next()
			if !ok {
				break
			}
			batches = append(batches, servedBatch{seg: i, pos: int64(pos), bytes: append(record.Batch(nil), b...)})
		}
	}
	// A batch in the middle of its segment, neighbours in the same one.
	k := -1
	for i := len(batches) / 2; i+1 < len(batches); i++ {
		if batches[i-1].seg == batches[i].seg && batches[i+1].seg == batches[i].seg {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no batch with neighbours in its segment")
	}
	bad := batches[k]
	mod := append([]byte(nil), bad.bytes...)
	flip(mod)

	var cat fetchcache.Catalog = e.Cat
	if tier == "local" {
		fh, err := os.OpenFile(segs[bad.seg].Path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(mod, bad.pos); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	} else {
		mem := objstore.NewMemory()
		fetchkit.UploadAll(t, e, mem)
		key := segmentLogKey(t, mem, segs[bad.seg].BaseOffset)
		obj := objectBytes(t, mem, key)
		copy(obj[bad.pos:], mod)
		if _, err := mem.Put(context.Background(), key, bytes.NewReader(obj), int64(len(obj)), objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
		// Small chunks: reads come back in parts of the cache's memory.
		cb, err := chunkcache.NewCachingBucket(mem, chunkcache.CacheOptions{ChunkBytes: 4 << 10, MemoryBytes: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cb.Close() })
		if cat, err = fetchcache.NewRemoteCatalog(cb, fetchcache.RemoteCatalogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	s, err := Listen(ServerOptions{Catalog: cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Logger: fetchkit.DiscardLogger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	fetchkit.Serve(t, s.Serve)
	base := "http://" + s.HTTPAddr().String()

	want := map[int64]record.Batch{}
	for _, b := range batches {
		want[b.bytes.BaseOffset()] = b.bytes
	}
	badOffset := bad.bytes.BaseOffset()
	// checkBatches holds served bytes to the batches written and returns
	// the offset after them.
	checkBatches := func(t *testing.T, iface string, from int64, data []byte) int64 {
		t.Helper()
		it := record.NewIter(data)
		next := from
		for {
			b, ok := it.Next()
			if !ok {
				break
			}
			if !bytes.Equal(b, want[b.BaseOffset()]) || b.BaseOffset() >= badOffset {
				t.Fatalf("%s at %d served a batch at offset %d that is not the one written there (bad batch at %d)", iface, from, b.BaseOffset(), badOffset)
			}
			next = b.NextOffset()
		}
		if it.Pos() != len(data) {
			t.Fatalf("%s at %d: %d bytes, %d of whole batches", iface, from, len(data), it.Pos())
		}
		return next
	}

	// untilCorrupt reads from offset 0 as a consumer does, advancing by
	// what each answer held, until the answer is the corrupt one: it
	// must come at the bad batch.
	untilCorrupt := func(t *testing.T, iface string, read func(off int64) (corrupt bool, answer string, data []byte), advance func(off int64, data []byte) int64) {
		off := int64(0)
		for {
			corrupt, answer, data := read(off)
			if corrupt {
				break
			}
			if answer != "" || len(data) == 0 {
				t.Fatalf("%s at %d: %s, %d bytes, before reaching the corrupt batch at %d", iface, off, answer, len(data), badOffset)
			}
			off = advance(off, data)
		}
		if off != badOffset {
			t.Fatalf("%s: CORRUPT_MESSAGE at %d, the corrupt batch is at %d", iface, off, badOffset)
		}
	}
	httpRead := func(t *testing.T, maxBytes int, media string) func(int64) (bool, string, []byte) {
		return func(off int64) (bool, string, []byte) {
			status, code, data := httpRecords(t, base, off, maxBytes, media)
			if status != http.StatusOK {
				return status == http.StatusInternalServerError && code == fetchcache.CodeCorruptMessage, fmt.Sprintf("%d %s", status, code), data
			}
			return false, "", data
		}
	}
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.KafkaAddr().String()))
	for _, maxBytes := range []int{1, 3000} {
		t.Run(fmt.Sprintf("kafka/max%d", maxBytes), func(t *testing.T) {
			untilCorrupt(t, "kafka", func(off int64) (bool, string, []byte) {
				code, data := fetchOne(t, cl, "t", off, maxBytes)
				if code != 0 {
					return code == kerr.CorruptMessage.Code, kerr.ErrorForCode(code).Error(), data
				}
				return false, "", data
			}, func(off int64, data []byte) int64 { return checkBatches(t, "kafka", off, data) })
		})
		t.Run(fmt.Sprintf("http_raw/max%d", maxBytes), func(t *testing.T) {
			untilCorrupt(t, "http raw", httpRead(t, maxBytes, httpapi.MediaRaw),
				func(off int64, data []byte) int64 { return checkBatches(t, "http raw", off, data) })
		})
		// HTTP JSON lines: the records with their offsets and values.
		t.Run(fmt.Sprintf("http_json/max%d", maxBytes), func(t *testing.T) {
			untilCorrupt(t, "http json", httpRead(t, maxBytes, httpapi.MediaNDJSON), func(off int64, data []byte) int64 {
				sc := bufio.NewScanner(bytes.NewReader(data))
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					var r struct {
						Offset int64  `json:"offset"`
						Value  string `json:"value"`
					}
					if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
						t.Fatal(err)
					}
					if r.Offset != off || r.Offset >= badOffset {
						t.Fatalf("http json: record at offset %d, want %d (corrupt batch at %d)", r.Offset, off, badOffset)
					}
					if wv := recs[r.Offset].Value; utf8.Valid(wv) && r.Value != string(wv) {
						t.Fatalf("http json: record %d has value %q, written %q", r.Offset, r.Value, wv)
					}
					off++
				}
				return off
			})
		})
	}
	if t.Failed() {
		return
	}
	if n := counterValue(t, reg, "tiered_fetch_corrupt_objects_total"); n < 6 {
		t.Fatalf("tiered_fetch_corrupt_objects_total = %v, want the 6 refusals counted", n)
	}
}

func fetchOne(t *testing.T, cl *kgo.Client, topic string, off int64, maxBytes int) (int16, []byte) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 10, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, off, int32(maxBytes), -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafka fetch at %d: %v", off, err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.RecordBatches
}

func httpRecords(t *testing.T, base string, off int64, maxBytes int, accept string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/topics/t/partitions/0/records?offset=%d&max_bytes=%d", base, off, maxBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Code string `json:"code"`
	}
	if resp.StatusCode != http.StatusOK {
		_ = json.Unmarshal(body, &e)
	}
	return resp.StatusCode, e.Code, body
}

// segmentLogKey finds the .log object of the segment based at base.
func segmentLogKey(t *testing.T, b objstore.BucketReader, base int64) string {
	t.Helper()
	var key string
	err := b.List(context.Background(), "", func(oi objstore.ObjectInfo) error {
		k, err := manifest.ParseKey(oi.Key)
		if err == nil && k.Type == manifest.KeyData && k.File == manifest.FileLog && k.BaseOffset == base {
			key = oi.Key
		}
		return nil
	})
	if err != nil || key == "" {
		t.Fatalf("no .log object for base offset %d (%v)", base, err)
	}
	return key
}

func objectBytes(t *testing.T, b objstore.BucketReader, key string) []byte {
	t.Helper()
	rc, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// objectKeyRE matches a segment object's key in a message.
var objectKeyRE = regexp.MustCompile(`data/[^ "]+\.log`)

// TestClaimedEndIsNotAdvertised rewrites a partition's root manifest so
// that its final segment claims offsets its bytes do not hold — up to 2^31-1
// past its base (what manifest validation lets through) or 2^63-2 (refused
// on decode) — and asks the fetch service for the partition's offsets over
// Kafka (Fetch, ListOffsets) and HTTP: none of them advertises the claim as
// the high watermark; each answers CORRUPT_MESSAGE.
func TestClaimedEndIsNotAdvertised(t *testing.T) {
	for _, tc := range []struct {
		name string
		last func(base int64) int64
	}{
		{"span limit", func(base int64) int64 { return base + manifest.MaxSegmentSpan }},
		{"2^63-2", func(int64) int64 { return 1<<63 - 2 }},
		{"one past", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fetchkit.NewEnv(t)
			e.Topic("t", 1, map[string]string{"internal.segment.bytes": "8192", "remote.storage.enable": "true"})
			l := e.Log("t", 0)
			e.Produce(l, fetchkit.ProduceOpts{Codec: codec.None, Per: 8}, fetchkit.GenRecs(100, ts0, "e"))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			mem := objstore.NewMemory()
			fetchkit.UploadAll(t, e, mem)
			key, err := manifest.ManifestKey("", "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.DecodeRoot(key, objectBytes(t, mem, key))
			if err != nil || len(m.Segments) == 0 {
				t.Fatalf("manifest: %v", err)
			}
			seg := &m.Segments[len(m.Segments)-1]
			if tc.last == nil {
				seg.LastOffset++
			} else {
				seg.LastOffset = tc.last(seg.BaseOffset)
			}
			claim := seg.LastOffset + 1
			// Encoded by hand: EncodeRoot validates, and the writer of a
			// bad manifest is not tiered.
			root := bytes.Replace(objectBytes(t, mem, key),
				[]byte(fmt.Sprintf(`"last_offset":%d`, l.LogEndOffset()-1)), []byte(fmt.Sprintf(`"last_offset":%d`, claim-1)), 1)
			if bytes.Equal(root, objectBytes(t, mem, key)) {
				t.Fatal("the root manifest does not hold the final segment's last offset")
			}
			if _, err := mem.Put(context.Background(), key, bytes.NewReader(root), int64(len(root)), objstore.Condition{}); err != nil {
				t.Fatal(err)
			}
			cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := Listen(ServerOptions{Catalog: cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", Logger: fetchkit.DiscardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			fetchkit.Serve(t, s.Serve)
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.KafkaAddr().String()))

			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 10, 1, 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			fp := resp.Topics[0].Partitions[0]
			if fp.ErrorCode != kerr.CorruptMessage.Code || fp.HighWatermark == claim {
				t.Fatalf("fetch: error %d, high watermark %d (claimed %d)", fp.ErrorCode, fp.HighWatermark, claim)
			}

			lo := kmsg.NewPtrListOffsetsRequest()
			lo.Version = 5
			lo.ReplicaID = -1
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = "t"
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			lr, err := lo.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if p := lr.Topics[0].Partitions[0]; p.ErrorCode != kerr.CorruptMessage.Code || p.Offset == claim {
				t.Fatalf("list offsets latest: error %d, offset %d (claimed %d)", p.ErrorCode, p.Offset, claim)
			}

			hr, err := http.Get("http://" + s.HTTPAddr().String() + "/v1/topics/t/partitions/0")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(hr.Body)
			hr.Body.Close()
			// The object's key holds a random hex id, which may hold the
			// claim's digits: it is left out of the search.
			numbers := objectKeyRE.ReplaceAll(body, nil)
			if hr.StatusCode != http.StatusInternalServerError || !bytes.Contains(body, []byte(fetchcache.CodeCorruptMessage)) || bytes.Contains(numbers, []byte(fmt.Sprint(claim))) {
				t.Fatalf("http partition: %d %s (claimed end %d)", hr.StatusCode, body, claim)
			}
		})
	}
}
