package compactor

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// benchLogBytes is the size of BenchmarkClean's log: TIERED_BENCH_COMPACT_BYTES
// (scripts/bench sets 1 GiB), default 64 MiB so CI stays fast.
func benchLogBytes(b *testing.B) int64 {
	if s := os.Getenv("TIERED_BENCH_COMPACT_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("TIERED_BENCH_COMPACT_BYTES=%q: want a positive byte count", s)
		}
		return n
	}
	return 64 << 20
}

// benchPristine writes, once, a data dir holding a compacted topic with one
// rolled segment of about size bytes: 1 KiB records, 16 per batch, keys
// drawn from size/1KiB/10 distinct keys (10% distinct).
func benchPristine(b *testing.B, size int64) (dir string, records int64) {
	dir = filepath.Join(b.TempDir(), "pristine")
	d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.CreateTopic("bench", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		b.Fatal(err)
	}
	l, _ := d.Partition("bench", 0)
	n := size / 1100
	keys := max(n/10, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	var enc record.Encoder
	recs := make([]record.Record, 16)
	var buf []byte
	ts := time.Now().UnixMilli()
	for i := int64(0); i < n; i += 16 {
		for j := range recs {
			recs[j] = record.Record{Offset: int64(j), Timestamp: ts, Key: []byte(fmt.Sprintf("key-%010d", rng.Int64N(keys))), Value: value}
		}
		if buf, err = enc.AppendBatch(buf[:0], record.NewBatchSpec(0, codec.None), recs); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, n - n%16 + 16*min(n%16, 1)
}

// copyTree copies the regular files of src into dst (one level of
// subdirectories), fsyncing each: the physical baseline.
func copyTree(b *testing.B, src, dst string) int64 {
	var total int64
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if fi.Name() == ".lock" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		n, err := io.CopyBuffer(out, in, make([]byte, 1<<20))
		total += n
		if err == nil {
			err = out.Sync()
		}
		return errorsJoin(err, out.Close())
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkClean cleans a log of 1 KiB records with 10% distinct keys and,
// as the baseline, copies the same files in the same run. Reported: MB/s of
// each, clean/copy (goal >= 0.5), peak RSS (goal: dedupe buffer + < 64 MiB)
// and the offset map's bytes per entry.
func BenchmarkClean(b *testing.B) {
	size := benchLogBytes(b)
	pristine, _ := benchPristine(b, size)
	var segBytes int64
	_ = filepath.Walk(pristine, func(p string, fi os.FileInfo, err error) error {
		if err == nil && filepath.Ext(p) == ".log" {
			segBytes += fi.Size()
		}
		return nil
	})
	var copySecs float64
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(segBytes)
		b.ReportAllocs()
		i := 0
		start := time.Now()
		for b.Loop() {
			copyTree(b, pristine, filepath.Join(b.TempDir(), fmt.Sprint(i)))
			i++
		}
		copySecs = time.Since(start).Seconds() / float64(i)
	})
	b.Run("clean", func(b *testing.B) {
		b.SetBytes(segBytes)
		b.ReportAllocs()
		var rep PassReport
		var cleanSecs float64
		for b.Loop() {
			b.StopTimer()
			dir := filepath.Join(b.TempDir(), "data")
			copyTree(b, pristine, dir)
			d, _, err := localtier.OpenLogDir(vfs.Default, dir, localtier.LogDirOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			rep, err = RunOnce(context.Background(), d, PassOptions{Config: Config{}})
			cleanSecs += time.Since(start).Seconds()
			b.StopTimer()
			if err != nil || rep.LogsCleaned != 1 {
				b.Fatalf("%v\n%s", err, rep)
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		cleanSecs /= float64(b.N)
		lr := rep.Logs[0]
		b.ReportMetric(BytesPerEntry, "bytes/map-entry")
		b.ReportMetric(float64(lr.MapEntries), "map-entries")
		b.ReportMetric(float64(lr.BytesWritten)/float64(segBytes), "written/read")
		if copySecs > 0 {
			b.ReportMetric(copySecs/cleanSecs, "clean/copy")
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			// Whole process, setup included; the dedupe buffer is the
			// default 128 MiB, allocated only as far as the dirty region needs.
			b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
		}
	})
}
