package config

import (
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
)

// brokerKind is the Kafka ConfigDef type of a broker config.
type brokerKind uint8

const (
	bkInt    brokerKind = iota // Java int
	bkLong                     // Java long
	bkDouble                   // Java double
	bkBool
	bkList   // parsed by topicconfig (cleanup.policy)
	bkString // parsed by topicconfig (compression.type, message.timestamp.type)
)

func (k brokerKind) String() string {
	switch k {
	case bkInt:
		return "INT"
	case bkLong:
		return "LONG"
	case bkDouble:
		return "DOUBLE"
	case bkBool:
		return "BOOLEAN"
	case bkList:
		return "LIST"
	default:
		return "STRING"
	}
}

// brokerDef is one Kafka broker config tiered reads.
type brokerDef struct {
	name string
	kind brokerKind
	// def is Kafka's default as a string; "" means Kafka's default is null (unset), so a
	// lower-priority synonym applies.
	def string
	// topic is the topic config this is a broker-wide default for (Kafka's
	// ServerTopicConfigSynonyms); "" for a broker-only setting.
	topic string
	// mult converts the value to the topic config's unit (hours or minutes to ms); 0 = 1.
	mult int64
	// Own lower bound, checked here for broker-only configs, for synonyms whose topic config
	// topicconfig does not know, and for synonyms with a unit conversion (before converting).
	hasMin bool
	min    int64
	// positive: a DOUBLE that must be > 0.
	positive bool
}

const (
	msPerHour   = 60 * 60 * 1000
	msPerMinute = 60 * 1000
	maxLong     = "9223372036854775807"
)

// brokerDefs lists the broker configs tiered understands. For a topic config with several
// synonyms the order is Kafka's priority order: the first one set wins (log.retention.ms over
// log.retention.minutes over log.retention.hours).
var brokerDefs = []brokerDef{
	// Broker-wide topic defaults.
	{name: "log.cleanup.policy", kind: bkList, def: "delete", topic: topicconfig.CleanupPolicyConfig},
	{name: "compression.type", kind: bkString, def: topicconfig.CompressionProducer, topic: topicconfig.CompressionTypeConfig},
	{name: "log.cleaner.delete.retention.ms", kind: bkLong, def: "86400000", topic: topicconfig.DeleteRetentionMsConfig},
	{name: "log.segment.delete.delay.ms", kind: bkLong, def: "60000", topic: topicconfig.FileDeleteDelayMsConfig},
	{name: "log.flush.interval.messages", kind: bkLong, def: maxLong, topic: "flush.messages", hasMin: true, min: 1},
	{name: "log.flush.interval.ms", kind: bkLong, topic: "flush.ms", hasMin: true, min: 0},
	{name: "log.flush.scheduler.interval.ms", kind: bkLong, def: maxLong, topic: "flush.ms", hasMin: true, min: 0},
	{name: "log.index.interval.bytes", kind: bkInt, def: "4096", topic: topicconfig.IndexIntervalBytesConfig},
	{name: "log.local.retention.bytes", kind: bkLong, def: "-2", topic: topicconfig.LocalRetentionBytesConfig},
	{name: "log.local.retention.ms", kind: bkLong, def: "-2", topic: topicconfig.LocalRetentionMsConfig},
	{name: "log.cleaner.max.compaction.lag.ms", kind: bkLong, def: maxLong, topic: topicconfig.MaxCompactionLagMsConfig},
	{name: "message.max.bytes", kind: bkInt, def: "1048588", topic: topicconfig.MaxMessageBytesConfig},
	{name: "log.message.timestamp.type", kind: bkString, def: topicconfig.CreateTime, topic: topicconfig.MessageTimestampTypeConfig},
	{name: "log.message.timestamp.before.max.ms", kind: bkLong, def: maxLong, topic: topicconfig.MessageTimestampBeforeMaxMsConfig, hasMin: true, min: 0},
	{name: "log.message.timestamp.after.max.ms", kind: bkLong, def: "3600000", topic: topicconfig.MessageTimestampAfterMaxMsConfig, hasMin: true, min: 0},
	{name: "log.cleaner.min.cleanable.ratio", kind: bkDouble, def: "0.5", topic: topicconfig.MinCleanableDirtyRatioConfig},
	{name: "log.cleaner.min.compaction.lag.ms", kind: bkLong, def: "0", topic: topicconfig.MinCompactionLagMsConfig},
	{name: "log.retention.bytes", kind: bkLong, def: "-1", topic: topicconfig.RetentionBytesConfig},
	{name: "log.retention.ms", kind: bkLong, topic: topicconfig.RetentionMsConfig},
	{name: "log.retention.minutes", kind: bkInt, topic: topicconfig.RetentionMsConfig, mult: msPerMinute},
	{name: "log.retention.hours", kind: bkInt, def: "168", topic: topicconfig.RetentionMsConfig, mult: msPerHour},
	{name: "log.segment.bytes", kind: bkInt, def: "1073741824", topic: topicconfig.SegmentBytesConfig},
	{name: "log.index.size.max.bytes", kind: bkInt, def: "10485760", topic: topicconfig.SegmentIndexBytesConfig},
	{name: "log.roll.jitter.ms", kind: bkLong, topic: topicconfig.SegmentJitterMsConfig},
	{name: "log.roll.jitter.hours", kind: bkInt, def: "0", topic: topicconfig.SegmentJitterMsConfig, mult: msPerHour, hasMin: true, min: 0},
	{name: "log.roll.ms", kind: bkLong, topic: topicconfig.SegmentMsConfig},
	{name: "log.roll.hours", kind: bkInt, def: "168", topic: topicconfig.SegmentMsConfig, mult: msPerHour, hasMin: true, min: 1},

	// Broker-only settings.
	{name: "auto.create.topics.enable", kind: bkBool, def: "true"},
	{name: "num.partitions", kind: bkInt, def: "1", hasMin: true, min: 1},
	{name: "log.cleaner.enable", kind: bkBool, def: "true"},
	{name: "log.cleaner.threads", kind: bkInt, def: "1", hasMin: true, min: 0},
	{name: "log.cleaner.dedupe.buffer.size", kind: bkLong, def: "134217728", hasMin: true, min: 1},
	{name: "log.cleaner.io.max.bytes.per.second", kind: bkDouble, def: "1.7976931348623157E308", positive: true},
	{name: "log.cleaner.backoff.ms", kind: bkLong, def: "15000", hasMin: true, min: 0},
	{name: "log.retention.check.interval.ms", kind: bkLong, def: "300000", hasMin: true, min: 1},
}

var brokerByName = func() map[string]*brokerDef {
	m := make(map[string]*brokerDef, len(brokerDefs))
	for i := range brokerDefs {
		m[brokerDefs[i].name] = &brokerDefs[i]
	}
	return m
}()

// BrokerConfigNames lists the Kafka broker config names the broker section accepts, sorted.
func BrokerConfigNames() []string {
	out := make([]string, 0, len(brokerDefs))
	for _, d := range brokerDefs {
		out = append(out, d.name)
	}
	sort.Strings(out)
	return out
}

// BrokerSynonyms returns the broker configs that set topic's broker-wide default, in Kafka's
// priority order (the first one set wins), or nil when the topic config has none.
func BrokerSynonyms(topic string) []string {
	var out []string
	for _, d := range brokerDefs {
		if d.topic == topic {
			out = append(out, d.name)
		}
	}
	return out
}

// topicKnown reports whether topicconfig parses the topic config name.
func topicKnown(name string) bool {
	return slices.Contains(topicconfig.Names(), name) || name == topicconfig.InternalSegmentBytesConfig
}

// parseBroker checks raw against d's type and own bounds and returns the value in the
// unit of d's topic config (converted from hours/minutes), trimmed as Kafka trims. Messages use
// Kafka's wording.
func (d *brokerDef) parse(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	bad := func(reason string) (string, error) {
		return "", errors.New("Invalid value " + raw + " for configuration " + d.name + ": " + reason)
	}
	ownBounds := d.topic == "" || d.mult != 0 || !topicKnown(d.topic)
	switch d.kind {
	case bkInt, bkLong:
		bits := 64
		if d.kind == bkInt {
			bits = 32
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad("Not a number of type " + d.kind.String())
		}
		if ownBounds && d.hasMin && n < d.min {
			return bad("Value must be at least " + strconv.FormatInt(d.min, 10))
		}
		if d.mult != 0 {
			n = saturatingMul(n, d.mult)
			if d.topic == topicconfig.RetentionMsConfig && n < 0 {
				n = -1 // KafkaConfig.logRetentionTimeMillis: any negative means unlimited
			}
		}
		return strconv.FormatInt(n, 10), nil
	case bkDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return bad("Not a number of type DOUBLE")
		}
		if ownBounds && d.positive && !(f > 0) {
			return bad("Value must be greater than 0")
		}
		return v, nil
	case bkBool:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return bad("Expected value to be either true or false")
		}
		return strings.ToLower(v), nil
	default:
		return v, nil // topicconfig.Parse checks lists and enumerations
	}
}

func saturatingMul(n, m int64) int64 {
	switch {
	case n > 0 && n > math.MaxInt64/m:
		return math.MaxInt64
	case n < 0 && n < math.MinInt64/m:
		return math.MinInt64
	}
	return n * m
}

// brokerValue is a parsed broker key.
type brokerValue struct {
	key   string // broker config name
	value string // in the topic config's unit
}

// resolveBroker parses every broker key. It returns the winning synonym per topic config, the
// parsed broker-only values, and one problem per bad key (unknown name, type, own bounds),
// each against its key path.
func (c *Config) resolveBroker() (topics map[string]brokerValue, only map[string]string, problems []*FieldError) {
	topics = map[string]brokerValue{}
	only = map[string]string{}
	parsed := map[string]string{}
	for _, key := range sortedKeys(c.Broker) {
		d := brokerByName[key]
		if d == nil {
			problems = append(problems, c.problem("broker."+key, "unknown broker config name "+strconv.Quote(key)+" (known: "+strings.Join(BrokerConfigNames(), ", ")+")"))
			continue
		}
		v, err := d.parse(c.Broker[key])
		if err != nil {
			problems = append(problems, c.problem("broker."+key, err.Error()))
			continue
		}
		parsed[key] = v
	}
	for _, d := range brokerDefs {
		v, ok := parsed[d.name]
		if !ok {
			continue
		}
		if d.topic == "" {
			only[d.name] = v
			continue
		}
		if _, done := topics[d.topic]; !done {
			topics[d.topic] = brokerValue{key: d.name, value: v}
		}
	}
	return topics, only, problems
}

// brokerProblems validates the broker section: every key, then the topic defaults together
// through topicconfig.Parse, each problem reported against the broker key it came from.
func (c *Config) brokerProblems() []*FieldError {
	topics, _, problems := c.resolveBroker()
	known := map[string]string{}
	keyOf := map[string]string{}
	for topic, bv := range topics {
		if topicKnown(topic) {
			known[topic] = bv.value
			keyOf[topic] = bv.key
		}
	}
	if _, err := topicconfig.Parse(known); err != nil {
		for _, e := range unjoin(err) {
			path, msg := "broker", e.Error()
			var ice *topicconfig.InvalidConfigError
			if errors.As(e, &ice) {
				if key, ok := keyOf[ice.Name]; ok {
					path = "broker." + key
					if key != ice.Name {
						msg = "as the default of topic config " + ice.Name + ": " + msg
					}
				}
			}
			problems = append(problems, c.problem(path, msg))
		}
	}
	return problems
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TopicDefaults returns the broker-wide topic defaults the broker section sets, by topic
// config name (log.retention.hours: 72 gives retention.ms: 259200000), for topicconfig to
// layer under a topic's overrides. A key counts when a layer above the built-in defaults set
// it or its value differs from Kafka's default (so a key set by hand on a Config counts too);
// Kafka's own defaults are topicconfig.Defaults already. Only topic configs topicconfig knows
// are listed. When synonyms compete the first in Kafka's order wins. Invalid keys are skipped;
// call Validate first.
func (c *Config) TopicDefaults() map[string]string {
	topics, _, _ := c.resolveBroker()
	out := map[string]string{}
	for topic, bv := range topics {
		if !topicKnown(topic) {
			continue
		}
		if c.Source("broker."+bv.key) == SourceDefault && c.Broker[bv.key] == brokerByName[bv.key].def {
			continue
		}
		out[topic] = bv.value
	}
	return out
}

// BrokerSettings are the typed broker-only settings.
type BrokerSettings struct {
	// AutoCreateTopics (auto.create.topics.enable, default true): producing to a missing
	// topic creates it.
	AutoCreateTopics bool
	// NumPartitions (num.partitions, default 1): partitions of an auto-created topic.
	NumPartitions int32
	// CleanerEnable (log.cleaner.enable, default true): run the log cleaner.
	CleanerEnable bool
	// CleanerThreads (log.cleaner.threads, default 1).
	CleanerThreads int
	// CleanerDedupeBufferSize (log.cleaner.dedupe.buffer.size, default 128 MiB): offset map
	// memory across all cleaner threads.
	CleanerDedupeBufferSize int64
	// CleanerIOMaxBytesPerSecond (log.cleaner.io.max.bytes.per.second, default unlimited):
	// cleaner read+write throttle.
	CleanerIOMaxBytesPerSecond float64
	// CleanerBackoff (log.cleaner.backoff.ms, default 15s): sleep when nothing is cleanable.
	CleanerBackoff time.Duration
	// RetentionCheckInterval (log.retention.check.interval.ms, default 5m): retention loop
	// period.
	RetentionCheckInterval time.Duration
	// FlushMessages is the broker-wide flush.messages (log.flush.interval.messages, default
	// Long.MAX_VALUE = never by count).
	FlushMessages int64
	// FlushMs is the broker-wide flush.ms (log.flush.interval.ms, else
	// log.flush.scheduler.interval.ms; default Long.MAX_VALUE = never by time).
	FlushMs int64
}

// BrokerSettings returns the typed broker-only settings, Kafka's default standing in for an
// unset key. It fails when a key is invalid (Validate reports the same problems).
func (c *Config) BrokerSettings() (BrokerSettings, error) {
	topics, only, problems := c.resolveBroker()
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = p
		}
		return BrokerSettings{}, errors.Join(errs...)
	}
	get := func(name string) string {
		if v, ok := only[name]; ok {
			return v
		}
		return brokerByName[name].def
	}
	i64 := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	ms := func(s string) time.Duration {
		n := i64(s)
		if n > math.MaxInt64/int64(time.Millisecond) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(n) * time.Millisecond
	}
	topicVal := func(topic string) string {
		if bv, ok := topics[topic]; ok {
			return bv.value
		}
		for _, d := range brokerDefs {
			if d.topic == topic && d.def != "" {
				return d.def
			}
		}
		return ""
	}
	rate, _ := strconv.ParseFloat(get("log.cleaner.io.max.bytes.per.second"), 64)
	return BrokerSettings{
		AutoCreateTopics:           get("auto.create.topics.enable") == "true",
		NumPartitions:              int32(i64(get("num.partitions"))),
		CleanerEnable:              get("log.cleaner.enable") == "true",
		CleanerThreads:             int(i64(get("log.cleaner.threads"))),
		CleanerDedupeBufferSize:    i64(get("log.cleaner.dedupe.buffer.size")),
		CleanerIOMaxBytesPerSecond: rate,
		CleanerBackoff:             ms(get("log.cleaner.backoff.ms")),
		RetentionCheckInterval:     ms(get("log.retention.check.interval.ms")),
		FlushMessages:              i64(topicVal("flush.messages")),
		FlushMs:                    i64(topicVal("flush.ms")),
	}, nil
}

// Layer sources of LayeredEntry.Source.
const (
	LayerDefault  = "default"  // Kafka's topic default
	LayerBroker   = "broker"   // a broker-wide default from the broker section
	LayerOverride = "override" // the topic's own override
)

// LayeredEntry is one topic config with its effective value and the layer it came from.
type LayeredEntry struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // LayerDefault, LayerBroker or LayerOverride
}

// LayerTopicConfig returns the effective configuration of a topic: Kafka's defaults, then
// brokerDefaults (TopicDefaults), then the topic's overrides, validated together.
func LayerTopicConfig(brokerDefaults, overrides map[string]string) (topicconfig.Config, error) {
	return topicconfig.Parse(mergeLayers(brokerDefaults, overrides))
}

// DescribeLayers lists every topic config of a topic like topicconfig.Describe, saying for each
// whether the value is Kafka's default, the broker-wide default or the topic's override.
func DescribeLayers(brokerDefaults, overrides map[string]string) ([]LayeredEntry, error) {
	entries, err := topicconfig.Describe(mergeLayers(brokerDefaults, overrides))
	if err != nil {
		return nil, err
	}
	out := make([]LayeredEntry, len(entries))
	for i, e := range entries {
		src := LayerDefault
		if _, ok := overrides[e.Name]; ok {
			src = LayerOverride
		} else if _, ok := brokerDefaults[e.Name]; ok {
			src = LayerBroker
		}
		out[i] = LayeredEntry{Name: e.Name, Value: e.Value, Source: src}
	}
	return out, nil
}

func mergeLayers(brokerDefaults, overrides map[string]string) map[string]string {
	m := make(map[string]string, len(brokerDefaults)+len(overrides))
	maps.Copy(m, brokerDefaults)
	maps.Copy(m, overrides)
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
