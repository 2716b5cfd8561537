package topicconfig

import (
	"math"
	"strings"
)

// Kafka topic config names.
const (
	CleanupPolicyConfig          = "cleanup.policy"
	SegmentBytesConfig           = "segment.bytes"
	SegmentMsConfig              = "segment.ms"
	SegmentJitterMsConfig        = "segment.jitter.ms"
	SegmentIndexBytesConfig      = "segment.index.bytes"
	RetentionMsConfig            = "retention.ms"
	RetentionBytesConfig         = "retention.bytes"
	LocalRetentionMsConfig       = "local.retention.ms"
	LocalRetentionBytesConfig    = "local.retention.bytes"
	MinCleanableDirtyRatioConfig = "min.cleanable.dirty.ratio"
	MinCompactionLagMsConfig     = "min.compaction.lag.ms"
	MaxCompactionLagMsConfig     = "max.compaction.lag.ms"
	DeleteRetentionMsConfig      = "delete.retention.ms"
	FileDeleteDelayMsConfig      = "file.delete.delay.ms"
	FlushMessagesConfig          = "flush.messages"
	FlushMsConfig                = "flush.ms"
	IndexIntervalBytesConfig     = "index.interval.bytes"
	RemoteStorageEnableConfig    = "remote.storage.enable"
	MaxMessageBytesConfig        = "max.message.bytes"
	CompressionTypeConfig        = "compression.type"
	MessageTimestampTypeConfig   = "message.timestamp.type"
	// MessageTimestampBeforeMaxMsConfig and MessageTimestampAfterMaxMsConfig bound how
	// far a CreateTime record's timestamp may lie before or after the broker's clock
	// (KIP-937; they replace message.timestamp.difference.max.ms, removed in Kafka 4).
	MessageTimestampBeforeMaxMsConfig = "message.timestamp.before.max.ms"
	MessageTimestampAfterMaxMsConfig  = "message.timestamp.after.max.ms"

	// InternalSegmentBytesConfig is Kafka's test-only "internal.segment.bytes": when set it
	// replaces segment.bytes and escapes segment.bytes' 1 MiB minimum, so tests can roll tiny
	// segments. It is accepted by Parse but not listed by Names or Describe unless overridden.
	InternalSegmentBytesConfig = "internal.segment.bytes"
)

// Kafka's defaults (LogConfig, ServerLogConfigs).
const (
	DefaultSegmentBytes           = 1 << 30                 // 1 GiB
	DefaultSegmentMs              = 7 * 24 * 60 * 60 * 1000 // 7 days
	DefaultSegmentJitterMs        = 0
	DefaultSegmentIndexBytes      = 10 << 20                // 10 MiB
	DefaultRetentionMs            = 7 * 24 * 60 * 60 * 1000 // 7 days
	DefaultRetentionBytes         = -1                      // no size limit
	DefaultLocalRetentionMs       = -2                      // same as retention.ms
	DefaultLocalRetentionBytes    = -2                      // same as retention.bytes
	DefaultMinCleanableDirtyRatio = 0.5
	DefaultMinCompactionLagMs     = 0
	DefaultMaxCompactionLagMs     = math.MaxInt64
	DefaultDeleteRetentionMs      = 24 * 60 * 60 * 1000 // 1 day
	DefaultFileDeleteDelayMs      = 60000
	DefaultFlushMessages          = math.MaxInt64 // never by count: rely on the page cache, as Kafka does
	DefaultFlushMs                = math.MaxInt64
	DefaultIndexIntervalBytes     = 4096
	DefaultRemoteStorageEnable    = false
	DefaultMaxMessageBytes        = 1<<20 + 12 // 1 MiB + Records.LOG_OVERHEAD = 1048588
	DefaultCompressionType        = CompressionProducer
	DefaultMessageTimestampType   = CreateTime
	// Kafka 4.0's defaults: any past timestamp, at most one hour in the future
	// (KIP-1030 lowered after.max.ms from Long.MAX_VALUE).
	DefaultMessageTimestampBeforeMaxMs = math.MaxInt64
	DefaultMessageTimestampAfterMaxMs  = 60 * 60 * 1000
)

// Kafka's lower bounds for the topic configs that have one.
const (
	// MinSegmentBytes is Kafka's topic-level minimum for segment.bytes (atLeast(1024 * 1024)
	// since KIP-1030; Kafka 3.x allowed 14).
	MinSegmentBytes = 1 << 20
	// MinInternalSegmentBytes bounds internal.segment.bytes: the size of the smallest legacy
	// record (LegacyRecord.RECORD_OVERHEAD_V0), the old segment.bytes minimum.
	MinInternalSegmentBytes = 14
	// MinSegmentIndexBytes is the minimum for segment.index.bytes (atLeast(4)).
	MinSegmentIndexBytes = 4
)

// Values of compression.type. "uncompressed" (Kafka's own name) is accepted as a synonym of
// CompressionNone and parsed to it.
const (
	CompressionProducer     = "producer"
	CompressionNone         = "none"
	CompressionUncompressed = "uncompressed"
	CompressionGzip         = "gzip"
	CompressionSnappy       = "snappy"
	CompressionLZ4          = "lz4"
	CompressionZstd         = "zstd"
)

// Values of message.timestamp.type.
const (
	CreateTime    = "CreateTime"
	LogAppendTime = "LogAppendTime"
)

// Policy is cleanup.policy: which of Kafka's two cleaners run on old segments. Both false is
// Kafka's empty list: neither deletion nor compaction.
type Policy struct {
	// Delete discards whole old segments once retention.ms or retention.bytes is exceeded.
	Delete bool
	// Compact keeps only the latest record per key (log compaction).
	Compact bool
}

// String returns the policy as Kafka writes it: "delete", "compact", "compact,delete", or ""
// for the empty list.
func (p Policy) String() string {
	switch {
	case p.Compact && p.Delete:
		return "compact,delete"
	case p.Compact:
		return "compact"
	case p.Delete:
		return "delete"
	default:
		return ""
	}
}

// Config is the effective configuration of one topic. Field comments give Kafka's meaning; the
// zero Config is not valid, start from Defaults.
type Config struct {
	// CleanupPolicy (cleanup.policy, default delete): the retention policy for old segments,
	// delete (by age/size), compact (latest value per key), or both.
	CleanupPolicy Policy
	// SegmentBytes (segment.bytes, INT, default 1 GiB, at least 1 MiB): the size at which the
	// active segment is rolled. Retention and cleaning work a whole segment at a time.
	SegmentBytes int64
	// SegmentMs (segment.ms, default 7 days, at least 1): the time after which the active
	// segment is rolled even if not full, so retention can delete or compact old data.
	SegmentMs int64
	// SegmentJitterMs (segment.jitter.ms, default 0, at least 0): the maximum random jitter
	// subtracted from the scheduled roll time, to avoid every partition rolling at once.
	SegmentJitterMs int64
	// SegmentIndexBytes (segment.index.bytes, INT, default 10 MiB, at least 4): the size
	// the offset and time indexes are preallocated to; a full index rolls the segment.
	SegmentIndexBytes int64
	// RetentionMs (retention.ms, default 7 days, at least -1): how long a segment is kept under
	// the delete policy, measured from its largest timestamp; -1 means no time limit.
	RetentionMs int64
	// RetentionBytes (retention.bytes, default -1): the size a partition may grow to before its
	// oldest segments are deleted under the delete policy; negative means no size limit.
	RetentionBytes int64
	// LocalRetentionMs (local.retention.ms, default -2, at least -2): how long a segment stays
	// on local disk once it is in the remote tier; -2 means retention.ms, -1 means forever.
	LocalRetentionMs int64
	// LocalRetentionBytes (local.retention.bytes, default -2, at least -2): the local size
	// above which segments already in the remote tier are deleted locally; -2 means
	// retention.bytes, -1 means no limit.
	LocalRetentionBytes int64
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio, DOUBLE, default 0.5, in [0,1]): the
	// share of the log that must be dirty (uncleaned) before the compactor cleans it.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs (min.compaction.lag.ms, default 0, at least 0): the minimum time a
	// record stays uncompacted in the log.
	MinCompactionLagMs int64
	// MaxCompactionLagMs (max.compaction.lag.ms, default Long.MAX_VALUE, at least 1): the
	// maximum time a record stays ineligible for compaction; it also bounds segment.ms for
	// compacted topics.
	MaxCompactionLagMs int64
	// DeleteRetentionMs (delete.retention.ms, default 1 day, at least 0): how long tombstones
	// are kept after cleaning, so consumers reading from the start see the delete.
	DeleteRetentionMs int64
	// FileDeleteDelayMs (file.delete.delay.ms, default 60000, at least 0): how long a segment
	// renamed to .deleted waits before its files are removed.
	FileDeleteDelayMs int64
	// FlushMessages (flush.messages, default Long.MAX_VALUE, at least 1): the log is
	// fsynced once this many records were appended since the last flush; 1 makes every
	// acknowledged append durable.
	FlushMessages int64
	// FlushMs (flush.ms, default Long.MAX_VALUE, at least 0): the log is fsynced once this
	// long has passed since the last flush (checked on append and by the periodic flusher).
	FlushMs int64
	// IndexIntervalBytes (index.interval.bytes, INT, default 4096, at least 0): an offset and
	// time index entry is added after more than this many bytes since the last one.
	IndexIntervalBytes int64
	// RemoteStorageEnable (remote.storage.enable, default false): whether rolled segments are
	// copied to the remote tier. Kafka refuses it for compacted topics.
	RemoteStorageEnable bool
	// MaxMessageBytes (max.message.bytes, INT, default 1048588, at least 0): the largest record
	// batch (after compression) accepted for the topic.
	MaxMessageBytes int64
	// CompressionType (compression.type, default producer): the codec batches are stored with:
	// producer keeps the producer's codec; none (Kafka: uncompressed), gzip, snappy, lz4, zstd.
	CompressionType string
	// MessageTimestampType (message.timestamp.type, default CreateTime): whether record
	// timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).
	MessageTimestampType string
	// MessageTimestampBeforeMaxMs (message.timestamp.before.max.ms, default Long.MAX_VALUE,
	// at least 0): a CreateTime topic refuses a batch holding a record timestamp more than
	// this far before the broker's clock (Kafka's INVALID_TIMESTAMP).
	MessageTimestampBeforeMaxMs int64
	// MessageTimestampAfterMaxMs (message.timestamp.after.max.ms, default 3600000 = 1 hour,
	// at least 0): a CreateTime topic refuses a batch holding a record timestamp more than
	// this far after the broker's clock.
	MessageTimestampAfterMaxMs int64
	// InternalSegmentBytes (internal.segment.bytes, Kafka's test-only config, 0 = unset,
	// otherwise at least 14): when set, the roll size instead of SegmentBytes. See
	// EffectiveSegmentBytes.
	InternalSegmentBytes int64
}

// Defaults returns Kafka's topic defaults.
func Defaults() Config {
	return Config{
		CleanupPolicy:          Policy{Delete: true},
		SegmentBytes:           DefaultSegmentBytes,
		SegmentMs:              DefaultSegmentMs,
		SegmentJitterMs:        DefaultSegmentJitterMs,
		SegmentIndexBytes:      DefaultSegmentIndexBytes,
		RetentionMs:            DefaultRetentionMs,
		RetentionBytes:         DefaultRetentionBytes,
		LocalRetentionMs:       DefaultLocalRetentionMs,
		LocalRetentionBytes:    DefaultLocalRetentionBytes,
		MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio,
		MinCompactionLagMs:     DefaultMinCompactionLagMs,
		MaxCompactionLagMs:     DefaultMaxCompactionLagMs,
		DeleteRetentionMs:      DefaultDeleteRetentionMs,
		FileDeleteDelayMs:      DefaultFileDeleteDelayMs,
		FlushMessages:          DefaultFlushMessages,
		FlushMs:                DefaultFlushMs,
		IndexIntervalBytes:     DefaultIndexIntervalBytes,
		RemoteStorageEnable:    DefaultRemoteStorageEnable,
		MaxMessageBytes:        DefaultMaxMessageBytes,
		CompressionType:        DefaultCompressionType,
		MessageTimestampType:   DefaultMessageTimestampType,

		MessageTimestampBeforeMaxMs: DefaultMessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs:  DefaultMessageTimestampAfterMaxMs,
	}
}

// EffectiveLocalRetentionMs resolves local.retention.ms: -2 means retention.ms.
func (c Config) EffectiveLocalRetentionMs() int64 {
	if c.LocalRetentionMs == DefaultLocalRetentionMs {
		return c.RetentionMs
	}
	return c.LocalRetentionMs
}

// EffectiveLocalRetentionBytes resolves local.retention.bytes: -2 means retention.bytes.
func (c Config) EffectiveLocalRetentionBytes() int64 {
	if c.LocalRetentionBytes == DefaultLocalRetentionBytes {
		return c.RetentionBytes
	}
	return c.LocalRetentionBytes
}

// EffectiveSegmentBytes is the size at which the active segment rolls: internal.segment.bytes
// when set, segment.bytes otherwise (Kafka's LogConfig.segmentSize()).
func (c Config) EffectiveSegmentBytes() int64 {
	if c.InternalSegmentBytes != 0 {
		return c.InternalSegmentBytes
	}
	return c.SegmentBytes
}

// MaxSegmentMs is the age at which the active segment rolls: segment.ms, lowered to
// max.compaction.lag.ms for compacted topics so records become cleanable in time (Kafka's
// LogConfig.maxSegmentMs()).
func (c Config) MaxSegmentMs() int64 {
	if c.CleanupPolicy.Compact && c.MaxCompactionLagMs > 0 {
		return min(c.MaxCompactionLagMs, c.SegmentMs)
	}
	return c.SegmentMs
}

// CompressionCodec maps compression.type to the record-batch codec id (0 none, 1 gzip,
// 2 snappy, 3 lz4, 4 zstd). keepProducer is true for "producer": batches keep their own codec.
// ok is false for a value Validate would refuse.
func (c Config) CompressionCodec() (codec int8, keepProducer, ok bool) {
	switch c.CompressionType {
	case CompressionProducer:
		return 0, true, true
	case CompressionNone, CompressionUncompressed:
		return 0, false, true
	case CompressionGzip:
		return 1, false, true
	case CompressionSnappy:
		return 2, false, true
	case CompressionLZ4:
		return 3, false, true
	case CompressionZstd:
		return 4, false, true
	default:
		return 0, false, false
	}
}

// Validate checks every field against Kafka's per-config rules, then the cross-field rules,
// and reports every problem at once as an errors.Join of *InvalidConfigError. A cross-field rule
// is skipped when one of its fields is already invalid on its own.
func (c Config) Validate() error {
	return joinErrors(c.validate(nil))
}

// validate appends the per-field problems, then the cross-field problems, to errs. Fields
// named in skip were not parsed and are not checked (their default stands in).
func (c Config) validate(skip map[string]bool) []error {
	var errs []error
	bad := make(map[string]bool, len(skip))
	for name := range skip {
		bad[name] = true
	}
	for i := range defs {
		d := &defs[i]
		if skip[d.name] {
			continue
		}
		if err := d.check(&c); err != nil {
			bad[d.name] = true
			errs = append(errs, err)
		}
	}
	return append(errs, c.crossCheck(bad)...)
}

// crossCheck applies Kafka's rules that relate two configs, skipping rules whose inputs are in
// bad.
func (c Config) crossCheck(bad map[string]bool) []error {
	var errs []error
	ok := func(names ...string) bool {
		for _, n := range names {
			if bad[n] {
				return false
			}
		}
		return true
	}
	// LogConfig.validateValues.
	if ok(MinCompactionLagMsConfig, MaxCompactionLagMsConfig) && c.MinCompactionLagMs > c.MaxCompactionLagMs {
		errs = append(errs, &InvalidConfigError{
			Name:  MinCompactionLagMsConfig,
			Value: formatInt(c.MinCompactionLagMs),
			Reason: "conflict topic config setting " + MinCompactionLagMsConfig + " (" + formatInt(c.MinCompactionLagMs) +
				") > " + MaxCompactionLagMsConfig + " (" + formatInt(c.MaxCompactionLagMs) + ")",
			standalone: true,
			cross:      true,
		})
	}
	// LogConfig.validateRemoteStorageRetentionTime / RetentionSize. Kafka applies these only
	// when remote.storage.enable is true; here the local tier is always a cache of the remote
	// one, so they always apply.
	if ok(RetentionMsConfig, LocalRetentionMsConfig) {
		if err := checkLocal(LocalRetentionMsConfig, c.LocalRetentionMs, RetentionMsConfig, c.RetentionMs, c.RetentionMs != -1); err != nil {
			errs = append(errs, err)
		}
	}
	if ok(RetentionBytesConfig, LocalRetentionBytesConfig) {
		if err := checkLocal(LocalRetentionBytesConfig, c.LocalRetentionBytes, RetentionBytesConfig, c.RetentionBytes, c.RetentionBytes > -1); err != nil {
			errs = append(errs, err)
		}
	}
	// Kafka refuses remote storage on compacted topics
	// (LogConfig.validateRemoteStorageRequiresDeleteCleanupPolicy); tiered
	// does not: cleaned segments replace their remote copies in one manifest
	// commit, so a compacted topic's remote tier converges to the compacted log.
	return errs
}

// checkLocal is Kafka's rule for a local.retention.* value against its retention.* value,
// applied when the total retention is limited.
func checkLocal(localName string, local int64, totalName string, total int64, limited bool) error {
	if !limited || local == -2 {
		return nil
	}
	if local == -1 {
		return &InvalidConfigError{Name: localName, Value: "-1", cross: true,
			Reason: "Value must not be -1 as " + totalName + " value is set as " + formatInt(total) + "."}
	}
	if local > total {
		return &InvalidConfigError{Name: localName, Value: formatInt(local), cross: true,
			Reason: "Value must not be more than " + totalName + " property value: " + formatInt(total)}
	}
	return nil
}

// Parse applies overrides (Kafka config name -> value) on top of Defaults and validates the
// result. It reports every problem at once: unknown names, values that do not parse, values out
// of range and cross-field conflicts, as an errors.Join of *InvalidConfigError in name order,
// cross-field problems last. Values are trimmed as Kafka does; "uncompressed" becomes "none".
// On error the returned Config is the zero Config.
func Parse(overrides map[string]string) (Config, error) {
	c := Defaults()
	var errs []error
	var skip map[string]bool
	for _, name := range sortedKeys(overrides) {
		raw := overrides[name]
		d := lookup(name)
		if d == nil {
			errs = append(errs, &InvalidConfigError{Name: name, Value: raw,
				Reason: "Unknown topic config name: " + name, standalone: true})
			continue
		}
		if err := d.set(&c, raw); err != nil {
			if skip == nil {
				skip = make(map[string]bool)
			}
			skip[name] = true
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.validate(skip)...)
	if len(errs) > 0 {
		sortErrors(errs)
		return Config{}, joinErrors(errs)
	}
	return c, nil
}

// javaTrim trims like Java's String.trim: every char <= ' ' at either end.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}
