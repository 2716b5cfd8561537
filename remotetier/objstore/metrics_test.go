package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	objstore.WithMetrics(objstore.NewMemory(), reg)
	want := map[string]int{
		"tiered_objstore_operations_total":           len(objstore.Operations),
		"tiered_objstore_operation_failures_total":   len(objstore.Operations),
		"tiered_objstore_operation_duration_seconds": len(objstore.Operations),
		"tiered_objstore_bytes_total":                3,
	}
	for name, n := range want {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, n)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tiered_objstore_bytes_total Object bytes read (get, get_range) and written (put).
# TYPE tiered_objstore_bytes_total counter
tiered_objstore_bytes_total{operation="get"} 0
tiered_objstore_bytes_total{operation="get_range"} 0
tiered_objstore_bytes_total{operation="put"} 0
`), "tiered_objstore_bytes_total"); err != nil {
		t.Error(err)
	}
	// A second bucket on the same registry shares the series.
	objstore.WithMetrics(objstore.NewMemory(), reg)
}

func TestMetricsCount(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	inner := objstore.WithFaults(objstore.NewMemory(), objstore.FailMatching(func(c objstore.Call) bool {
		return c.Key == "broken"
	}, nil))
	b := objstore.WithMetrics(inner, reg)
	shared := objstore.WithMetrics(objstore.NewMemory(), reg) // same registry, same series

	objtesting.MustPut(t, b, "a", []byte("12345"))
	objtesting.MustPut(t, shared, "b", []byte("123"))
	if got := objtesting.MustGet(t, b, "a"); string(got) != "12345" {
		t.Fatal(string(got))
	}
	rc, err := b.GetRange(ctx, "a", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(rc)
	// Duration and count of a read are recorded at Close.
	if got := value(t, reg, "tiered_objstore_operations_total", "get_range"); got != 0 {
		t.Errorf("get_range counted before Close: %v", got)
	}
	rc.Close()
	rc.Close() // a second Close does not count twice

	b.Get(ctx, "missing")                                                       // not found: not a failure
	b.Put(ctx, "a", bytes.NewReader([]byte("x")), 1, objstore.IfAbsent())       // lost precondition: not a failure
	b.Get(ctx, "broken")                                                        // injected: a failure
	b.Put(ctx, "sized", bytes.NewReader([]byte("xy")), 5, objstore.Condition{}) // size mismatch: a failure
	b.Attributes(ctx, "a")
	stop := errors.New("enough")
	b.List(ctx, "", func(objstore.ObjectInfo) error { return stop }) // stopped by the caller: not a failure
	b.Delete(ctx, "a")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	b.Get(cctx, "a") // caller canceled: not a failure

	for op, want := range map[string][3]float64{ // calls, failures, bytes
		"put":        {4, 1, 8},
		"get":        {4, 1, 5},
		"get_range":  {1, 0, 2},
		"attributes": {1, 0, -1},
		"delete":     {1, 0, -1},
		"list":       {1, 0, -1},
	} {
		if got := value(t, reg, "tiered_objstore_operations_total", op); got != want[0] {
			t.Errorf("operations_total{%s} = %v, want %v", op, got, want[0])
		}
		if got := value(t, reg, "tiered_objstore_operation_failures_total", op); got != want[1] {
			t.Errorf("failures_total{%s} = %v, want %v", op, got, want[1])
		}
		if want[2] >= 0 {
			if got := value(t, reg, "tiered_objstore_bytes_total", op); got != want[2] {
				t.Errorf("bytes_total{%s} = %v, want %v", op, got, want[2])
			}
		}
	}
	if n, err := testutil.GatherAndCount(reg, "tiered_objstore_operation_duration_seconds"); err != nil || n != len(objstore.Operations) {
		t.Errorf("duration series %d, %v", n, err)
	}
}

// value reads one labelled counter from the registry.
func value(t *testing.T, reg *prometheus.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{operation=%q}", name, op)
	return 0
}
