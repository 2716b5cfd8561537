package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/ctxsleep"
)

// Kafka's broker defaults for the log cleaner (LogCleaner / CleanerConfig).
const (
	// DefaultThreads is log.cleaner.threads.
	DefaultThreads = 1
	// DefaultDedupeBufferSize is log.cleaner.dedupe.buffer.size, split across threads.
	DefaultDedupeBufferSize = 128 << 20
	// DefaultIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: unlimited.
	DefaultIOMaxBytesPerSecond = math.MaxFloat64
	// DefaultBackoff is log.cleaner.backoff.ms.
	DefaultBackoff = 15 * time.Second
	// DefaultProducerIDExpiration is producer.id.expiration.ms.
	DefaultProducerIDExpiration = 24 * time.Hour
)

// Config holds the broker-level cleaner settings (Kafka's log.cleaner.*),
// the clock and the observability hooks. Topic-level settings
// (min.cleanable.dirty.ratio, the compaction lags, delete.retention.ms,
// segment.bytes) come from each log's topic config.
type Config struct {
	// Threads is log.cleaner.threads: logs cleaned at the same time.
	Threads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size: the offset map
	// memory of all threads together, divided equally between them.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: read plus
	// write bytes of all threads together.
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms: the sleep when no log needs cleaning.
	Backoff time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: a producer whose
	// last batch is older than this no longer needs its last batch kept
	// (as an empty batch) to preserve its state. A batch's age is its max
	// timestamp's, or, for one without timestamps, its segment file's
	// last-modified time's.
	ProducerIDExpiration time.Duration
	// Now is the clock (nil: time.Now). Sleep waits (nil: a timer honouring ctx).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger gets one summary line per cleaning run (nil discards).
	Logger *slog.Logger
	// Registerer gets the tiered_compactor_* metrics (nil: not registered).
	Registerer prometheus.Registerer
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{Threads: DefaultThreads, DedupeBufferSize: DefaultDedupeBufferSize,
		IOMaxBytesPerSecond: DefaultIOMaxBytesPerSecond, Backoff: DefaultBackoff, ProducerIDExpiration: DefaultProducerIDExpiration}
}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	if c.Threads == 0 {
		c.Threads = DefaultThreads
	}
	if c.DedupeBufferSize == 0 {
		c.DedupeBufferSize = DefaultDedupeBufferSize
	}
	if c.IOMaxBytesPerSecond == 0 {
		c.IOMaxBytesPerSecond = DefaultIOMaxBytesPerSecond
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = ctxsleep.Sleep
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.Threads < 1 {
		errs = append(errs, fmt.Errorf("log.cleaner.threads must be at least 1, got %d", c.Threads))
	}
	if threads := max(c.Threads, 1); c.DedupeBufferSize/int64(threads) < 2*BytesPerEntry {
		errs = append(errs, fmt.Errorf("log.cleaner.dedupe.buffer.size %d is too small for %d thread(s): each needs at least %d bytes",
			c.DedupeBufferSize, threads, 2*BytesPerEntry))
	}
	if !(c.IOMaxBytesPerSecond > 0) {
		errs = append(errs, fmt.Errorf("log.cleaner.io.max.bytes.per.second must be positive, got %v", c.IOMaxBytesPerSecond))
	}
	if c.Backoff < 0 {
		errs = append(errs, fmt.Errorf("log.cleaner.backoff.ms must not be negative, got %v", c.Backoff))
	}
	return errors.Join(errs...)
}
