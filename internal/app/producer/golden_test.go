package producer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestProduceWritesTheSameBatches pins the bytes Produce writes (the
// segment files) and its results for inputs that exercise keyed and
// keyless (sticky) partitioning, batch.size, a record larger than a batch,
// headers, timestamps, gzip and none, a fixed partition and appends split
// at MaxAppendBytes. The digest was taken before produce encoded records
// as it parsed them; it must not change with how Produce holds them.
func TestProduceWritesTheSameBatches(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	dir := t.TempDir()
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.CreateTopic("gz", 3, map[string]string{"compression.type": "gzip"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic("none", 4, nil); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	for i := range 6000 {
		switch {
		case i == 777:
			fmt.Fprintf(&body, `{"key":"big","value":"%s"}`+"\n", strings.Repeat("v", 40000))
		case i%7 == 0:
			fmt.Fprintf(&body, `{"value":"%s","timestamp":%d}`+"\n", strings.Repeat("x", i%300), now.UnixMilli()-int64(i%50))
		case i%11 == 0:
			fmt.Fprintf(&body, `{"key":"k%d","value":null,"headers":[{"key":"h","value":"%d"}]}`+"\n", i%13, i)
		case i%5 == 0:
			body.WriteString("\n")
			fallthrough
		default:
			fmt.Fprintf(&body, `{"key_b64":"%s","value":"%s"}`+"\n", "AAE=", strings.Repeat("y", i%500))
		}
	}
	var results []Result
	for _, run := range []struct {
		topic string
		part  int
	}{{"gz", -1}, {"none", -1}, {"none", 2}, {"gz", -1}} {
		res, err := produceFrom(d, run.topic, bytes.NewReader(body.Bytes()), now.UnixMilli(), Options{Partition: run.part, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	// A missing topic, auto-created.
	res, err := produceFrom(d, "auto", strings.NewReader(`{"key":"a"}`+"\n"+`{}`), now.UnixMilli(), Options{Partition: -1, AutoCreate: true, AutoCreatePartitions: 2, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, res)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var names []string
	if err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".log") {
			names = append(names, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, n)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	js, _ := json.Marshal(results)
	h.Write(js)
	const want = "bf17b805a816e6f53c3ce58e7b2adbae13caa1255e3cb57d65c46feb438956df"
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != want {
		t.Fatalf("segments and results digest %s, want %s\nresults: %s", got, want, js)
	}
}
