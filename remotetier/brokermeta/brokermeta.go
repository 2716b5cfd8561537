// Package brokermeta is the seam through which the sidecar reads the Kafka broker's view of
// its topics: names and topic IDs, partitions and their leaders, the effective topic configs
// (the broker's cluster-wide defaults and the topic's overrides over Kafka's defaults:
// cleanup.policy, message.timestamp.type, retention.ms, retention.bytes, segment.bytes, ...)
// and the topics deleted. A Source returns it as a Snapshot, one per call.
//
// Three sources, in the order Open prefers them:
//
//   - AdminSource (sidecar.bootstrap_server): the cluster's Metadata (v10+, topic IDs) and
//     DescribeConfigs through franz-go's kadm. Deletions are the topics that disappear
//     between snapshots and that the cluster, asked by name, answers
//     UNKNOWN_TOPIC_OR_PARTITION for (Kafka leaves topics a principal may not describe out
//     of its listing), or whose ID changes.
//   - KRaftSource: the broker's KRaft metadata log in its log dir (__cluster_metadata-0, read
//     only, localtier/kraft). Deletions are RemoveTopicRecords, with their metadata offsets.
//     Its snapshots are Authoritative (the whole state at their metadata offset) and carry the
//     cluster ID of the log dir's meta.properties: a deletion whose record a metadata snapshot
//     covered while no sidecar ran is found from them (remotetier.LiveTopics).
//     It sees the dynamic configs the metadata log holds, not the broker's static
//     server.properties.
//   - FallbackSource: neither. Topic IDs come from each partition's partition.metadata, the
//     configs are Kafka's defaults, leaders are unknown (-1), and a re-creation is seen as a
//     changed topic ID (the old ID is reported deleted); a topic merely gone from the log
//     dir is not reported (deleted or moved away: the log dir cannot tell).
package brokermeta

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

// TopicID is Kafka's topic ID (localtier.TopicID: Kafka's Uuid string form).
type TopicID = localtier.TopicID

// Origin names the source of a Snapshot.
type Origin string

// Origins.
const (
	OriginKRaft    Origin = "kraft-metadata-log"
	OriginAdmin    Origin = "bootstrap-server"
	OriginFallback Origin = "partition-metadata"
)

// Source returns the broker's view of its topics.
type Source interface {
	// Snapshot reads the current view. Each call reads afresh (a KRaft log dir is re-read,
	// the cluster asked again).
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Close releases the source (an admin client's connections).
	Close() error
}

// Snapshot is the broker's view of its topics at one moment.
type Snapshot struct {
	Origin Origin
	// Topics by name.
	Topics map[string]*Topic
	// Deleted lists the topics deleted (by the broker's metadata, or seen gone or re-created
	// by a source that polls), oldest first. A name may appear several times (deleted,
	// re-created, deleted again), each time with its own ID.
	Deleted []DeletedTopic
	// BrokerDefaults are the broker-level topic defaults the source knows, by broker config
	// name (log.retention.ms, log.cleanup.policy, ...): the KRaft log's cluster-wide and
	// this-broker ConfigRecords. Empty for the other sources (the admin source reports
	// effective topic configs directly).
	BrokerDefaults map[string]string
	// MetadataOffset is the offset of the last metadata record applied (KRaft); -1 otherwise.
	MetadataOffset int64
	// ClusterID is the Kafka cluster's ID (meta.properties' cluster.id in the log dir);
	// "" when unknown.
	ClusterID string
	// Authoritative: Topics is the cluster's whole state at MetadataOffset (a replayed
	// KRaft metadata log), so a topic ID it does not hold under its name is deleted (at
	// MetadataOffset at the latest). Listings that may leave topics out (a bootstrap
	// server's, by what the principal may describe) and log dirs (a partition moved away
	// looks the same as one deleted) are not.
	Authoritative bool
}

// Topic is one live topic.
type Topic struct {
	Name string
	// ID is the topic ID; zero when unknown (a fallback partition without partition.metadata).
	ID TopicID
	// Partitions sorted by partition number.
	Partitions []Partition
	// Overrides are the topic's own configs (Kafka topic config names).
	Overrides map[string]string
	// Config is the effective config: Overrides over BrokerDefaults over Kafka's defaults.
	Config topicconfig.Config
}

// Partition is one partition of a topic.
type Partition struct {
	Partition   int32
	Leader      int32 // -1: none or unknown
	LeaderEpoch int32 // -1: unknown
	Replicas    []int32
}

// DeletedTopic is a topic deleted.
type DeletedTopic struct {
	Name string
	ID   TopicID
	// MetadataOffset is the offset of the RemoveTopicRecord in the metadata log; -1 when the
	// source does not know it (seen gone between two polls).
	MetadataOffset int64
	// DeletedAtMs is when the deletion happened (Unix ms): the RemoveTopicRecord's
	// timestamp, or for a polling source the time of the snapshot that first saw the topic
	// gone (or re-created). sidecar.deleted_topic_retention runs from it.
	DeletedAtMs int64
}

// Topic returns the live topic named name.
func (s *Snapshot) Topic(name string) (*Topic, bool) {
	t, ok := s.Topics[name]
	return t, ok
}

// CleanupPolicyStated reports whether the snapshot states topic t's
// cleanup.policy rather than assuming Kafka's default (delete). A
// bootstrap server's DescribeConfigs gives the broker's effective value; a
// KRaft metadata log only the topic's own override or a broker default set
// at run time (a static log.cleanup.policy in the broker's
// server.properties is not in it); the partition.metadata fallback no
// config at all.
func (s *Snapshot) CleanupPolicyStated(t *Topic) bool {
	switch s.Origin {
	case OriginAdmin:
		return true
	case OriginKRaft:
		_, topic := t.Overrides[topicconfig.CleanupPolicyConfig]
		_, broker := TopicDefaults(s.BrokerDefaults)[topicconfig.CleanupPolicyConfig]
		return topic || broker
	}
	return false
}

// Names returns the live topics' names, sorted.
func (s *Snapshot) Names() []string {
	return slices.Sorted(maps.Keys(s.Topics))
}

// DeletedID reports whether the topic ID id was deleted.
func (s *Snapshot) DeletedID(id TopicID) bool {
	for _, d := range s.Deleted {
		if d.ID == id {
			return true
		}
	}
	return false
}

// Leader returns the leader of topic's partition, or -1 when unknown.
func (s *Snapshot) Leader(topic string, partition int32) int32 {
	t, ok := s.Topics[topic]
	if !ok {
		return -1
	}
	for _, p := range t.Partitions {
		if p.Partition == partition {
			return p.Leader
		}
	}
	return -1
}

// effective layers overrides over the broker-level defaults (broker config names) over
// Kafka's topic defaults. A value that does not parse is an error naming the topic.
func effective(topic string, brokerDefaults, overrides map[string]string) (topicconfig.Config, error) {
	return effectiveOver(topic, TopicDefaults(brokerDefaults), overrides)
}

// effectiveOver layers overrides over base (topic config names) over Kafka's defaults;
// names topicconfig does not know are left out.
func effectiveOver(topic string, base, overrides map[string]string) (topicconfig.Config, error) {
	merged := map[string]string{}
	for k, v := range base {
		if known[k] {
			merged[k] = v
		}
	}
	for k, v := range overrides {
		if known[k] {
			merged[k] = v
		}
	}
	c, err := topicconfig.Parse(merged)
	if err != nil {
		return topicconfig.Config{}, fmt.Errorf("configs of topic %s: %w", topic, err)
	}
	return c, nil
}

// known are the topic config names topicconfig parses; others (min.insync.replicas,
// unclean.leader.election.enable, ...) stay in Overrides only.
var known = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range topicconfig.Names() {
		m[n] = true
	}
	return m
}()

// synonym is one broker config that sets a topic config's broker-wide default.
type synonym struct {
	name string
	mult int64 // to the topic config's unit (hours or minutes to ms); 0 = 1
}

// synonyms are Kafka's ServerTopicConfigSynonyms for the topic configs a broker's metadata
// log can set cluster-wide (dynamic broker configs), in Kafka's priority order: the first one
// set wins.
var synonyms = map[string][]synonym{
	topicconfig.CleanupPolicyConfig:          {{name: "log.cleanup.policy"}},
	topicconfig.CompressionTypeConfig:        {{name: "compression.type"}},
	topicconfig.DeleteRetentionMsConfig:      {{name: "log.cleaner.delete.retention.ms"}},
	topicconfig.FileDeleteDelayMsConfig:      {{name: "log.segment.delete.delay.ms"}},
	topicconfig.IndexIntervalBytesConfig:     {{name: "log.index.interval.bytes"}},
	topicconfig.LocalRetentionBytesConfig:    {{name: "log.local.retention.bytes"}},
	topicconfig.LocalRetentionMsConfig:       {{name: "log.local.retention.ms"}},
	topicconfig.MaxCompactionLagMsConfig:     {{name: "log.cleaner.max.compaction.lag.ms"}},
	topicconfig.MaxMessageBytesConfig:        {{name: "message.max.bytes"}},
	topicconfig.MessageTimestampTypeConfig:   {{name: "log.message.timestamp.type"}},
	topicconfig.MinCleanableDirtyRatioConfig: {{name: "log.cleaner.min.cleanable.ratio"}},
	topicconfig.MinCompactionLagMsConfig:     {{name: "log.cleaner.min.compaction.lag.ms"}},
	topicconfig.RetentionBytesConfig:         {{name: "log.retention.bytes"}},
	topicconfig.RetentionMsConfig:            {{name: "log.retention.ms"}, {name: "log.retention.minutes", mult: 60 * 1000}, {name: "log.retention.hours", mult: 60 * 60 * 1000}},
	topicconfig.SegmentBytesConfig:           {{name: "log.segment.bytes"}},
	topicconfig.SegmentIndexBytesConfig:      {{name: "log.index.size.max.bytes"}},
	topicconfig.SegmentJitterMsConfig:        {{name: "log.roll.jitter.ms"}, {name: "log.roll.jitter.hours", mult: 60 * 60 * 1000}},
	topicconfig.SegmentMsConfig:              {{name: "log.roll.ms"}, {name: "log.roll.hours", mult: 60 * 60 * 1000}},
}

// TopicDefaults maps broker-level configs (broker config names, as a KRaft ConfigRecord of a
// broker resource holds them) to the topic configs they default, by Kafka's synonym
// priority (log.retention.ms over log.retention.minutes over log.retention.hours). A value
// with a unit that does not parse as an integer is passed on unconverted, for
// topicconfig.Parse to reject with Kafka's message.
func TopicDefaults(broker map[string]string) map[string]string {
	out := map[string]string{}
	for topic, syns := range synonyms {
		for _, s := range syns {
			v, ok := broker[s.name]
			if !ok {
				continue
			}
			if s.mult > 1 {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					v = strconv.FormatInt(n*s.mult, 10)
				}
			}
			out[topic] = v
			break
		}
	}
	return out
}

func sortPartitions(ps []Partition) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
}
