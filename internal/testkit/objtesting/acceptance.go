// Package objtesting holds the contract test of the object-store seam:
// AcceptanceTest checks one objstore.Bucket against everything the
// interface promises, and ForeachBucket runs a test on every backend —
// memory, filesystem and a real MinIO through the S3 backend.
package objtesting

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

// BigSize is the size of the multi-MiB objects of the suite: just over one
// 5 MiB part, so an S3 bucket opened with part_size=5242880 goes through a
// two-part multipart upload, and not a multiple of anything. (Kept small:
// the suite moves every byte several times, slowly under -race.)
const BigSize = 5<<20 + 12345

// Pattern returns n deterministic bytes for seed. A random block of a
// prime length is repeated and every 4 KiB boundary is stamped with its
// offset, so any two 4 KiB-aligned windows differ: parts stored in the
// wrong order or at the wrong offset cannot compare equal. (Filling with
// copy keeps it fast under the race detector.)
func Pattern(seed uint64, n int) []byte {
	const block = 65521 // prime
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rnd := make([]byte, min(n, block))
	var word [8]byte
	for i := 0; i < len(rnd); i += 8 {
		binary.LittleEndian.PutUint64(word[:], r.Uint64())
		copy(rnd[i:], word[:])
	}
	b := make([]byte, n)
	for off := 0; off < n; off += len(rnd) {
		copy(b[off:], rnd)
	}
	for off := 0; off+8 <= n; off += 4096 {
		binary.BigEndian.PutUint64(b[off:], uint64(off)^seed)
	}
	return b
}

// AcceptanceTest checks b against the Bucket contract. b must be empty;
// it is left with test objects in it.
func AcceptanceTest(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	t.Run("round_trip", func(t *testing.T) { testRoundTrip(ctx, t, b) })
	t.Run("overwrite", func(t *testing.T) { testOverwrite(ctx, t, b) })
	t.Run("get_range", func(t *testing.T) { testGetRange(ctx, t, b) })
	t.Run("not_found", func(t *testing.T) { testNotFound(ctx, t, b) })
	t.Run("if_absent", func(t *testing.T) { testIfAbsent(ctx, t, b) })
	t.Run("if_match", func(t *testing.T) { testIfMatch(ctx, t, b) })
	t.Run("if_absent_racers", func(t *testing.T) { testIfAbsentRacers(ctx, t, b) })
	t.Run("if_match_racers", func(t *testing.T) { testIfMatchRacers(ctx, t, b) })
	t.Run("list", func(t *testing.T) { testList(ctx, t, b) })
	t.Run("delete", func(t *testing.T) { testDelete(ctx, t, b) })
	t.Run("odd_keys", func(t *testing.T) { testOddKeys(ctx, t, b) })
	t.Run("invalid_keys", func(t *testing.T) { testInvalidKeys(ctx, t, b) })
	t.Run("size_mismatch", func(t *testing.T) { testSizeMismatch(ctx, t, b) })
	t.Run("failing_reader", func(t *testing.T) { testFailingReader(ctx, t, b) })
	t.Run("canceled", func(t *testing.T) { testCanceled(t, b) })
}

// MustPut stores data at key or fails the test.
func MustPut(t testing.TB, b objstore.Bucket, key string, data []byte) objstore.Attrs {
	t.Helper()
	a, err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.Condition{})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return a
}

// MustGet reads key fully or fails the test.
func MustGet(t testing.TB, b objstore.BucketReader, key string) []byte {
	t.Helper()
	rc, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return data
}

func readRange(ctx context.Context, b objstore.BucketReader, key string, off, n int64) ([]byte, error) {
	rc, err := b.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// onlyReader hides io.ReaderAt/io.Seeker so the buffered path is used.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func checkStored(t *testing.T, b objstore.Bucket, key string, want []byte, put objstore.Attrs) {
	t.Helper()
	if put.Size != int64(len(want)) || put.ETag == "" {
		t.Errorf("put %q attrs = %+v, want size %d and an etag", key, put, len(want))
	}
	rc, attrs, err := objstore.GetWithAttrs(context.Background(), b, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %q: %d bytes differ from the %d put", key, len(got), len(want))
	}
	if attrs.ETag != put.ETag || attrs.Size != put.Size {
		t.Errorf("get %q attrs = %+v, put returned %+v", key, attrs, put)
	}
	a, err := b.Attributes(context.Background(), key)
	if err != nil {
		t.Fatalf("attributes %q: %v", key, err)
	}
	if a.Size != int64(len(want)) || a.ETag != put.ETag || a.LastModified.IsZero() {
		t.Errorf("attributes %q = %+v, put returned %+v", key, a, put)
	}
}

func testRoundTrip(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for i, size := range []int{0, 1, 4096, 1<<20 + 1, BigSize} {
		data := Pattern(uint64(i+1), size)
		t.Run(fmt.Sprintf("size_%d", size), func(t *testing.T) {
			key := fmt.Sprintf("rt/plain-%d", size)
			a, err := b.Put(ctx, key, onlyReader{bytes.NewReader(data)}, int64(size), objstore.Condition{})
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			checkStored(t, b, key, data, a)

			key = fmt.Sprintf("rt/unknown-size-%d", size)
			a, err = b.Put(ctx, key, onlyReader{bytes.NewReader(data)}, -1, objstore.Condition{})
			if err != nil {
				t.Fatalf("put unknown size: %v", err)
			}
			checkStored(t, b, key, data, a)

			// From a file (io.ReaderAt + io.Seeker), positioned past a header.
			f := TempFile(t, append([]byte("HEADER"), data...))
			if _, err := f.Seek(6, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			key = fmt.Sprintf("rt/file-%d", size)
			a, err = b.Put(ctx, key, f, int64(size), objstore.Condition{})
			if err != nil {
				t.Fatalf("put from file: %v", err)
			}
			checkStored(t, b, key, data, a)
		})
	}
}

// TempFile writes data to a file in a test temporary directory and returns
// it open for reading, closed when the test ends.
func TempFile(t testing.TB, data []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func testOverwrite(ctx context.Context, t *testing.T, b objstore.Bucket) {
	a1 := MustPut(t, b, "ow/k", []byte("version one"))
	a2 := MustPut(t, b, "ow/k", []byte("version two!"))
	if a1.ETag == a2.ETag {
		t.Errorf("different contents got the same etag %s", a1.ETag)
	}
	checkStored(t, b, "ow/k", []byte("version two!"), a2)
}

func testGetRange(ctx context.Context, t *testing.T, b objstore.Bucket) {
	small := Pattern(7, 1000)
	MustPut(t, b, "gr/small", small)
	MustPut(t, b, "gr/empty", nil)
	big := Pattern(8, BigSize)
	MustPut(t, b, "gr/big", big)
	const part = 5 << 20
	cases := []struct {
		name    string
		key     string
		data    []byte
		off, n  int64
		wantLo  int64
		wantHi  int64
		wantErr error
	}{
		{"head", "gr/small", small, 0, 10, 0, 10, nil},
		{"middle", "gr/small", small, 100, 250, 100, 350, nil},
		{"last_bytes", "gr/small", small, 990, 10, 990, 1000, nil},
		{"tail_past_end", "gr/small", small, 995, 100, 995, 1000, nil},
		{"to_end", "gr/small", small, 10, -1, 10, 1000, nil},
		{"whole", "gr/small", small, 0, -1, 0, 1000, nil},
		{"zero_length", "gr/small", small, 5, 0, 5, 5, nil},
		{"at_end", "gr/small", small, 1000, 10, 1000, 1000, nil},
		{"at_end_to_end", "gr/small", small, 1000, -1, 1000, 1000, nil},
		{"beyond_end", "gr/small", small, 1001, 1, 0, 0, objstore.ErrInvalidRange},
		{"far_beyond_end", "gr/small", small, 1 << 40, 1, 0, 0, objstore.ErrInvalidRange},
		{"empty_object", "gr/empty", nil, 0, 10, 0, 0, nil},
		{"empty_object_to_end", "gr/empty", nil, 0, -1, 0, 0, nil},
		{"empty_object_beyond", "gr/empty", nil, 1, 1, 0, 0, objstore.ErrInvalidRange},
		{"missing", "gr/missing", nil, 0, 1, 0, 0, objstore.ErrNotFound},
		{"across_part_boundary", "gr/big", big, part - 3, 10, part - 3, part + 7, nil},
		{"big_tail", "gr/big", big, BigSize - 100, 1000, BigSize - 100, BigSize, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readRange(ctx, b, c.key, c.off, c.n)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("GetRange(%d, %d) err = %v, want %v", c.off, c.n, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
			}
			if want := c.data[c.wantLo:c.wantHi]; !bytes.Equal(got, want) {
				t.Fatalf("GetRange(%d, %d) = %d bytes, want bytes [%d, %d)", c.off, c.n, len(got), c.wantLo, c.wantHi)
			}
		})
	}
	if _, err := b.GetRange(ctx, "gr/small", -1, 5); err == nil {
		t.Error("GetRange with a negative offset succeeded")
	}
}

func testNotFound(ctx context.Context, t *testing.T, b objstore.Bucket) {
	const key = "nf/never-written"
	if _, err := b.Get(ctx, key); !objstore.IsNotFound(err) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	if _, err := b.GetRange(ctx, key, 0, 1); !objstore.IsNotFound(err) {
		t.Errorf("GetRange = %v, want ErrNotFound", err)
	}
	if _, err := b.Attributes(ctx, key); !objstore.IsNotFound(err) {
		t.Errorf("Attributes = %v, want ErrNotFound", err)
	}
	MustPut(t, b, "nf/dir/child", []byte("x"))
	if _, err := b.Get(ctx, "nf/dir"); !objstore.IsNotFound(err) {
		t.Errorf("Get of a key that is only a prefix of others = %v, want ErrNotFound", err)
	}
	if _, err := b.Get(ctx, "nf/dir/child/grandchild"); !objstore.IsNotFound(err) {
		t.Errorf("Get below an object = %v, want ErrNotFound", err)
	}
	if objstore.IsPreconditionFailed(fmt.Errorf("wrapped: %w", objstore.ErrNotFound)) {
		t.Error("ErrNotFound matched ErrPreconditionFailed")
	}
}

func testIfAbsent(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for _, size := range []int{5, BigSize} {
		t.Run(fmt.Sprintf("size_%d", size), func(t *testing.T) {
			key := fmt.Sprintf("ia/k-%d", size)
			first := Pattern(1, size)
			a, err := b.Put(ctx, key, bytes.NewReader(first), int64(size), objstore.IfAbsent())
			if err != nil {
				t.Fatalf("first IfAbsent put: %v", err)
			}
			second := Pattern(2, size)
			_, err = b.Put(ctx, key, onlyReader{bytes.NewReader(second)}, int64(size), objstore.IfAbsent())
			if !objstore.IsPreconditionFailed(err) {
				t.Fatalf("second IfAbsent put = %v, want ErrPreconditionFailed", err)
			}
			if objstore.IsNotFound(err) {
				t.Errorf("precondition failure also matches ErrNotFound: %v", err)
			}
			checkStored(t, b, key, first, a)
			// After a delete, IfAbsent succeeds again.
			if err := b.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Put(ctx, key, bytes.NewReader(second), int64(size), objstore.IfAbsent()); err != nil {
				t.Fatalf("IfAbsent put after delete: %v", err)
			}
		})
	}
}

func testIfMatch(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for _, size := range []int{5, BigSize} {
		t.Run(fmt.Sprintf("size_%d", size), func(t *testing.T) {
			key := fmt.Sprintf("im/k-%d", size)
			v1, v2, v3 := Pattern(11, size), Pattern(12, size), Pattern(13, size)
			if _, err := b.Put(ctx, key, bytes.NewReader(v1), int64(size), objstore.IfMatch(`"0123"`)); !objstore.IsPreconditionFailed(err) {
				t.Fatalf("IfMatch on a missing key = %v, want ErrPreconditionFailed", err)
			}
			a1 := MustPut(t, b, key, v1)
			a2, err := b.Put(ctx, key, bytes.NewReader(v2), int64(size), objstore.IfMatch(a1.ETag))
			if err != nil {
				t.Fatalf("IfMatch with the current etag: %v", err)
			}
			if _, err := b.Put(ctx, key, bytes.NewReader(v3), int64(size), objstore.IfMatch(a1.ETag)); !objstore.IsPreconditionFailed(err) {
				t.Fatalf("IfMatch with a stale etag = %v, want ErrPreconditionFailed", err)
			}
			checkStored(t, b, key, v2, a2)
			// The etag read with the object works for the next swap.
			rc, attrs, err := objstore.GetWithAttrs(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			rc.Close()
			a3, err := b.Put(ctx, key, bytes.NewReader(v3), int64(size), objstore.IfMatch(attrs.ETag))
			if err != nil {
				t.Fatalf("IfMatch with the etag from Get: %v", err)
			}
			checkStored(t, b, key, v3, a3)
		})
	}
}

const racers = 8

func testIfAbsentRacers(ctx context.Context, t *testing.T, b objstore.Bucket) {
	const key = "race/absent"
	wins := race(t, func(i int) error {
		data := []byte(fmt.Sprintf("racer %d", i))
		_, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.IfAbsent())
		return err
	})
	if got := MustGet(t, b, key); !bytes.Equal(got, []byte(fmt.Sprintf("racer %d", wins))) {
		t.Errorf("stored %q, but racer %d won", got, wins)
	}
}

func testIfMatchRacers(ctx context.Context, t *testing.T, b objstore.Bucket) {
	const key = "race/match"
	base := MustPut(t, b, key, []byte("base"))
	wins := race(t, func(i int) error {
		data := []byte(fmt.Sprintf("racer %d", i))
		_, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.IfMatch(base.ETag))
		return err
	})
	if got := MustGet(t, b, key); !bytes.Equal(got, []byte(fmt.Sprintf("racer %d", wins))) {
		t.Errorf("stored %q, but racer %d won", got, wins)
	}
}

// race runs racers calls at once and requires exactly one to succeed and
// every other to fail with ErrPreconditionFailed. It returns the winner.
func race(t *testing.T, put func(i int) error) int {
	t.Helper()
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			errs[i] = put(i)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racers %d and %d both won", winner, i)
			}
			winner = i
		case !objstore.IsPreconditionFailed(err):
			t.Fatalf("racer %d: %v, want ErrPreconditionFailed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	return winner
}

func listKeys(t *testing.T, b objstore.BucketReader, prefix string) []objstore.ObjectInfo {
	t.Helper()
	var out []objstore.ObjectInfo
	if err := b.List(context.Background(), prefix, func(info objstore.ObjectInfo) error {
		out = append(out, info)
		return nil
	}); err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return out
}

func keysOf(infos []objstore.ObjectInfo) []string {
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

func testList(ctx context.Context, t *testing.T, b objstore.Bucket) {
	// Byte order puts "a-c" < "a/b" < "a0": a plain directory walk would not.
	keys := []string{"ls/a/b", "ls/a0", "ls/a-c", "ls/b/c/d", "ls/x y", "ls/é", "ls/Z", "lsz/other"}
	for i, k := range keys {
		MustPut(t, b, k, Pattern(uint64(i), i*10))
	}
	all := listKeys(t, b, "ls/")
	want := []string{"ls/Z", "ls/a-c", "ls/a/b", "ls/a0", "ls/b/c/d", "ls/x y", "ls/é"}
	if got := keysOf(all); !slices.Equal(got, want) {
		t.Fatalf("List(ls/) = %q, want %q", got, want)
	}
	for _, info := range all {
		i := slices.Index(keys, info.Key)
		if info.Size != int64(i*10) || info.LastModified.IsZero() {
			t.Errorf("List entry %+v, want size %d and a modification time", info, i*10)
		}
	}
	for prefix, want := range map[string][]string{
		"ls/a":     {"ls/a-c", "ls/a/b", "ls/a0"},
		"ls/a/":    {"ls/a/b"},
		"ls/b/c/d": {"ls/b/c/d"},
		"ls/b/c":   {"ls/b/c/d"},
		"ls/q":     nil,
		"nomatch/": nil,
		"ls":       {"ls/Z", "ls/a-c", "ls/a/b", "ls/a0", "ls/b/c/d", "ls/x y", "ls/é", "lsz/other"},
	} {
		if got := keysOf(listKeys(t, b, prefix)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	stop := errors.New("stop here")
	n := 0
	err := b.List(ctx, "ls/", func(objstore.ObjectInfo) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("List stopped by its callback: err %v after %d calls, want %v after 2", err, n, stop)
	}
}

func testDelete(ctx context.Context, t *testing.T, b objstore.Bucket) {
	MustPut(t, b, "del/x/y", []byte("doomed"))
	MustPut(t, b, "del/keep", []byte("kept"))
	for i := range 2 { // idempotent
		if err := b.Delete(ctx, "del/x/y"); err != nil {
			t.Fatalf("delete #%d: %v", i+1, err)
		}
	}
	if _, err := b.Get(ctx, "del/x/y"); !objstore.IsNotFound(err) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if got := keysOf(listKeys(t, b, "del/")); !slices.Equal(got, []string{"del/keep"}) {
		t.Errorf("List after Delete = %q", got)
	}
	if err := b.Delete(ctx, "del/never-existed"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	// A key can be reused after deletion, also where a "directory" was.
	MustPut(t, b, "del/x", []byte("file where a dir was"))
	if got := MustGet(t, b, "del/x"); string(got) != "file where a dir was" {
		t.Errorf("got %q", got)
	}
}

// OddKeys are valid keys with characters that need escaping somewhere.
var OddKeys = []string{
	"odd/sp ace/tab\there",
	"odd/ü/日本/emoji-🙂",
	"odd/=+&%?#!'()*,;:@$~^[]{}|`\"<>\\",
	"odd/.hidden",
	"odd/ends.with.dot.",
	"odd/...",
	"odd/-dash",
	"odd/%2F-not-a-slash",
	"odd/plus+plus",
	"odd/percent%20twenty",
}

func testOddKeys(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for i, key := range OddKeys {
		data := []byte(fmt.Sprintf("content of %d", i))
		a := MustPut(t, b, key, data)
		checkStored(t, b, key, data, a)
	}
	want := slices.Clone(OddKeys)
	slices.Sort(want)
	if got := keysOf(listKeys(t, b, "odd/")); !slices.Equal(got, want) {
		t.Errorf("List(odd/) = %q, want %q", got, want)
	}
	for _, key := range OddKeys {
		if err := b.Delete(ctx, key); err != nil {
			t.Errorf("delete %q: %v", key, err)
		}
	}
	if got := listKeys(t, b, "odd/"); len(got) != 0 {
		t.Errorf("after deleting all, List(odd/) = %q", keysOf(got))
	}
}

// InvalidKeys are refused by every backend with ErrInvalidKey.
var InvalidKeys = []string{"", "/abs", "a//b", "trailing/", "a/../b", "..", ".", "a/./b", "nul\x00byte", "bad-utf8-\xff"}

func testInvalidKeys(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for _, key := range InvalidKeys {
		if _, err := b.Put(ctx, key, bytes.NewReader([]byte("x")), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Get(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func testSizeMismatch(ctx context.Context, t *testing.T, b objstore.Bucket) {
	for _, c := range []struct {
		name     string
		declared int64
		actual   int
	}{
		{"short", 10, 5},
		{"long", 5, 10},
		{"empty_declared_nonempty", 0, 3},
		{"big_short", BigSize, BigSize - 1},
		{"big_long", BigSize, BigSize + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "sm/" + c.name
			data := Pattern(3, c.actual)
			_, err := b.Put(ctx, key, onlyReader{bytes.NewReader(data)}, c.declared, objstore.Condition{})
			if !errors.Is(err, objstore.ErrSizeMismatch) {
				t.Fatalf("Put declared %d with %d bytes = %v, want ErrSizeMismatch", c.declared, c.actual, err)
			}
			if _, err := b.Attributes(ctx, key); !objstore.IsNotFound(err) {
				t.Errorf("after a size mismatch, Attributes = %v, want ErrNotFound", err)
			}
			// The file path (io.ReaderAt) too.
			f := TempFile(t, data)
			if _, err := b.Put(ctx, key, f, c.declared, objstore.Condition{}); !errors.Is(err, objstore.ErrSizeMismatch) {
				t.Fatalf("Put from file declared %d with %d bytes = %v, want ErrSizeMismatch", c.declared, c.actual, err)
			}
			if _, err := b.Attributes(ctx, key); !objstore.IsNotFound(err) {
				t.Errorf("after a size mismatch from a file, Attributes = %v, want ErrNotFound", err)
			}
		})
	}
}

// FailingReader yields N bytes of Pattern(seed) and then Err.
type FailingReader struct {
	Data []byte
	Err  error
}

func (f *FailingReader) Read(p []byte) (int, error) {
	if len(f.Data) == 0 {
		return 0, f.Err
	}
	n := copy(p, f.Data)
	f.Data = f.Data[n:]
	return n, nil
}

func testFailingReader(ctx context.Context, t *testing.T, b objstore.Bucket) {
	boom := errors.New("disk on fire")
	for _, size := range []int{100, BigSize} {
		t.Run(fmt.Sprintf("size_%d", size), func(t *testing.T) {
			fresh := fmt.Sprintf("fr/fresh-%d", size)
			// The reader fails near the end: for BigSize, after a whole part.
			_, err := b.Put(ctx, fresh, &FailingReader{Data: Pattern(4, size-100), Err: boom}, int64(size), objstore.Condition{})
			if !errors.Is(err, boom) {
				t.Fatalf("Put with a failing reader = %v, want the reader's error", err)
			}
			if _, err := b.Attributes(ctx, fresh); !objstore.IsNotFound(err) {
				t.Errorf("a failed Put left an object: Attributes = %v", err)
			}
			old := fmt.Sprintf("fr/old-%d", size)
			orig := Pattern(5, 64)
			a := MustPut(t, b, old, orig)
			if _, err := b.Put(ctx, old, &FailingReader{Data: Pattern(6, size-100), Err: boom}, int64(size), objstore.Condition{}); !errors.Is(err, boom) {
				t.Fatalf("overwriting Put with a failing reader = %v, want the reader's error", err)
			}
			checkStored(t, b, old, orig, a)
			if got := keysOf(listKeys(t, b, "fr/")); slices.Contains(got, fresh) {
				t.Errorf("List shows the failed key: %q", got)
			}
		})
	}
}

func testCanceled(t *testing.T, b objstore.Bucket) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Put(ctx, "cancel/k", bytes.NewReader([]byte("x")), 1, objstore.Condition{}); err == nil {
		t.Error("Put with a canceled context succeeded")
	}
	if _, err := b.Get(ctx, "cancel/k"); err == nil {
		t.Error("Get with a canceled context succeeded")
	}
	if _, err := b.Attributes(context.Background(), "cancel/k"); !objstore.IsNotFound(err) {
		t.Errorf("canceled Put left an object: %v", err)
	}
}
