package groups

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testutilCount(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
