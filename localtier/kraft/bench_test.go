package kraft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/vfs"
)

// BenchmarkReadDir replays a metadata log of 1000 topics of 8 partitions with two configs
// each and 8 leader changes per topic, once from the log alone and once from a snapshot of
// the same state (what a full read costs), and a Reader's pass over the unchanged log (what
// a sidecar following it pays per pass).
func BenchmarkReadDir(b *testing.B) {
	logDir := b.TempDir()
	l, err := kraftlog.Create(logDir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		id := kraft.TopicID{0: byte(i), 1: byte(i >> 8), 15: 1}
		name := fmt.Sprintf("topic-%04d", i)
		recs := []kraft.Record{kraftlog.Topic(name, id),
			kraftlog.TopicConfig(name, "retention.ms", kraftlog.Value("86400000")), kraftlog.TopicConfig(name, "cleanup.policy", kraftlog.Value("delete"))}
		for p := range int32(8) {
			recs = append(recs, kraftlog.Partition(id, p, p%3, 0, p%3, (p+1)%3, (p+2)%3))
		}
		for p := range int32(8) {
			recs = append(recs, kraftlog.LeaderChange(id, p, (p+1)%3))
		}
		if _, err := l.Append(recs...); err != nil {
			b.Fatal(err)
		}
	}
	size := func(dir string) int64 {
		var n int64
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	b.Run("log", func(b *testing.B) {
		b.SetBytes(size(l.Dir))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := kraft.ReadDir(vfs.Default, l.Dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("follow_unchanged", func(b *testing.B) { // a Reader's pass when nothing was appended
		r := kraft.NewReader(vfs.Default, l.Dir)
		if err := r.Read(func(*kraft.Image) error { return nil }); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Read(func(*kraft.Image) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	im, err := kraft.ReadDir(vfs.Default, l.Dir)
	if err != nil {
		b.Fatal(err)
	}
	snapDir := filepath.Join(b.TempDir(), kraft.MetadataDir)
	s, err := kraftlog.Create(filepath.Dir(snapDir))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Snapshot(kraftlog.ImageRecords(im)); err != nil {
		b.Fatal(err)
	}
	b.Run("snapshot", func(b *testing.B) {
		b.SetBytes(size(snapDir))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := kraft.ReadDir(vfs.Default, snapDir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
