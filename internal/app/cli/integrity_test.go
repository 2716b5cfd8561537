package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// TestConsumeStopsAtCorruptBatch flips a bit in the base offset of one
// batch (outside the CRC; consume used to print 2,024 of 2,088 records
// and exit 0), or a checksummed byte, in the data dir's segment or in the
// bucket's object, and consumes with --data-dir, --bucket and --fetch, and
// replays: each prints the records before the bad batch with their
// offsets, nothing of it or after, and exits 1 naming the file or object
// and the byte position.
func TestConsumeStopsAtCorruptBatch(t *testing.T) {
	flips := []struct {
		name string
		flip func(b []byte)
	}{
		{"base_offset", func(b []byte) { b[7] ^= 0x01 }},
		{"base_offset_high_bit", func(b []byte) { b[5] ^= 0x10 }},
		{"checksummed_byte", func(b []byte) { b[len(b)-3] ^= 0x40 }},
	}
	for _, f := range flips {
		t.Run(f.name, func(t *testing.T) {
			dir, bucketURL, u := remoteFixture(t)
			segFile := segPath(dir, "c", 0)
			batches := segmentBatches(t, segFile)
			k := len(batches) / 2
			var pos int64
			for _, b := range batches[:k] {
				pos += int64(b.Size())
			}
			bad := batches[k]
			badOffset := bad.BaseOffset()
			mod := append([]byte(nil), bad...)
			f.flip(mod)
			objPath := filepath.Join(strings.TrimPrefix(bucketURL, "file://"), u.keys[0])
			for _, path := range []string{segFile, objPath} {
				fh, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fh.WriteAt(mod, pos); err != nil {
					t.Fatal(err)
				}
				fh.Close()
			}
			fetch := serveFetch(t, bucketURL)
			consume := []string{"consume", "--topic", "c", "--partition", "0"}
			for _, tc := range []struct {
				name  string
				args  []string
				names string // the file or object the error names
			}{
				{"data_dir", append(consume, "--data-dir", dir), segFile},
				{"bucket", append(consume, "--bucket", bucketURL), u.keys[0]},
				{"fetch", append(consume, "--fetch", fetch), u.keys[0]},
			} {
				t.Run(tc.name, func(t *testing.T) {
					res := run(t, "", tc.args...)

					if res.code != ExitError {
						t.Fatalf("exit %d, want %d; stderr %q", res.code, ExitError, res.stderr)
					}
					if want := fmt.Sprintf("position %d", pos); !strings.Contains(res.stderr, tc.names) || !strings.Contains(res.stderr, want) {
						t.Fatalf("stderr %q does not name %s and %q", res.stderr, tc.names, want)
					}
					if !strings.Contains(res.stderr, "tiered bucket verify") {
						t.Fatalf("stderr %q lacks the hint for corrupt data", res.stderr)
					}
					out := lines(res.stdout)
					for i, l := range out {
						var r struct{ Offset int64 }
						if err := json.Unmarshal([]byte(l), &r); err != nil || r.Offset != int64(i) {
							t.Fatalf("line %d: offset %d (%v): %s", i, r.Offset, err, l)
						}
					}
					if int64(len(out)) != badOffset {
						t.Fatalf("printed %d records, the corrupt batch starts at %d", len(out), badOffset)
					}
				})
			}
			t.Run("replay", func(t *testing.T) {
				res := run(t, "", "replay", "--topic", "c", "--partition", "0", "--from", "0", "--to", "9999999999999", "--bucket", bucketURL)
				if res.code != ExitError || !strings.Contains(res.stderr, u.keys[0]) {
					t.Fatalf("exit %d, stderr %q; want exit 1 naming %s", res.code, res.stderr, u.keys[0])
				}
				if n := len(lines(res.stdout)); int64(n) > badOffset {
					t.Fatalf("replay printed %d records, the corrupt batch starts at %d", n, badOffset)
				}
			})
		})
	}
}

// TestConsumeFetchChecksTheAnswer serves consume --fetch from a service that
// does not check its batches (an older tiered): the answer holds a batch
// whose base offset went back. consume prints the records before it and
// exits 1 instead of printing records under wrong offsets.
func TestConsumeFetchChecksTheAnswer(t *testing.T) {
	var enc record.Encoder
	var answer []byte
	for i := range 3 {
		recs := make([]record.Record, 10)
		for k := range recs {
			recs[k] = record.Record{Offset: int64(i*10 + k), Timestamp: 1000, Value: []byte(fmt.Sprintf("v%d", i*10+k))}
		}
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(int64(i*10), codec.None), recs)
		if err != nil {
			t.Fatal(err)
		}
		answer = append(answer, b...)
	}
	second := int(record.Batch(answer).Length()) + record.LogOverhead
	record.Batch(answer[second:]).SetBaseOffset(2) // 10 -> 2: outside the CRC
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/records"):
			w.Header().Set(httpapi.HeaderLogStartOffset, "0")
			w.Header().Set(httpapi.HeaderLogEndOffset, "30")
			_, _ = w.Write(answer)
		default:
			_, _ = w.Write([]byte(`{"log_start_offset":0,"log_end_offset":30}`))
		}
	}))
	defer srv.Close()
	res := run(t, "", "consume", "--fetch", srv.URL, "--topic", "c", "--partition", "0")
	if res.code != ExitError || !strings.Contains(res.stderr, "does not follow the previous batch's last offset 9") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if got := values(t, res.stdout); got != "v0,v1,v2,v3,v4,v5,v6,v7,v8,v9" {
		t.Fatalf("printed %q", got)
	}
}
