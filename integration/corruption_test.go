package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/chunkcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// flipByte rewrites object key in bucket with the byte at pos inverted,
// behind tiered's back (minio-go, the independent client).
func flipByte(t testing.TB, c *minio.Client, bucket, key string, pos int) {
	t.Helper()
	data, err := minioGet(t, c, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	data[pos] ^= 0xff
	if _, err := c.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fetchStatus is what one HTTP records request answered.
type fetchStatus struct {
	status int
	code   string
	data   []byte
}

func httpFetch(t testing.TB, base, topic string, p int32, off int64) fetchStatus {
	t.Helper()
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_bytes=1", base, topic, p, off)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", httpapi.MediaRaw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	fs := fetchStatus{status: resp.StatusCode, data: body}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("GET %s: %d with a body that is not a JSON error: %q", u, resp.StatusCode, body)
		}
		fs.code = e.Code
	}
	return fs
}

// kafkaFetch sends one Fetch (v12) for topic-partition at off with franz-go.
func kafkaFetch(t testing.TB, cl *kgo.Client, topic string, p int32, off int64) (int16, []byte) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, off, 1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafka fetch at %d: %v", off, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("kafka fetch at %d: response shape %+v", off, resp)
	}
	part := resp.Topics[0].Partitions[0]
	return part.ErrorCode, part.RecordBatches
}

// TestCorruptRemoteObjects flips one byte in an uploaded segment's .log
// (inside one batch's records) and one in another segment's .index, with
// minio-go. Reading every batch of the partition through the fetch
// service, over HTTP and over Kafka (franz-go): the corrupt batch answers
// an error (HTTP 500 CORRUPT_MESSAGE, Kafka CORRUPT_MESSAGE), never data;
// every other batch is served byte for byte (a sequential read enters a
// segment at its first byte and needs no index); a new reader starting
// inside the segment with the corrupt index is refused the same way; tiered_fetch_corrupt_objects_total counts the
// refusals; VerifyBucket reports both objects.
func TestCorruptRemoteObjects(t *testing.T) {
	cd := buildCold(t, func(d *localtier.LogDir) {
		createTopic(t, d, "events", 1, nil)
		appendSegments(t, d, 1, 4, 200<<10)
	})
	ctx := context.Background()
	key := storeManifestKey(t, cd.store, "events", 0)
	m, err := remotelog.LoadRoot(ctx, cd.store, key)
	if err != nil {
		t.Fatal(err)
	}
	var segs []manifest.Segment
	if err := m.Walk(ctx, remotelog.BucketResolver(cd.store), func(s manifest.Segment) error {
		segs = append(segs, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("%d segments uploaded, want at least 4", len(segs))
	}
	want, end := expectedBatches(t, cd.logBytes["events-0"])

	// The .log of segment 1: a byte in the records of its middle batch.
	logObj, err := minioGet(t, cd.srv.Client(), cd.bucket, segs[1].Log.Key)
	if err != nil {
		t.Fatal(err)
	}
	var positions []int
	var bases []record.Batch
	it := record.NewIter(logObj)
	for pos := 0; ; {
		b, ok := it.Next()
		if !ok {
			break
		}
		positions = append(positions, pos)
		bases = append(bases, b)
		pos += len(b)
	}
	mid := len(bases) / 2
	bad := bases[mid]
	badFirst, badLast := bad.BaseOffset(), bad.LastOffset()
	flipByte(t, cd.srv.Client(), cd.bucket, segs[1].Log.Key, positions[mid]+record.HeaderSize+100)
	// The .index of segment 2.
	if segs[2].Index.Size == 0 {
		t.Fatal("segment 2 has an empty index")
	}
	flipByte(t, cd.srv.Client(), cd.bucket, segs[2].Index.Key, 5)
	idxFirst, idxLast := segs[2].BaseOffset, segs[2].LastOffset

	fs := startFetch(t, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
	cl := byNameClient(t, fs.kafkaAddr)

	checked, refused := 0, 0
	for off := int64(0); off < end; {
		b := want[off]
		if b == nil {
			t.Fatalf("no expected batch at %d", off)
		}
		// A sequential read enters segment 2 at its first byte and never
		// needs its index (one GET per segment), so its batches are served;
		// the read that needs the corrupt index is checked below.
		corrupt := off >= badFirst && off <= badLast
		h := httpFetch(t, fs.httpURL, "events", 0, off)
		code, kdata := kafkaFetch(t, cl, "events", 0, off)
		switch {
		case corrupt:
			if h.status != http.StatusInternalServerError || h.code != fetchcache.CodeCorruptMessage {
				t.Fatalf("HTTP at corrupt offset %d: %d %q %.80q", off, h.status, h.code, h.data)
			}
			if code != kerr.CorruptMessage.Code || len(kdata) != 0 {
				t.Fatalf("Kafka at corrupt offset %d: error %v, %d bytes", off, kerr.ErrorForCode(code), len(kdata))
			}
			refused += 2
		default:
			if h.status != http.StatusOK {
				t.Fatalf("HTTP at healthy offset %d: %d %q", off, h.status, h.code)
			}
			n, _ := matchBatches(t, fmt.Sprintf("HTTP at %d", off), h.data, want)
			if code != 0 {
				t.Fatalf("Kafka at healthy offset %d: %v", off, kerr.ErrorForCode(code))
			}
			k, _ := matchBatches(t, fmt.Sprintf("Kafka at %d", off), kdata, want)
			checked += n + k
		}
		off = record.Batch(b).NextOffset()
	}
	if got := fs.counter(t, "tiered_fetch_corrupt_objects_total"); got != float64(refused) {
		t.Fatalf("tiered_fetch_corrupt_objects_total = %v, want %d", got, refused)
	}

	// A new fetch process reading from the middle of segment 2 must look the
	// offset up in the corrupt index: refused over both interfaces, never data.
	var mid2 int64 = -1
	for off := idxFirst; off <= idxLast; {
		b := want[off]
		if b == nil {
			t.Fatalf("no expected batch at %d", off)
		}
		if off > idxFirst {
			mid2 = off
			break
		}
		off = record.Batch(b).NextOffset()
	}
	if mid2 < 0 {
		t.Fatal("segment 2 has a single batch; the index is never needed")
	}
	fs2 := startFetch(t, cd.store, chunkcache.CacheOptions{}, kafkasrv.KafkaOptions{})
	cl2 := byNameClient(t, fs2.kafkaAddr)
	if h := httpFetch(t, fs2.httpURL, "events", 0, mid2); h.status != http.StatusInternalServerError || h.code != fetchcache.CodeCorruptMessage {
		t.Fatalf("HTTP inside the segment with the corrupt index (offset %d): %d %q %.80q", mid2, h.status, h.code, h.data)
	}
	if code, kdata := kafkaFetch(t, cl2, "events", 0, mid2); code != kerr.CorruptMessage.Code || len(kdata) != 0 {
		t.Fatalf("Kafka inside the segment with the corrupt index (offset %d): error %v, %d bytes", mid2, kerr.ErrorForCode(code), len(kdata))
	}
	if got := fs2.counter(t, "tiered_fetch_corrupt_objects_total"); got != 2 {
		t.Fatalf("second fetch: tiered_fetch_corrupt_objects_total = %v, want 2", got)
	}
	refused += 2

	vr, err := remotetier.VerifyBucket(ctx, cd.store, remotetier.DefaultVerifyOptions())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]remotetier.ProblemKind{}
	for _, p := range vr.Problems {
		found[p.Key] = append(found[p.Key], p.Kind)
	}
	// The .log fails its checksum and its batch walk (the batch's CRC).
	if vr.OK() || !slices.Equal(found[segs[1].Log.Key], []remotetier.ProblemKind{remotetier.ProblemChecksum, remotetier.ProblemLog}) ||
		!slices.Equal(found[segs[2].Index.Key], []remotetier.ProblemKind{remotetier.ProblemChecksum}) || len(vr.Problems) != 3 {
		var lines []string
		for _, p := range vr.Problems {
			lines = append(lines, p.String())
		}
		t.Fatalf("verify found:\n%s", strings.Join(lines, "\n"))
	}
	t.Logf("%d records served intact, %d corrupt reads refused, verify named %d objects", checked, refused, len(vr.Problems))
	reliability.Record(t, "corruption: flipped byte in a remote .log and .index (HTTP, Kafka, verify)", 1, checked, 0)
}
