package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/compactor"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestFetchServesNoRecordTheCleanerEmptied: serve mode's compactor empties
// the segment holding K=v1 (K's tombstone follows in the next segment,
// too big to be cleaned in one group with it); segment.bytes is lowered
// so the next cleaning leaves the empty segment alone, and drops the
// tombstone once delete.retention.ms passed. A consumer of the fetch
// service (HTTP, from the log start to the end) must not get K=v1: before
// the uploader removed the ranges the cleaner emptied it got K=v1 and no
// tombstone, a deleted key back.
func TestFetchServesNoRecordTheCleanerEmptied(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.CreateTopic("c", 1, map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0", "internal.segment.bytes": "1000", "delete.retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	l, err := d.Partition("c", 0)
	if err != nil {
		t.Fatal(err)
	}
	appendRec := func(key string, value []byte) {
		t.Helper()
		var e record.Encoder
		data, err := e.AppendBatch(nil, record.NewBatchSpec(0, codec.None),
			[]record.Record{{Timestamp: now.UnixMilli(), Key: []byte(key), Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(data); err != nil {
			t.Fatal(err)
		}
	}
	roll := func() {
		t.Helper()
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	pad := bytes.Repeat([]byte{'.'}, 600)
	appendRec("K", append([]byte("v1"), pad...))
	roll()
	appendRec("K", nil)
	appendRec("X", append([]byte("x1"), pad...))
	roll()
	appendRec("Y", []byte("y1"))

	name := "review-emptied-" + t.Name()
	t.Cleanup(func() { objstore.DropMemory(name) })
	bkt, err := objstore.Open(ctx, "mem://"+name)
	if err != nil {
		t.Fatal(err)
	}
	u, err := remotetier.NewUploader(bkt, remotetier.NewLocalSource(d, nil), remotetier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clean := func(at time.Time) {
		t.Helper()
		if _, err := compactor.RunOnce(ctx, d, compactor.PassOptions{Force: true, Config: compactor.Config{Now: func() time.Time { return at }}}); err != nil {
			t.Fatal(err)
		}
		if _, err := u.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := u.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	clean(now)
	if err := d.AlterTopic("c", map[string]string{"internal.segment.bytes": "700"}, nil); err != nil {
		t.Fatal(err)
	}
	clean(now.Add(time.Hour))
	if segs := l.Segments(); segs[0].Size != 0 {
		t.Fatalf("the cleaning merged the empty segment (%+v); the test needs it alone", segs[0])
	}

	f := startLiveFetchService(t, "mem://"+name)
	type rec struct {
		Offset int64   `json:"offset"`
		Key    string  `json:"key"`
		Value  *string `json:"value"`
	}
	var got []string
	table := map[string]string{}
	for off := int64(-1); ; {
		url := fmt.Sprintf("http://%s/v1/topics/c/partitions/0/records", f.HTTPAddr())
		if off >= 0 {
			url += "?offset=" + strconv.FormatInt(off, 10)
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			if line == "" {
				continue
			}
			var r rec
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bad line %q: %v", line, err)
			}
			if r.Value == nil {
				got = append(got, fmt.Sprintf("%d:%s=<tombstone>", r.Offset, r.Key))
				delete(table, r.Key)
			} else {
				v := (*r.Value)[:2]
				got = append(got, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, v))
				table[r.Key] = v
			}
		}
		next, err := strconv.ParseInt(resp.Header.Get("X-Tiered-Next-Offset"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		end, err := strconv.ParseInt(resp.Header.Get("X-Tiered-Log-End-Offset"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if next >= end || next == off {
			break
		}
		off = next
	}
	if _, ok := table["K"]; ok || len(table) != 1 || table["X"] != "x1" {
		t.Fatalf("the fetch service serves %v (table %v); want X=x1 alone, never the deleted key K", got, table)
	}
}
