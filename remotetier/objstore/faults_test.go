package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

// workload is a small read-modify-write sequence: write two objects, swap
// one with IfMatch, list and read back (readBack), delete.
func workload(ctx context.Context, b objstore.Bucket) error {
	a, err := b.Put(ctx, "w/one", bytes.NewReader([]byte("1")), 1, objstore.IfAbsent())
	if err != nil && !objstore.IsPreconditionFailed(err) {
		return err
	}
	if err != nil { // written by an earlier, failed-after-write attempt
		if a, err = b.Attributes(ctx, "w/one"); err != nil {
			return err
		}
	}
	if _, err := b.Put(ctx, "w/two", bytes.NewReader([]byte("22")), 2, objstore.Condition{}); err != nil {
		return err
	}
	if _, err := b.Put(ctx, "w/one", bytes.NewReader([]byte("111")), 3, objstore.IfMatch(a.ETag)); err != nil {
		return err
	}
	if err := readBack(ctx, b); err != nil {
		return err
	}
	return b.Delete(ctx, "w/two")
}

// TestFaultsEveryCall fails call i for i = 0, 1, 2, ... until the
// workload succeeds, and requires every failure to be the injected one: on
// the memory backend and on the filesystem backend with each way it
// resolves keys (openat2, the openat walk).
func TestFaultsEveryCall(t *testing.T) {
	backends := []struct {
		name string
		new  func(t *testing.T) objstore.Bucket
	}{
		{"memory", func(*testing.T) objstore.Bucket { return objstore.NewMemory() }},
		{"filesystem", func(t *testing.T) objstore.Bucket { return newFS(t, t.TempDir()) }},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			if be.name == "memory" {
				sweep(t, be.new, workload, 6)
				return
			}
			resolvers(t, func(t *testing.T) { sweep(t, be.new, workload, 6) })
		})
	}
}

// TestFaultsEveryCallReadOnly is the sweep of TestFaultsEveryCall over a
// reading workload on buckets opened read-only (the file:// bucket with
// NewFilesystemReadOnly under each resolver, and a mem:// bucket through
// OpenReadOnly), whose writes fail with ErrReadOnly when the injector lets
// them through.
func TestFaultsEveryCallReadOnly(t *testing.T) {
	ctx := context.Background()
	seed := func(t *testing.T, b objstore.Bucket) {
		objtesting.MustPut(t, b, "w/one", []byte("111"))
		objtesting.MustPut(t, b, "w/two", []byte("22"))
	}
	fsOpen := func(t *testing.T) objstore.Bucket {
		dir := t.TempDir()
		seed(t, newFS(t, dir))
		b, err := objstore.NewFilesystemReadOnly(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	memOpen := func(t *testing.T) objstore.Bucket {
		name := "faults-ro-" + strings.ReplaceAll(t.Name(), "/", "-")
		seed(t, objstore.OpenMemory(name))
		b, err := objstore.OpenReadOnly(ctx, "mem://"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	readWorkload := func(ctx context.Context, b objstore.Bucket) error {
		if _, err := b.Put(ctx, "w/three", bytes.NewReader([]byte("3")), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrReadOnly) {
			return fmt.Errorf("put on a read-only bucket: %w", errors.Join(err, errors.New("want ErrReadOnly")))
		}
		if err := b.Delete(ctx, "w/two"); !errors.Is(err, objstore.ErrReadOnly) {
			return fmt.Errorf("delete on a read-only bucket: %w", errors.Join(err, errors.New("want ErrReadOnly")))
		}
		return readBack(ctx, b)
	}
	t.Run("filesystem", func(t *testing.T) {
		resolvers(t, func(t *testing.T) { sweep(t, fsOpen, readWorkload, 6) })
	})
	t.Run("memory", func(t *testing.T) { sweep(t, memOpen, readWorkload, 6) })
}

// readBack lists w/, reads both objects in full and in part, and checks
// what it read.
func readBack(ctx context.Context, b objstore.BucketReader) error {
	n := 0
	if err := b.List(ctx, "w/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		return err
	}
	rc, err := b.GetRange(ctx, "w/one", 1, 2)
	if err != nil {
		return err
	}
	part, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	rc, err = b.Get(ctx, "w/two")
	if err != nil {
		return err
	}
	whole, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	a, err := b.Attributes(ctx, "w/one")
	if err != nil {
		return err
	}
	if string(part) != "11" || string(whole) != "22" || a.Size != 3 || n != 2 {
		return fmt.Errorf("read %q and %q, size %d, listed %d", part, whole, a.Size, n)
	}
	return nil
}

// sweep runs work on a fresh bucket from open, behind an injector failing
// call i, for i = 0, 1, 2, ... until it succeeds (after at least minCalls
// calls), and requires every failure to be the injected one.
func sweep(t *testing.T, open func(t *testing.T) objstore.Bucket, work func(context.Context, objstore.Bucket) error, minCalls int64) {
	t.Helper()
	ctx := context.Background()
	for i := int64(0); ; i++ {
		if i > 100 {
			t.Fatal("workload never succeeded")
		}
		f := objstore.WithFaults(open(t), objstore.FailNth(i))
		err := work(ctx, f)
		if err == nil {
			if f.Injected() != 0 {
				t.Fatalf("fault %d injected but the workload succeeded", i)
			}
			if i < minCalls {
				t.Fatalf("workload succeeded after only %d calls", i)
			}
			return
		}
		if !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("call %d: workload failed with %v, not the injected fault", i, err)
		}
		if f.Injected() != 1 {
			t.Fatalf("call %d: %d faults injected", i, f.Injected())
		}
	}
}

func TestFaultsAfterWrite(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	f := objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
		if c.Op == objstore.OpPut {
			return &objstore.Fault{After: true}
		}
		return nil
	}))
	_, err := f.Put(ctx, "k", bytes.NewReader([]byte("landed")), 6, objstore.Condition{})
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put = %v, want ErrInjected", err)
	}
	if got := objtesting.MustGet(t, mem, "k"); string(got) != "landed" {
		t.Errorf("an After fault must let the write land; got %q", got)
	}
	custom := errors.New("connection reset")
	g := objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool { return c.Op == objstore.OpDelete }, custom))
	if err := g.Delete(ctx, "k"); !errors.Is(err, custom) {
		t.Errorf("Delete = %v, want the custom error", err)
	}
	if _, err := mem.Attributes(ctx, "k"); err != nil {
		t.Errorf("a before-fault let the delete through: %v", err)
	}
}

func TestFaultsTruncatedReads(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	data := objtesting.Pattern(1, 10_000)
	objtesting.MustPut(t, mem, "seg", data)
	f := objstore.WithFaults(mem, objstore.TruncateReads(func(objstore.Call) bool { return true }, 100))
	// Through a metrics wrapper too: attributes and the read error survive.
	reg := prometheus.NewRegistry()
	b := objstore.WithMetrics(f, reg)
	rc, attrs, err := objstore.GetWithAttrs(ctx, b, "seg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, objstore.ErrInjected) || !bytes.Equal(got, data[:100]) {
		t.Errorf("truncated read: %d bytes, %v", len(got), err)
	}
	if attrs.Size != int64(len(data)) {
		t.Errorf("attrs through wrappers = %+v", attrs)
	}
	if v := value(t, reg, "tiered_objstore_operation_failures_total", "get"); v != 1 {
		t.Errorf("a truncated read counted %v failures, want 1", v)
	}
	rc, err = b.GetRange(ctx, "seg", 50, 500)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, data[50:150]) {
		t.Errorf("truncated range read: %d bytes, %v", len(got), err)
	}
	// Truncation does not apply to other operations.
	if _, err := b.Attributes(ctx, "seg"); err != nil {
		t.Errorf("Attributes under a read-truncating injector: %v", err)
	}
}

// attrlessBucket hides the Attrs of Get's reader, like a Bucket written
// elsewhere might.
type attrlessBucket struct{ objstore.Bucket }

func (a attrlessBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := a.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(rc), nil
}

func TestGetWithAttrsFallback(t *testing.T) {
	mem := objstore.NewMemory()
	put := objtesting.MustPut(t, mem, "k", []byte("value"))
	rc, attrs, err := objstore.GetWithAttrs(context.Background(), attrlessBucket{mem}, "k")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "value" || attrs.ETag != put.ETag || attrs.Size != 5 {
		t.Errorf("got %q %+v, want value %+v", data, attrs, put)
	}
	if _, _, err := objstore.GetWithAttrs(context.Background(), attrlessBucket{mem}, "missing"); !objstore.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
}
