package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterOrReuse(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "tiered_test_things_total", Help: "Things."}
	first := RegisterOrReuse(reg, prometheus.NewCounter(opts))
	second := RegisterOrReuse(reg, prometheus.NewCounter(opts))
	if first != second {
		t.Fatal("a second registration did not reuse the first collector")
	}
	second.Inc()
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("gather: %v %v; want one family whose counter is 1", mfs, err)
	}
	own := prometheus.NewCounter(opts)
	if got := RegisterOrReuse[prometheus.Counter](nil, own); got != own {
		t.Fatal("nil registry: want the collector back unregistered")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a different collector under the same name did not panic")
		}
	}()
	RegisterOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "tiered_test_things_total", Help: "Other."}))
}
