package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestLostRangeAnswered: offsets the source deleted before they were
// uploaded (a gap the manifest records) are answered as Kafka answers a
// deleted range — OFFSET_OUT_OF_RANGE over Kafka, 416 OFFSET_OUT_OF_RANGE
// over HTTP — while the offsets on both sides of the hole are served.
func TestLostRangeAnswered(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("holes", 1, map[string]string{"remote.storage.enable": "true"})
	l := e.Log("holes", 0)
	e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(40, ts0, "a"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mem := objstore.NewMemory()
	fetchkit.UploadAll(t, e, mem)
	committed := l.LogEndOffset()
	e.Produce(l, fetchkit.ProduceOpts{}, fetchkit.GenRecs(60, ts0+1000, "b"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	var newBases []int64
	for _, s := range l.Segments() {
		if s.BaseOffset >= committed {
			newBases = append(newBases, s.BaseOffset)
		}
	}
	if len(newBases) < 4 || newBases[0] != committed {
		t.Fatalf("test setup: new segments at %v after %d", newBases, committed)
	}
	lostTo := newBases[2] // the first two new segments go before their upload
	if _, err := l.DeleteSegments(lostTo); err != nil {
		t.Fatal(err)
	}
	fetchkit.UploadAll(t, e, mem)
	all := testrecs.FromLog(t, l) // what is left locally: from lostTo on

	cat, err := fetchcache.NewRemoteCatalog(mem, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startKafka(t, cat, kafkasrv.KafkaOptions{})
	cl := fetchkit.ByNameClient(t, addr)
	fetchAt := func(off int64) kmsg.FetchResponseTopicPartition { return fetchkit.FetchOne(t, cl, "holes", 0, off) }
	for _, off := range []int64{0, committed - 1, lostTo, lostTo + 1} {
		if p := fetchAt(off); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
			t.Fatalf("Kafka fetch at %d (served): error %v, %d bytes", off, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
		}
	}
	for _, off := range []int64{committed, lostTo - 1} {
		p := fetchAt(off)
		if p.ErrorCode != kerr.OffsetOutOfRange.Code || len(p.RecordBatches) != 0 {
			t.Fatalf("Kafka fetch at %d inside the hole: error %v, %d bytes; want OFFSET_OUT_OF_RANGE and nothing",
				off, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
		}
	}
	// A consumer that starts after the hole reads every record there is.
	fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, addr, "holes", 0, kgo.NewOffset().At(lostTo), len(all)), all)

	h := httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat})
	get := func(off int64) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/topics/holes/partitions/0/records?offset="+strconv.FormatInt(off, 10), nil))
		return w
	}
	if w := get(committed); w.Code != http.StatusRequestedRangeNotSatisfiable || !strings.Contains(w.Body.String(), `"OFFSET_OUT_OF_RANGE"`) ||
		!strings.Contains(w.Body.String(), "before they were uploaded") {
		t.Fatalf("HTTP read inside the hole: %d %s", w.Code, w.Body.String())
	}
	if w := get(lostTo); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"offset":`+strconv.FormatInt(lostTo, 10)) {
		t.Fatalf("HTTP read after the hole: %d %.300s", w.Code, w.Body.String())
	}
}
