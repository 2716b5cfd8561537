// Package promreg owns the one way tiered registers a Prometheus collector
// that several instances may share: the first registration wins and later
// ones get the collector already there, so their series add up.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterOrReuse registers c with reg, or returns the collector already
// registered under the same description. A nil reg leaves c unregistered.
// A different collector under the same name is a programming error and
// panics.
func RegisterOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
