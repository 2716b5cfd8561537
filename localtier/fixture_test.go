package localtier

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

const fixtureRoot = "../testdata/fixtures"

// copyDir copies a fixture directory so tests can let the loader write.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func brokerPartitionDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, pat := range []string{"kafka-tester/*/kraft-combined-logs/*-[0-9]*", "kafka-connect-spooldir-fork/*/kafka-data/*-[0-9]*"} {
		m, _ := filepath.Glob(filepath.Join(fixtureRoot, pat))
		dirs = append(dirs, m...)
	}
	if len(dirs) < 10 {
		t.Fatalf("found only %d fixture partitions", len(dirs))
	}
	return dirs
}

// TestBrokerSegmentsDecode: every batch a real broker wrote verifies and
// decodes, and the broker's own .index/.timeindex entries point at batch
// starts.
func TestBrokerSegmentsDecode(t *testing.T) {
	for _, dir := range brokerPartitionDirs(t) {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, lp := range logs {
			data, err := os.ReadFile(lp)
			if err != nil {
				t.Fatal(err)
			}
			it := record.NewIter(data)
			it.Verify = true
			var d record.Decoder
			starts := map[int32]record.Batch{}
			n := 0
			for {
				b, ok := it.Next()
				if !ok {
					break
				}
				starts[int32(it.Pos()-b.Size())] = b
				recs, err := d.Records(b)
				if err != nil {
					t.Fatalf("%s: %v", lp, record.WithFile(err, lp, int64(it.Pos()-b.Size())))
				}
				n += len(recs)
			}
			if it.Err() != nil || it.Truncated() || it.Pos() != len(data) {
				t.Fatalf("%s: err=%v truncated=%v pos=%d of %d", lp, it.Err(), it.Truncated(), it.Pos(), len(data))
			}
			base, _, _ := ParseSegmentName(filepath.Base(lp))
			if idxData, err := os.ReadFile(SegmentPath(dir, base, IndexSuffix)); err == nil {
				entries, err := index.DecodeOffsetEntries(idxData, base)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					b, ok := starts[e.Position]
					if !ok || e.Offset < b.BaseOffset() || e.Offset > b.LastOffset() {
						t.Fatalf("%s: broker index entry %+v is not inside the batch at its position", lp, e)
					}
				}
			}
			if tData, err := os.ReadFile(SegmentPath(dir, base, TimeIndexSuffix)); err == nil {
				entries, err := index.DecodeTimeEntries(tData, base)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					found := false
					for _, b := range starts {
						if b.LastOffset() == e.Offset && b.MaxTimestamp() == e.Timestamp {
							found = true
						}
					}
					if !found {
						t.Fatalf("%s: broker time index entry %+v matches no batch", lp, e)
					}
				}
			}
			t.Logf("%s: %d records", strings.TrimPrefix(lp, fixtureRoot), n)
		}
	}
}

// TestRebuiltIndexesMatchBroker deletes a broker's index files, lets our
// loader rebuild them, and compares the bytes with what the broker wrote.
func TestRebuiltIndexesMatchBroker(t *testing.T) {
	compared, exact := 0, 0
	for _, src := range brokerPartitionDirs(t) {
		if !strings.Contains(src, "kafka-tester") {
			continue // the Kafka 2.1 fixture has no index files
		}
		dir := copyDir(t, src)
		want := map[string][]byte{}
		for _, suf := range []string{IndexSuffix, TimeIndexSuffix} {
			m, _ := filepath.Glob(filepath.Join(dir, "*"+suf))
			for _, p := range m {
				want[filepath.Base(p)], _ = os.ReadFile(p)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		l, rep, err := OpenLog(vfs.Default, dir, LogOptions{Config: testConfig(t, nil), RecoveryPoint: -1, Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		if rep.BytesTruncated != 0 {
			t.Fatalf("%s: recovery truncated %d bytes of a clean broker log", src, rep.BytesTruncated)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(got, w) {
				exact++
			}
			// A broker that restarts mid-segment resets its byte count since
			// the last index entry and writes a time index entry at shutdown,
			// so its index can differ from a rebuild from scratch (which is
			// what Kafka's own recovery writes too). Such files are only
			// counted; TestBrokerSegmentsDecode checks every broker entry.
			if !bytes.Equal(got, w) {
				t.Logf("%s/%s: rebuilt %x, broker wrote %x", src, name, got, w)
			}
			compared++
		}
	}
	t.Logf("%d of %d rebuilt index files byte-identical to the broker's", exact, compared)
	if exact < compared-2 {
		t.Fatalf("only %d rebuilt index files are byte-identical to the broker's", exact)
	}
	if compared < 4 {
		t.Fatalf("compared only %d index files", compared)
	}
}

// TestOpenBrokerDirAsLog loads every fixture partition with recovery and
// reads back every record through Read.
func TestOpenBrokerDirAsLog(t *testing.T) {
	for _, src := range brokerPartitionDirs(t) {
		dir := copyDir(t, src)
		l, _, err := OpenLog(vfs.Default, dir, LogOptions{Config: testConfig(t, nil), RecoveryPoint: -1})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		recs := readAll(t, l)
		if len(recs) == 0 {
			t.Fatalf("%s: no records", src)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
