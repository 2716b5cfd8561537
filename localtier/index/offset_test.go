package index

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

func TestOffsetIndexBytes(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "00000000000000000100.index")
		x, err := OpenOffsetIndex(fsys, path, 100, 1<<20)
		must(t, err)
		must(t, x.Append(105, 4096))
		must(t, x.Append(100+math.MaxInt32, math.MaxInt32))
		must(t, x.Close())
		want := []byte{
			0, 0, 0, 5, 0, 0, 0x10, 0,
			0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff,
		}
		if got := readFile(t, fsys, path); !bytes.Equal(got, want) {
			t.Fatalf("file = % x, want % x", got, want)
		}
		enc, err := EncodeOffsetEntries([]Entry{{105, 4096}, {100 + math.MaxInt32, math.MaxInt32}}, 100)
		must(t, err)
		if !bytes.Equal(enc, want) {
			t.Fatalf("EncodeOffsetEntries = % x, want % x", enc, want)
		}
	})
}

func TestOffsetIndexLookup(t *testing.T) {
	const base = 1000
	full := []Entry{{1010, 4200}, {1020, 8400}, {1030, 12600}}
	tests := []struct {
		name    string
		entries []Entry
		target  int64
		want    Entry
	}{
		{"empty", nil, 1050, Entry{base, 0}},
		{"empty_below_base", nil, 5, Entry{base, 0}},
		{"before_first", full, 1009, Entry{base, 0}},
		{"at_base", full, base, Entry{base, 0}},
		{"exact_first", full, 1010, Entry{1010, 4200}},
		{"between", full, 1015, Entry{1010, 4200}},
		{"exact_middle", full, 1020, Entry{1020, 8400}},
		{"just_before_last", full, 1029, Entry{1020, 8400}},
		{"exact_last", full, 1030, Entry{1030, 12600}},
		{"after_last", full, math.MaxInt64, Entry{1030, 12600}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeOffsetEntries(tt.entries, base)
			must(t, err)
			x := ParseOffsetIndex("test", b, base)
			if got := x.Lookup(tt.target); got != tt.want {
				t.Fatalf("Lookup(%d) = %+v, want %+v", tt.target, got, tt.want)
			}
		})
	}
}

// TestOffsetIndexLookupLarge checks Lookup against a linear scan on an index
// bigger than Kafka's warm section.
func TestOffsetIndexLookupLarge(t *testing.T) {
	var entries []Entry
	for i := range 5000 {
		entries = append(entries, Entry{Offset: int64(3*i + 1), Position: int32(100 * i)})
	}
	b, err := EncodeOffsetEntries(entries, 0)
	must(t, err)
	x := ParseOffsetIndex("large", b, 0)
	for target := int64(-1); target < 15010; target += 7 {
		want := Entry{}
		for _, e := range entries {
			if e.Offset <= target {
				want = e
			}
		}
		if got := x.Lookup(target); got != want {
			t.Fatalf("Lookup(%d) = %+v, want %+v", target, got, want)
		}
	}
}

func TestOffsetIndexAppendRules(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x, err := OpenOffsetIndex(fsys, join(dir, "x.index"), 50, 24)
		must(t, err)
		defer x.Close()
		if x.MaxEntries() != 3 {
			t.Fatalf("MaxEntries = %d, want 3", x.MaxEntries())
		}
		if err := x.Append(49, 0); !errors.Is(err, ErrOffsetOverflow) {
			t.Fatalf("append below base: %v, want ErrOffsetOverflow", err)
		}
		if err := x.Append(50+math.MaxInt32+1, 0); !errors.Is(err, ErrOffsetOverflow) {
			t.Fatalf("append past int32: %v, want ErrOffsetOverflow", err)
		}
		must(t, x.Append(60, 100))
		for _, off := range []int64{60, 59} {
			err := x.Append(off, 200)
			var ia *InvalidAppendError
			if !errors.As(err, &ia) || ia.Value != off || ia.Last != 60 || ia.Field != "offset" {
				t.Fatalf("Append(%d) after 60: %v, want *InvalidAppendError", off, err)
			}
		}
		must(t, x.Append(70, 200))
		if x.IsFull() {
			t.Fatal("IsFull with 2 of 3 entries")
		}
		must(t, x.Append(80, 300))
		if !x.IsFull() {
			t.Fatal("not IsFull with 3 of 3 entries")
		}
		if err := x.Append(90, 400); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("append to full index: %v, want ErrIndexFull", err)
		}
		if got, want := x.All(), []Entry{{60, 100}, {70, 200}, {80, 300}}; !slices.Equal(got, want) {
			t.Fatalf("All = %v, want %v", got, want)
		}
		if x.LastOffset() != 80 || x.SizeInBytes() != 24 || x.Entry(1) != (Entry{70, 200}) {
			t.Fatalf("LastOffset %d SizeInBytes %d Entry(1) %v", x.LastOffset(), x.SizeInBytes(), x.Entry(1))
		}
	})
}

func TestOffsetIndexMaxBytes(t *testing.T) {
	if _, err := OpenOffsetIndex(vfs.NewMem(), "/x.index", 0, -1); err == nil {
		t.Fatal("maxBytes -1 accepted")
	}
	// Below one entry (Kafka accepts segment.index.bytes >= 4): always full.
	x, err := OpenOffsetIndex(vfs.NewMem(), "/x.index", 0, 7)
	must(t, err)
	if !x.IsFull() {
		t.Fatal("an index with room for no entry is not full")
	}
	if err := x.Append(1, 1); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("append to a zero-entry index: %v", err)
	}
}

func TestOffsetIndexReopen(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "00000000000000000000.index")
		x, err := OpenOffsetIndex(fsys, path, 0, 1<<20)
		must(t, err)
		want := []Entry{{3, 4100}, {9, 8300}, {20, 12500}}
		for _, e := range want {
			must(t, x.Append(e.Offset, e.Position))
		}
		must(t, x.Flush())
		must(t, x.Close())
		if err := x.Append(30, 20000); !errors.Is(err, ErrClosed) {
			t.Fatalf("append after close: %v, want ErrClosed", err)
		}
		if got := x.Lookup(10); got != (Entry{9, 8300}) {
			t.Fatalf("Lookup after close = %v", got)
		}

		y, err := OpenOffsetIndex(fsys, path, 0, 1<<20)
		must(t, err)
		must(t, y.SanityCheck())
		if got := y.All(); !slices.Equal(got, want) {
			t.Fatalf("reopened All = %v, want %v", got, want)
		}
		if err := y.Append(20, 1); err == nil {
			t.Fatal("reopened index accepted a non-increasing offset")
		}
		must(t, y.Append(21, 13000))
		must(t, y.Close())

		r, err := ReadOffsetIndex(fsys, path, 0)
		must(t, err)
		if r.Entries() != 4 || r.LastOffset() != 21 {
			t.Fatalf("read-only: %d entries, last %d", r.Entries(), r.LastOffset())
		}
		if err := r.Append(30, 1); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("read-only Append: %v", err)
		}
		if err := r.TruncateTo(0); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("read-only TruncateTo: %v", err)
		}
		must(t, r.Close())
		if got := readFile(t, fsys, path); len(got) != 32 {
			t.Fatalf("file is %d bytes after read-only use, want 32", len(got))
		}
	})
}

func TestOffsetIndexTruncateTo(t *testing.T) {
	entries := []Entry{{10, 100}, {20, 200}, {30, 300}}
	tests := []struct {
		to   int64
		want []Entry
	}{
		{0, nil},
		{10, nil},
		{11, entries[:1]},
		{20, entries[:1]},
		{25, entries[:2]},
		{30, entries[:2]},
		{31, entries},
		{1000, entries},
	}
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for _, tt := range tests {
			path := join(dir, "t.index")
			must(t, fsys.RemoveAll(path))
			x, err := OpenOffsetIndex(fsys, path, 0, 1024)
			must(t, err)
			for _, e := range entries {
				must(t, x.Append(e.Offset, e.Position))
			}
			must(t, x.TruncateTo(tt.to))
			if got := x.All(); !slices.Equal(got, tt.want) {
				t.Fatalf("TruncateTo(%d): %v, want %v", tt.to, got, tt.want)
			}
			if got := len(readFile(t, fsys, path)); got != 8*len(tt.want) {
				t.Fatalf("TruncateTo(%d): file is %d bytes, want %d", tt.to, got, 8*len(tt.want))
			}
			// appending after a truncation continues from the new end
			must(t, x.Append(40, 400))
			must(t, x.Close())
			y, err := ReadOffsetIndex(fsys, path, 0)
			must(t, err)
			if got, want := y.All(), append(slices.Clone(tt.want), Entry{40, 400}); !slices.Equal(got, want) {
				t.Fatalf("TruncateTo(%d) then append, reopened: %v, want %v", tt.to, got, want)
			}
		}
	})
}

func TestOffsetIndexReset(t *testing.T) {
	m := vfs.NewMem()
	x, err := OpenOffsetIndex(m, "/r.index", 5, 64)
	must(t, err)
	must(t, x.Append(6, 10))
	must(t, x.Reset())
	if x.Entries() != 0 || x.LastOffset() != 5 || len(readFile(t, m, "/r.index")) != 0 {
		t.Fatalf("after Reset: %d entries, last %d", x.Entries(), x.LastOffset())
	}
	must(t, x.Append(6, 10)) // rebuild
	must(t, x.Close())
}

// TestOffsetIndexPreallocatedTail opens a file as a crashed Kafka broker
// leaves it: two entries, then zeros up to segment.index.bytes.
func TestOffsetIndexPreallocatedTail(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "p.index")
		b, err := EncodeOffsetEntries([]Entry{{101, 5000}, {150, 9000}}, 100)
		must(t, err)
		writeFile(t, fsys, path, append(b, make([]byte, 8*10)...))

		x, err := OpenOffsetIndex(fsys, path, 100, 96)
		must(t, err)
		must(t, x.SanityCheck())
		if x.Entries() != 2 || x.LastOffset() != 150 {
			t.Fatalf("%d entries, last offset %d; want 2, 150", x.Entries(), x.LastOffset())
		}
		must(t, x.Append(160, 9900))
		must(t, x.Close())
		if got := readFile(t, fsys, path); len(got) != 24 {
			t.Fatalf("file is %d bytes after close, want trimmed to 24", len(got))
		}
	})
}

func TestOffsetIndexRenameDelete(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x, err := OpenOffsetIndex(fsys, join(dir, "a.index"), 0, 64)
		must(t, err)
		must(t, x.Append(1, 1))
		must(t, x.Rename(join(dir, "a.index.deleted")))
		if x.Path() != join(dir, "a.index.deleted") {
			t.Fatalf("Path = %s", x.Path())
		}
		must(t, x.Append(2, 2)) // the open file followed the rename
		must(t, x.Flush())      // appends reach the file on flush (lazy, like Kafka's mmap)
		if got := len(readFile(t, fsys, join(dir, "a.index.deleted"))); got != 16 {
			t.Fatalf("renamed file is %d bytes, want 16", got)
		}
		must(t, x.Delete())
		if _, err := fsys.Stat(join(dir, "a.index.deleted")); err == nil {
			t.Fatal("file still there after Delete")
		}
		if err := x.Append(3, 3); !errors.Is(err, ErrClosed) {
			t.Fatalf("append after Delete: %v", err)
		}
	})
}

func TestOffsetIndexSanityCheck(t *testing.T) {
	enc := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = append(b, byte(w>>24), byte(w>>16), byte(w>>8), byte(w))
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"good", enc(1, 10, 2, 20), true},
		{"zero_tail", append(enc(1, 10, 2, 20), make([]byte, 16)...), true},
		{"all_zero", make([]byte, 64), true},
		{"equal_positions", enc(1, 10, 2, 10), true},
		{"torn_tail", append(enc(1, 10, 2, 20), 0, 0, 0), false},
		{"torn_nonzero_tail", append(enc(1, 10), 0, 0, 0, 3, 0), false},
		{"short", []byte{1, 2, 3}, false},
		{"decreasing_offsets", enc(5, 10, 4, 20), false},
		{"equal_offsets", enc(5, 10, 5, 20), false},
		{"below_base", enc(0xffffffff, 10), false},
		{"negative_position", enc(1, 0x80000000), false},
		{"decreasing_positions", enc(1, 20, 2, 10), false},
		{"zero_hole", enc(1, 10, 0, 0, 2, 20), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMem()
			writeFile(t, m, "/g.index", tt.data)
			x, err := OpenOffsetIndex(m, "/g.index", 0, 1024)
			must(t, err) // opening never fails on content
			defer x.Close()
			err = x.SanityCheck()
			_, derr := DecodeOffsetEntries(tt.data, 0)
			if tt.ok {
				must(t, err)
				must(t, derr)
				return
			}
			if ce := mustCorrupt(t, err); ce.File != "/g.index" {
				t.Fatalf("CorruptIndexError.File = %q", ce.File)
			}
			mustCorrupt(t, derr)
		})
	}
}

// TestOffsetIndexRebuild is the recovery path: a corrupt index is detected,
// reset and refilled.
func TestOffsetIndexRebuild(t *testing.T) {
	m := vfs.NewMem()
	writeFile(t, m, "/c.index", []byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2, 7})
	x, err := OpenOffsetIndex(m, "/c.index", 0, 1024)
	must(t, err)
	mustCorrupt(t, x.SanityCheck())
	must(t, x.Reset())
	must(t, x.Append(3, 100))
	must(t, x.SanityCheck())
	must(t, x.Close())
	if got := readFile(t, m, "/c.index"); !bytes.Equal(got, []byte{0, 0, 0, 3, 0, 0, 0, 100}) {
		t.Fatalf("rebuilt file % x", got)
	}
}

func TestOffsetIndexRandomGarbage(t *testing.T) {
	// A fixed pseudo-random stream: xorshift, so the test is deterministic.
	s := uint64(0x9e3779b97f4a7c15)
	data := make([]byte, 8*64)
	for i := range data {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		data[i] = byte(s)
	}
	x := ParseOffsetIndex("garbage", data, 0)
	mustCorrupt(t, x.SanityCheck())
	_, err := DecodeOffsetEntries(data, 0)
	mustCorrupt(t, err)
	_, err = DecodeTimeEntries(data[:12*40], 0)
	mustCorrupt(t, err)
	_, err = DecodeAbortedTxns(data[:34*15], 0)
	mustCorrupt(t, err)
}

func TestEncodeOffsetEntriesRefusesInvalid(t *testing.T) {
	if _, err := EncodeOffsetEntries([]Entry{{5, 0}, {5, 1}}, 0); err == nil {
		t.Fatal("equal offsets encoded")
	}
	if _, err := EncodeOffsetEntries([]Entry{{5, 0}}, 10); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("offset below base: %v", err)
	}
}

// TestOffsetIndexCrash checks what survives a crash: flushed entries do,
// and whatever is left is never corrupt.
func TestOffsetIndexCrash(t *testing.T) {
	m := vfs.NewMem()
	must(t, vfs.MkdirAllSync(m, "/d", 0o755))
	x, err := OpenOffsetIndex(m, "/d/0.index", 0, 1024)
	must(t, err)
	must(t, m.SyncDir("/d"))
	must(t, x.Append(10, 100))
	must(t, x.Append(20, 200))
	must(t, x.Flush())
	must(t, x.Append(30, 300)) // not flushed

	crashed := m.CrashClone()
	y, err := OpenOffsetIndex(crashed, "/d/0.index", 0, 1024)
	must(t, err)
	must(t, y.SanityCheck())
	if got := y.All(); !slices.Equal(got, []Entry{{10, 100}, {20, 200}}) {
		t.Fatalf("after crash: %v", got)
	}
	must(t, y.Close())
	must(t, x.Close())
}

// TestOffsetIndexErrors fails each filesystem operation of a workload in turn
// and requires the failure to surface as the injected error.
func TestOffsetIndexErrors(t *testing.T) {
	for i := int64(0); ; i++ {
		m := vfs.NewMem()
		inj := vfs.OnIndex(i)
		efs := vfs.NewErrorFS(m, inj)
		err := func() error {
			x, err := OpenOffsetIndex(efs, "/e.index", 0, 1024)
			if err != nil {
				return err
			}
			for _, e := range []Entry{{1, 10}, {2, 20}, {3, 30}} {
				if err := x.Append(e.Offset, e.Position); err != nil {
					return errors.Join(err, x.Close())
				}
			}
			if err := x.TruncateTo(3); err != nil {
				return errors.Join(err, x.Close())
			}
			if err := x.Flush(); err != nil {
				return errors.Join(err, x.Close())
			}
			return x.Close()
		}()
		if !inj.Fired() {
			must(t, err)
			if i < 4 {
				t.Fatalf("workload ran only %d operations", i)
			}
			return
		}
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: got %v, want the injected error", i, err)
		}
		// Whatever is on disk still loads.
		if _, serr := m.Stat("/e.index"); serr == nil {
			r, err := ReadOffsetIndex(m, "/e.index", 0)
			must(t, err)
			if err := r.SanityCheck(); err != nil {
				t.Fatalf("op %d: index left corrupt: %v", i, err)
			}
		}
	}
}

func BenchmarkOffsetIndexLookup(b *testing.B) {
	var entries []Entry
	for i := range 100_000 {
		entries = append(entries, Entry{Offset: int64(10 * i), Position: int32(4096 * i)})
	}
	data, err := EncodeOffsetEntries(entries, 0)
	if err != nil {
		b.Fatal(err)
	}
	x := ParseOffsetIndex("bench", data, 0)
	b.ReportAllocs()
	b.SetBytes(OffsetEntrySize)
	var target int64
	for b.Loop() {
		target = (target + 7919) % 1_000_000
		_ = x.Lookup(target)
	}
}
