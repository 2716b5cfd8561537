package index

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

func TestTimeIndexBytes(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "00000000000000000100.timeindex")
		x, err := OpenTimeIndex(fsys, path, 100, 1<<20)
		must(t, err)
		must(t, x.MaybeAppend(0x0191e05b6d8b, 102))
		must(t, x.Close())
		want := []byte{0, 0, 0x01, 0x91, 0xe0, 0x5b, 0x6d, 0x8b, 0, 0, 0, 2}
		if got := readFile(t, fsys, path); !bytes.Equal(got, want) {
			t.Fatalf("file = % x, want % x", got, want)
		}
		enc, err := EncodeTimeEntries([]TimestampOffset{{0x0191e05b6d8b, 102}}, 100)
		must(t, err)
		if !bytes.Equal(enc, want) {
			t.Fatalf("EncodeTimeEntries = % x", enc)
		}
	})
}

func TestTimeIndexLookup(t *testing.T) {
	const base = 500
	full := []TimestampOffset{{1000, 510}, {2000, 520}, {3000, 520}, {4000, 540}}
	tests := []struct {
		name    string
		entries []TimestampOffset
		target  int64
		want    TimestampOffset
	}{
		{"empty", nil, 5000, TimestampOffset{NoTimestamp, base}},
		{"before_first", full, 999, TimestampOffset{NoTimestamp, base}},
		{"negative", full, -5, TimestampOffset{NoTimestamp, base}},
		{"exact_first", full, 1000, TimestampOffset{1000, 510}},
		{"between", full, 2500, TimestampOffset{2000, 520}},
		{"exact_same_offset", full, 3000, TimestampOffset{3000, 520}},
		{"exact_last", full, 4000, TimestampOffset{4000, 540}},
		{"after_last", full, math.MaxInt64, TimestampOffset{4000, 540}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeTimeEntries(tt.entries, base)
			must(t, err)
			x := ParseTimeIndex("test", b, base)
			if got := x.Lookup(tt.target); got != tt.want {
				t.Fatalf("Lookup(%d) = %+v, want %+v", tt.target, got, tt.want)
			}
		})
	}
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x, err := OpenTimeIndex(fsys, join(dir, "m.timeindex"), 100, 1<<10)
		must(t, err)
		defer x.Close()
		if got := x.LastEntry(); got != (TimestampOffset{NoTimestamp, 100}) {
			t.Fatalf("empty LastEntry = %v", got)
		}
		must(t, x.MaybeAppend(NoTimestamp, 100)) // v0-style batch: nothing indexed
		if x.Entries() != 0 {
			t.Fatal("NoTimestamp was indexed")
		}
		must(t, x.MaybeAppend(1000, 105))
		must(t, x.MaybeAppend(1000, 107)) // same timestamp: skipped
		must(t, x.MaybeAppend(2000, 107)) // same offset, larger timestamp: appended
		var ia *InvalidAppendError
		if err := x.MaybeAppend(3000, 106); !errors.As(err, &ia) || ia.Field != "offset" {
			t.Fatalf("offset going back: %v", err)
		}
		if err := x.MaybeAppend(1500, 110); !errors.As(err, &ia) || ia.Field != "timestamp" {
			t.Fatalf("timestamp going back: %v", err)
		}
		if err := x.MaybeAppend(5000, 100+math.MaxInt32+1); !errors.Is(err, ErrOffsetOverflow) {
			t.Fatalf("offset overflow: %v", err)
		}
		want := []TimestampOffset{{1000, 105}, {2000, 107}}
		if got := x.All(); !slices.Equal(got, want) {
			t.Fatalf("All = %v, want %v", got, want)
		}
		if x.LastEntry() != want[1] || x.Entry(0) != want[0] {
			t.Fatalf("LastEntry %v Entry(0) %v", x.LastEntry(), x.Entry(0))
		}
	})
}

func TestTimeIndexFullKeepsRollSlot(t *testing.T) {
	x, err := OpenTimeIndex(vfs.NewMem(), "/f.timeindex", 0, 3*TimeEntrySize+5)
	must(t, err)
	defer x.Close()
	if x.MaxEntries() != 3 {
		t.Fatalf("MaxEntries = %d", x.MaxEntries())
	}
	must(t, x.MaybeAppend(10, 1))
	must(t, x.MaybeAppend(20, 2))
	if !x.IsFull() {
		t.Fatal("not IsFull with the roll slot left")
	}
	if err := x.MaybeAppend(30, 3); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("MaybeAppend into roll slot: %v", err)
	}
	must(t, x.MaybeAppendOnRoll(30, 3))
	if err := x.MaybeAppendOnRoll(40, 4); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("MaybeAppendOnRoll past max: %v", err)
	}
	if x.Entries() != 3 {
		t.Fatalf("Entries = %d", x.Entries())
	}
}

func TestTimeIndexReopenTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "r.timeindex")
		x, err := OpenTimeIndex(fsys, path, 0, 1<<10)
		must(t, err)
		all := []TimestampOffset{{100, 10}, {200, 20}, {300, 20}, {400, 30}}
		for _, e := range all {
			must(t, x.MaybeAppend(e.Timestamp, e.Offset))
		}
		must(t, x.Close())

		y, err := OpenTimeIndex(fsys, path, 0, 1<<10)
		must(t, err)
		must(t, y.SanityCheck())
		if got := y.All(); !slices.Equal(got, all) {
			t.Fatalf("reopened: %v", got)
		}
		must(t, y.TruncateTo(30))
		if got := y.All(); !slices.Equal(got, all[:3]) {
			t.Fatalf("TruncateTo(30): %v", got)
		}
		must(t, y.TruncateTo(20)) // both entries at offset 20 go
		if got := y.All(); !slices.Equal(got, all[:1]) {
			t.Fatalf("TruncateTo(20): %v", got)
		}
		if err := y.MaybeAppend(100, 15); err != nil || y.Entries() != 1 {
			t.Fatalf("equal timestamp after truncate: %v, %d entries", err, y.Entries())
		}
		must(t, y.MaybeAppend(150, 15))
		must(t, y.Reset())
		if y.Entries() != 0 || y.LastEntry().Timestamp != NoTimestamp {
			t.Fatal("Reset left entries")
		}
		must(t, y.MaybeAppend(1, 1))
		must(t, y.Close())
		if got := readFile(t, fsys, path); len(got) != 12 {
			t.Fatalf("file is %d bytes", len(got))
		}
	})
}

func TestTimeIndexPreallocatedTail(t *testing.T) {
	m := vfs.NewMem()
	b, err := EncodeTimeEntries([]TimestampOffset{{1700000000000, 3}}, 0)
	must(t, err)
	writeFile(t, m, "/p.timeindex", append(b, make([]byte, 12*50)...))
	x, err := OpenTimeIndex(m, "/p.timeindex", 0, 12*51)
	must(t, err)
	must(t, x.SanityCheck())
	if x.Entries() != 1 || x.LastEntry() != (TimestampOffset{1700000000000, 3}) {
		t.Fatalf("%d entries, last %v", x.Entries(), x.LastEntry())
	}
	must(t, x.Close())
	if got := len(readFile(t, m, "/p.timeindex")); got != 12 {
		t.Fatalf("file %d bytes after close", got)
	}
}

func TestTimeIndexSanityCheck(t *testing.T) {
	entry := func(ts int64, rel int32) []byte {
		b := make([]byte, 12)
		for i := range 8 {
			b[i] = byte(uint64(ts) >> (56 - 8*i))
		}
		for i := range 4 {
			b[8+i] = byte(uint32(rel) >> (24 - 8*i))
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"good", cat(entry(10, 1), entry(20, 1), entry(30, 5)), true},
		{"zero_tail", cat(entry(10, 1), make([]byte, 36)), true},
		{"torn", cat(entry(10, 1), []byte{1, 2}), false},
		{"equal_timestamps", cat(entry(10, 1), entry(10, 2)), false},
		{"decreasing_timestamps", cat(entry(10, 1), entry(9, 2)), false},
		{"negative_timestamp", entry(-1, 0), false},
		{"decreasing_offsets", cat(entry(10, 2), entry(20, 1)), false},
		{"below_base", entry(10, -1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := ParseTimeIndex("/g.timeindex", tt.data, 0)
			err := x.SanityCheck()
			_, derr := DecodeTimeEntries(tt.data, 0)
			if tt.ok {
				must(t, err)
				must(t, derr)
				return
			}
			if ce := mustCorrupt(t, err); ce.File != "/g.timeindex" {
				t.Fatalf("File = %q", ce.File)
			}
			mustCorrupt(t, derr)
		})
	}
}

func TestTimeIndexReadOnly(t *testing.T) {
	m := vfs.NewMem()
	b, err := EncodeTimeEntries([]TimestampOffset{{10, 1}}, 0)
	must(t, err)
	writeFile(t, m, "/ro.timeindex", b)
	x, err := ReadTimeIndex(m, "/ro.timeindex", 0)
	must(t, err)
	for name, err := range map[string]error{
		"MaybeAppend":       x.MaybeAppend(20, 2),
		"MaybeAppendOnRoll": x.MaybeAppendOnRoll(20, 2),
		"TruncateTo":        x.TruncateTo(0),
		"Reset":             x.Reset(),
		"Rename":            x.Rename("/other"),
		"Delete":            x.Delete(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on read-only index: %v", name, err)
		}
	}
	must(t, x.Flush())
	must(t, x.Close())
	if !bytes.Equal(readFile(t, m, "/ro.timeindex"), b) {
		t.Fatal("read-only index changed its file")
	}
}
