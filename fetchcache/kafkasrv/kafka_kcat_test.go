package kafkasrv

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
)

// TestKcat consumes with librdkafka's kcat, from the beginning and from a
// timestamp, across segments and codecs, and compares its output with the
// records produced.
func TestKcat(t *testing.T) {
	kcat := fetchkit.KcatPath(t)
	e := fetchkit.NewEnv(t)
	e.Topic("kc", 1, nil)
	l := e.Log("kc", 0)
	var want []fetchkit.Rec
	for i, c := range []codec.Codec{codec.None, codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd} {
		recs := make([]fetchkit.Rec, 40)
		for j := range recs {
			n := i*40 + j
			recs[j] = fetchkit.Rec{Timestamp: ts0 + int64(n)*10, Key: []byte(fmt.Sprintf("key-%d", n)), Value: []byte(fmt.Sprintf("%s value %d %s", c, n, strings.Repeat("x", n%17)))}
		}
		want = append(want, e.Produce(l, fetchkit.ProduceOpts{Codec: c, Per: 6}, recs)...)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("setup: %d segments", len(l.Segments()))
	}
	addr := startKafka(t, e.Cat, KafkaOptions{})
	lines := func(rs []fetchkit.Rec) string {
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, "%d %s %s\n", r.Offset, r.Key, r.Value)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, from string
		want       []fetchkit.Rec
	}{
		{"beginning", "beginning", want},
		{"absolute", "117", want[117:]},
		{"timestamp", fmt.Sprintf("s@%d", ts0+10*133+3), want[134:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, kcat, "-C", "-b", addr, "-t", "kc", "-p", "0", "-o", tc.from, "-e", "-q", "-f", `%o %k %s\n`)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kcat: %v\n%s", err, stderr.String())
			}
			if got, w := string(out), lines(tc.want); got != w {
				t.Fatalf("kcat output differs (%d vs %d bytes)\ngot:\n%.600s\nwant:\n%.600s\nstderr: %s", len(got), len(w), got, w, stderr.String())
			}
		})
	}
}
