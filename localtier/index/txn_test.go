package index

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

func TestTxnIndexBytes(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "00000000000000000000.txnindex")
		x, err := OpenTxnIndex(fsys, path, 0)
		must(t, err)
		if _, err := fsys.Stat(path); err == nil {
			t.Fatal("txn index file created before the first append")
		}
		must(t, x.Append(AbortedTxn{ProducerID: 0x0102030405060708, FirstOffset: 5, LastOffset: 9, LastStableOffset: 4}))
		must(t, x.Close())
		want := []byte{
			0, 0, // version
			1, 2, 3, 4, 5, 6, 7, 8, // producer id
			0, 0, 0, 0, 0, 0, 0, 5, // first offset
			0, 0, 0, 0, 0, 0, 0, 9, // last offset
			0, 0, 0, 0, 0, 0, 0, 4, // last stable offset
		}
		if got := readFile(t, fsys, path); !bytes.Equal(got, want) {
			t.Fatalf("file = % x, want % x", got, want)
		}
		enc, err := EncodeAbortedTxns([]AbortedTxn{{0x0102030405060708, 5, 9, 4}}, 0)
		must(t, err)
		if !bytes.Equal(enc, want) {
			t.Fatalf("EncodeAbortedTxns = % x", enc)
		}
	})
}

func TestTxnIndexAppendReopenTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := join(dir, "t.txnindex")
		x, err := OpenTxnIndex(fsys, path, 100)
		must(t, err)
		all := []AbortedTxn{
			{1, 100, 110, 100},
			{2, 105, 120, 111},
			{3, 130, 140, 121},
		}
		for _, a := range all {
			must(t, x.Append(a))
		}
		var ia *InvalidAppendError
		if err := x.Append(AbortedTxn{4, 139, 140, 0}); !errors.As(err, &ia) || ia.Field != "last offset" {
			t.Fatalf("non-increasing last offset: %v", err)
		}
		must(t, x.Flush())
		must(t, x.Close())

		y, err := OpenTxnIndex(fsys, path, 100)
		must(t, err)
		must(t, y.SanityCheck())
		if got := y.All(); !slices.Equal(got, all) {
			t.Fatalf("reopened: %v", got)
		}
		if err := y.Append(AbortedTxn{4, 135, 140, 0}); err == nil {
			t.Fatal("reopened index accepted a non-increasing last offset")
		}
		must(t, y.TruncateTo(120))
		if got := y.All(); !slices.Equal(got, all[:1]) {
			t.Fatalf("TruncateTo(120): %v", got)
		}
		must(t, y.TruncateTo(121)) // no effect
		if y.Entries() != 1 {
			t.Fatalf("TruncateTo(121) changed entries: %d", y.Entries())
		}
		must(t, y.Append(all[1]))
		must(t, y.Reset())
		if y.Entries() != 0 {
			t.Fatal("Reset left entries")
		}
		must(t, y.Close())
		if got := len(readFile(t, fsys, path)); got != 0 {
			t.Fatalf("file %d bytes after Reset", got)
		}
	})
}

func TestTxnIndexCollectAbortedTxns(t *testing.T) {
	all := []AbortedTxn{
		{1, 0, 10, 0},
		{2, 5, 20, 11},
		{3, 25, 30, 21},
		{4, 22, 40, 31},
	}
	b, err := EncodeAbortedTxns(all, 0)
	must(t, err)
	x := ParseTxnIndex("c", b, 0)
	tests := []struct {
		name         string
		fetch, upper int64
		want         []AbortedTxn
		wantComplete bool
	}{
		{"all", 0, 100, all, false},
		{"before_any", -10, 0, nil, true},
		{"first_only", 0, 5, all[:1], true},
		{"last_offset_inclusive", 10, 12, all[:2], true},
		{"after_first", 11, 23, []AbortedTxn{all[1], all[3]}, true},
		{"middle", 21, 26, all[2:4], true},
		{"after_all", 41, 100, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, complete := x.CollectAbortedTxns(tt.fetch, tt.upper)
			if !slices.Equal(got, tt.want) || complete != tt.wantComplete {
				t.Fatalf("CollectAbortedTxns(%d, %d) = %v, %v; want %v, %v", tt.fetch, tt.upper, got, complete, tt.want, tt.wantComplete)
			}
		})
	}
}

func TestTxnIndexSanityCheck(t *testing.T) {
	enc := func(version int16, a AbortedTxn) []byte {
		b := appendTxn(nil, a)
		b[0], b[1] = byte(uint16(version)>>8), byte(version)
		return b
	}
	good := enc(0, AbortedTxn{1, 100, 110, 100})
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"good", good, true},
		{"zero_tail", append(slices.Clone(good), make([]byte, 34)...), true},
		{"torn", append(slices.Clone(good), 0, 1), false},
		{"future_version", enc(1, AbortedTxn{1, 100, 110, 100}), false},
		{"last_below_start", enc(0, AbortedTxn{1, 50, 99, 0}), false},
		{"first_after_last", enc(0, AbortedTxn{1, 120, 110, 0}), false},
		{"not_increasing", append(slices.Clone(good), enc(0, AbortedTxn{2, 100, 110, 100})...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMem()
			writeFile(t, m, "/g.txnindex", tt.data)
			x, err := OpenTxnIndex(m, "/g.txnindex", 100)
			must(t, err)
			defer x.Close()
			err = x.SanityCheck()
			_, derr := DecodeAbortedTxns(tt.data, 100)
			if tt.ok {
				must(t, err)
				must(t, derr)
				return
			}
			mustCorrupt(t, err)
			mustCorrupt(t, derr)
		})
	}
}

func TestTxnIndexRenameBeforeCreate(t *testing.T) {
	m := vfs.NewMem()
	x, err := OpenTxnIndex(m, "/a.txnindex", 0)
	must(t, err)
	must(t, x.Rename("/a.txnindex.swap")) // nothing on disk yet: only the path moves
	must(t, x.Append(AbortedTxn{1, 0, 1, 0}))
	if _, err := m.Stat("/a.txnindex.swap"); err != nil {
		t.Fatalf("renamed path not used: %v", err)
	}
	must(t, x.Delete())
	r, err := ReadTxnIndex(m, "/a.txnindex.swap", 0)
	must(t, err)
	if r.Entries() != 0 {
		t.Fatal("missing file read as non-empty")
	}
	if err := r.Append(AbortedTxn{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append on read-only: %v", err)
	}
}
