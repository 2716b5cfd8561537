package fetchcache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/promreg"
)

// IsCorruptData reports errors that say stored data is corrupt (they match
// kafkaerr.ErrCorrupt), as opposed
// to the store being unreachable or slow: a retry of the same read cannot
// help, and an operator must look at the object the error names.
func IsCorruptData(err error) bool { return errors.Is(err, kafkaerr.ErrCorrupt) }

// NewCorruptCounter makes tiered_fetch_corrupt_objects_total, registered
// with reg (or reused from it) when reg is not nil.
func NewCorruptCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tiered_fetch_corrupt_objects_total",
		Help: "Reads (HTTP requests, Kafka partitions) refused because stored data failed its checks (batch CRC or framing, object size or checksum, index, manifest, compressed payload).",
	})
	if reg != nil {
		c = promreg.RegisterOrReuse(reg, c)
	}
	return c
}
