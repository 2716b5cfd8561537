package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// besideCatalog hands out partitions whose Offsets waits for a Read to
// have started, and then fails with offsetsErr if set.
type besideCatalog struct {
	fetchcache.Catalog
	offsetsErr error
}

func (c besideCatalog) Partition(ctx context.Context, topic string, p int32) (fetchcache.Partition, error) {
	part, err := c.Catalog.Partition(ctx, topic, p)
	if err != nil {
		return nil, err
	}
	return &besidePartition{Partition: part, reading: make(chan struct{}), read: make(chan struct{}), offsetsErr: c.offsetsErr}, nil
}

type besidePartition struct {
	fetchcache.Partition
	reading, read chan struct{}
	offsetsErr    error
}

func (p *besidePartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	close(p.reading)
	defer close(p.read)
	return p.Partition.Read(ctx, offset, maxBytes)
}

func (p *besidePartition) Offsets(ctx context.Context) (fetchcache.Offsets, error) {
	select {
	case <-p.reading:
	case <-time.After(5 * time.Second):
		return fetchcache.Offsets{}, errors.New("no read started beside the offsets")
	}
	if p.offsetsErr != nil {
		<-p.read // the read is done and its data ready: still not served
		return fetchcache.Offsets{}, p.offsetsErr
	}
	return p.Partition.Offsets(ctx)
}

// A read at a given offset runs beside the partition's offsets (a cold
// partition's end check), not after them; its data is served only once
// they are known, and not at all when they fail.
func TestRecordsReadBesideOffsets(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("side", 1, nil)
	e.Produce(e.Log("side", 0), fetchkit.ProduceOpts{Codec: codec.None, Per: 5}, fetchkit.GenRecs(20, ts0, "s"))
	for _, tc := range []struct {
		name, accept string
		offsetsErr   error
		status       int
		body         string
	}{
		{"raw", MediaRaw, nil, http.StatusOK, ""},
		{"ndjson", MediaNDJSON, nil, http.StatusOK, `"offset":0`},
		{"raw, offsets fail", MediaRaw, &fetchcache.UnknownTopicOrPartitionError{Topic: "side"}, http.StatusNotFound, fetchcache.CodeUnknownTopicOrPartition},
		{"ndjson, offsets fail", MediaNDJSON, errors.New("disk on fire"), http.StatusInternalServerError, fetchcache.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: besideCatalog{Catalog: e.Cat, offsetsErr: tc.offsetsErr}}))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/v1/topics/side/partitions/0/records?offset=0", nil)
			req.Header.Set("Accept", tc.accept)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == http.StatusOK && (len(b) == 0 || resp.Header.Get(HeaderLogEndOffset) != "20") {
				t.Fatalf("%d bytes, log end %q, want data and 20", len(b), resp.Header.Get(HeaderLogEndOffset))
			}
			if !strings.Contains(string(b), tc.body) {
				t.Fatalf("body %.300q lacks %q", b, tc.body)
			}
		})
	}
}
