package index

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

const fixtures = "../../testdata/fixtures/kafka-tester"

// TestKafkaFixtures loads index files a Kafka 3.x broker wrote.
func TestKafkaFixtures(t *testing.T) {
	for _, pattern := range []string{"*/kraft-combined-logs/*/0*.index", "*/kraft-combined-logs/*/0*.timeindex"} {
		files, err := filepath.Glob(filepath.Join(fixtures, pattern))
		must(t, err)
		if len(files) == 0 {
			t.Fatalf("no fixtures match %s", pattern)
		}
		for _, f := range files {
			t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
				switch filepath.Ext(f) {
				case ".index":
					x, err := ReadOffsetIndex(vfs.Default, f, 0)
					must(t, err)
					must(t, x.SanityCheck())
					got, err := DecodeOffsetEntries(readFile(t, vfs.Default, f), 0)
					must(t, err)
					if !slices.Equal(got, x.All()) {
						t.Fatalf("Decode %v, Read %v", got, x.All())
					}
				case ".timeindex":
					x, err := ReadTimeIndex(vfs.Default, f, 0)
					must(t, err)
					must(t, x.SanityCheck())
					if x.Entries() == 0 {
						t.Fatal("empty time index; every fixture has at least one entry")
					}
				}
			})
		}
	}
}

func TestKafkaFixtureValues(t *testing.T) {
	dir := filepath.Join(fixtures, "510714e73872b0137b684b90ffd0586c3adcc23b/kraft-combined-logs")
	x, err := ReadOffsetIndex(vfs.Default, filepath.Join(dir, "__cluster_metadata-0/00000000000000000000.index"), 0)
	must(t, err)
	if got, want := x.All(), []Entry{{0x39, 0x103a}, {0x72, 0x2042}}; !slices.Equal(got, want) {
		t.Fatalf("metadata .index = %v, want %v", got, want)
	}
	if got := x.Lookup(0x80); got != (Entry{0x72, 0x2042}) {
		t.Fatalf("Lookup(0x80) = %v", got)
	}
	ti, err := ReadTimeIndex(vfs.Default, filepath.Join(dir, "__cluster_metadata-0/00000000000000000000.timeindex"), 0)
	must(t, err)
	want := []TimestampOffset{{0x191e05b548c, 0x39}, {0x191e05bc4ae, 0x72}, {0x191e05bda4e, 0x80}}
	if got := ti.All(); !slices.Equal(got, want) {
		t.Fatalf("metadata .timeindex = %v, want %v", got, want)
	}
	if got := ti.Lookup(0x191e05bc4ae + 1); got != want[1] {
		t.Fatalf("time Lookup = %v", got)
	}
	foo, err := ReadTimeIndex(vfs.Default, filepath.Join(dir, "foo-0/00000000000000000000.timeindex"), 0)
	must(t, err)
	if got := foo.All(); !slices.Equal(got, []TimestampOffset{{0x191e05b6d8b, 0}}) {
		t.Fatalf("foo-0 .timeindex = %v", got)
	}
	empty, err := ReadOffsetIndex(vfs.Default, filepath.Join(dir, "foo-0/00000000000000000000.index"), 0)
	must(t, err)
	if empty.Entries() != 0 || empty.Lookup(5) != (Entry{0, 0}) {
		t.Fatalf("foo-0 .index: %d entries", empty.Entries())
	}
}
