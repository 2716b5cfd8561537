package fetchcache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/internal/x/promreg"
)

// CodeCorruptMessage is the result code of a read that found stored data
// failing its checks (a batch CRC, an object's size or checksum against
// its manifest, an index that cannot be right): HTTP 500 with this code,
// Kafka CORRUPT_MESSAGE. The bytes are never served.
const CodeCorruptMessage = "CORRUPT_MESSAGE"

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
		Help: "Reads (HTTP requests, Kafka partitions) refused because stored data failed its checksum or size check.",
	})
	if reg != nil {
		c = promreg.RegisterOrReuse(reg, c)
	}
	return c
}
