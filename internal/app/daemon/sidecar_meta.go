package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/policy"
)

// sidecarMeta is what the sidecar knows of its broker each pass: one
// brokermeta snapshot, taken when the pass lists partitions (Leads), and
// the broker's node id from meta.properties (-1 when the log dir has none).
//
// Leadership rule: a partition is led by this sidecar when the metadata
// names its leader and that leader is the node id. Then only the leader
// uploads it and applies remote retention over its whole log (remote and
// local segments, Kafka's rule). When leadership cannot be known (no
// meta.properties, or a source without leaders: partition.metadata only),
// every sidecar uploads every partition it holds, and remote retention
// counts the remote segments alone: retention.ms is the same on every
// replica, and retention.bytes over less than the whole log never deletes
// more than Kafka would. Concurrent sidecars stay safe either way: every
// commit is a conditional manifest write, the loser re-reads and plans
// again, and objects are deleted only by the writer whose commit stopped
// referencing them.
type sidecarMeta struct {
	src    brokermeta.Source
	nodeID int32
	// image, when src is not authoritative (a bootstrap server's) and the
	// log dir holds a KRaft metadata log, is read for liveTopics only.
	image brokermeta.Source
	log   *slog.Logger

	mu   sync.Mutex
	snap *brokermeta.Snapshot
}

// leads is the BrokerSource's Leads: it takes the pass's snapshot and
// returns the partitions this broker leads, or nil when that is unknown.
func (m *sidecarMeta) leads(ctx context.Context) (map[checkpoint.TopicPartition]bool, error) {
	snap, err := m.src.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the broker's metadata (%T): %w", m.src, err)
	}
	m.mu.Lock()
	m.snap = snap
	m.mu.Unlock()
	if m.nodeID < 0 {
		return nil, nil
	}
	out := map[checkpoint.TopicPartition]bool{}
	known := false
	for name, t := range snap.Topics {
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				continue
			}
			known = true
			if p.Leader == m.nodeID {
				out[checkpoint.TopicPartition{Topic: name, Partition: p.Partition}] = true
			}
		}
	}
	if !known {
		return nil, nil
	}
	return out, nil
}

// deletedTopics is the uploader's DeletedTopics: the topics the broker's
// metadata deleted, for the uploader to mark in the bucket, from the
// snapshot the last pass listed partitions by (one snapshot a pass: a
// KRaft log dir is re-read, a bootstrap server asked, for each). A pass
// asks for deletions before it lists, so a deletion is marked a pass after
// its snapshot, never before the broker made it.
func (m *sidecarMeta) deletedTopics(ctx context.Context) ([]remotetier.DeletedTopic, error) {
	m.mu.Lock()
	snap := m.snap
	m.mu.Unlock()
	if snap == nil {
		var err error
		if snap, err = m.src.Snapshot(ctx); err != nil {
			return nil, fmt.Errorf("read the broker's metadata (%T): %w", m.src, err)
		}
	}
	out := make([]remotetier.DeletedTopic, 0, len(snap.Deleted))
	for _, d := range snap.Deleted {
		if !d.ID.IsZero() {
			out = append(out, remotetier.DeletedTopic{Name: d.Name, TopicID: d.ID.String()})
		}
	}
	return out, nil
}

// liveTopics is the uploader's LiveTopics: the live topics of the
// snapshot the last pass listed partitions by, when its source is
// authoritative (a KRaft metadata log: the whole state at its offset) and
// knows the cluster ID; with a bootstrap server, those of the log dir's
// KRaft metadata log when it has one; nil otherwise (a bootstrap server's
// listing may leave out topics the principal may not describe, and a
// broker that is starting or lags answers UNKNOWN_TOPIC_OR_PARTITION for
// live topics, with no metadata offset to tell; the log dir's
// partition.metadata cannot tell deleted from moved away). A snapshot
// that failed is no view: the pass's error (with a bootstrap server, a
// WARN: the listing the pass works from did not fail).
func (m *sidecarMeta) liveTopics(ctx context.Context) (*remotetier.LiveTopics, error) {
	m.mu.Lock()
	snap := m.snap
	m.mu.Unlock()
	if m.image != nil {
		var err error
		if snap, err = m.image.Snapshot(ctx); err != nil {
			if m.log != nil {
				m.log.Warn("the broker's KRaft metadata log is unreadable: topics deleted while no sidecar ran are not looked for this pass", "err", err)
			}
			return nil, nil
		}
	}
	if snap == nil {
		var err error
		if snap, err = m.src.Snapshot(ctx); err != nil {
			return nil, fmt.Errorf("read the broker's metadata (%T): %w", m.src, err)
		}
	}
	if !snap.Authoritative || snap.ClusterID == "" || snap.MetadataOffset < 0 {
		return nil, nil
	}
	v := &remotetier.LiveTopics{ClusterID: snap.ClusterID, MetadataOffset: snap.MetadataOffset, IDs: make(map[string]string, len(snap.Topics))}
	for name, t := range snap.Topics {
		if t.ID.IsZero() {
			v.IDs[name] = ""
			continue
		}
		v.IDs[name] = t.ID.String()
	}
	return v, nil
}

// removesLineages reports whether this sidecar removes superseded
// lineages this pass: the one beside the lowest broker id the metadata
// names (as a replica or leader of any partition), so that with a sidecar
// per broker one removes and no object is deleted twice. Without a node id
// or without brokers in the metadata every sidecar does (the deletes are
// idempotent, but may then repeat).
func (m *sidecarMeta) removesLineages() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodeID < 0 || m.snap == nil {
		return true
	}
	lowest := int32(-1)
	for _, t := range m.snap.Topics {
		for _, p := range t.Partitions {
			for _, b := range append([]int32{p.Leader}, p.Replicas...) {
				if b >= 0 && (lowest < 0 || b < lowest) {
					lowest = b
				}
			}
		}
	}
	return lowest < 0 || lowest == m.nodeID
}

// topic is the pass's view of topic, if the metadata has it.
func (m *sidecarMeta) topic(name string) (*brokermeta.Topic, bool) {
	t, _, ok := m.topicOf(name)
	return t, ok
}

// topicOf is topic with whether the snapshot states its cleanup.policy
// (brokermeta.Snapshot.CleanupPolicyStated).
func (m *sidecarMeta) topicOf(name string) (t *brokermeta.Topic, policyStated, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil {
		return nil, false, false
	}
	if t, ok = m.snap.Topic(name); !ok {
		return nil, false, false
	}
	return t, m.snap.CleanupPolicyStated(t), true
}

// retention is the BrokerSource's Retention: the broker's own
// retention.ms and retention.bytes of topic (Kafka's defaults when the
// metadata does not have it; -1, no limit, when its cleanup.policy has no
// delete), the window the upload must beat.
func (m *sidecarMeta) retention(topic string) (ms, bytes int64) {
	if t, ok := m.topic(topic); ok {
		if !t.Config.CleanupPolicy.Delete {
			return -1, -1
		}
		return t.Config.RetentionMs, t.Config.RetentionBytes
	}
	return topicconfig.DefaultRetentionMs, topicconfig.DefaultRetentionBytes
}

// compacted is the BrokerSource's Compacted: whether the metadata gives
// topic a cleanup.policy with compact (false when it does not have it).
// topicID is the BrokerSource's TopicID: the topic's ID in the pass's
// metadata snapshot, when it names the topic with one.
func (m *sidecarMeta) topicID(topic string) (string, bool) {
	t, ok := m.topic(topic)
	if !ok || t.ID.IsZero() {
		return "", false
	}
	return t.ID.String(), true
}

func (m *sidecarMeta) compacted(topic string) bool {
	t, ok := m.topic(topic)
	return ok && t.Config.CleanupPolicy.Compact
}

// remoteRule is the uploader's RemoteRetention: the policy's remote
// retention.ms and retention.bytes for the partition's topic, with the
// topic's cleanup.policy from the metadata, counting the source's
// segments only when this sidecar leads the partition. Topics without a
// remote limit (no rules, or none set) are left alone. Where the metadata
// does not state the cleanup.policy (the topic is not in it, or it assumes
// Kafka's default delete: a KRaft log lacks a static log.cleanup.policy of
// the broker's server.properties), a partition the broker's cleaner has
// cleaned (or that the metadata says is compacted) is taken as compact
// only: its records are the latest of their keys, not deleted by age or
// size. A policy that also deletes then keeps more than it needs to, and
// loses nothing.
func (m *sidecarMeta) remoteRule(pol *policy.Policy) func(remotetier.Partition) (remotetier.RetentionRule, bool) {
	return func(p remotetier.Partition) (remotetier.RetentionRule, bool) {
		d := pol.Decide(p.Topic)
		if !d.Tiered || d.RetentionMs < 0 && d.RetentionBytes < 0 {
			return remotetier.RetentionRule{}, false
		}
		cfg := topicconfig.Defaults()
		t, stated, ok := m.topicOf(p.Topic)
		if ok {
			cfg = t.Config
		}
		if p.Compacted && !stated {
			cfg.CleanupPolicy = topicconfig.Policy{Compact: true}
		}
		cfg.RetentionMs, cfg.RetentionBytes = d.RetentionMs, d.RetentionBytes
		return remotetier.RetentionRule{Config: cfg, CountSource: p.Led}, true
	}
}

// optionalBrokerID is brokerID when the log dir has a meta.properties, -1
// when it has none; a meta.properties that does not name an id is an error.
func optionalBrokerID(dir string) (int32, error) {
	id, err := brokerID(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	return id, err
}
