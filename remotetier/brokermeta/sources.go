package brokermeta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/kraft"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
)

// KRaftSource reads the broker's KRaft metadata log (LogDir/__cluster_metadata-0),
// following it (kraft.Reader): each Snapshot applies what was appended since the last.
type KRaftSource struct {
	FS     vfs.FS // nil: the OS filesystem
	LogDir string
	// NodeID is the broker whose own broker-level configs apply over the cluster-wide
	// defaults; -1 uses the cluster-wide ones only.
	NodeID int32

	once   sync.Once
	reader *kraft.Reader
	// dels remembers the topics earlier snapshots had: a metadata snapshot
	// written past a RemoveTopicRecord the reader had not read yet holds
	// state, not history, so the replay from it loses the removal; the
	// topic gone from the image is the deletion then.
	dels deletions
	// Now dates the deletions only seen that way (nil: time.Now).
	Now func() time.Time
}

// Snapshot implements Source.
func (s *KRaftSource) Snapshot(context.Context) (*Snapshot, error) {
	fsys := s.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	dir := filepath.Join(s.LogDir, kraft.MetadataDir)
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", s.LogDir, kraft.ErrNoMetadataLog)
	}
	s.once.Do(func() { s.reader = kraft.NewReader(fsys, dir) })
	var snap *Snapshot
	err := s.reader.Read(func(im *kraft.Image) error {
		var err error
		snap, err = FromImage(im, s.NodeID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if snap.ClusterID, err = ClusterID(fsys, s.LogDir); err != nil {
		return nil, err
	}
	snap.Authoritative = true
	logged := snap.Deleted
	s.dels.observe(snap, clock(s.Now), nil, true)
	seen := snap.Deleted
	snap.Deleted = logged
	for _, d := range seen {
		if !slices.ContainsFunc(logged, func(l DeletedTopic) bool { return l.ID == d.ID }) {
			snap.Deleted = append(snap.Deleted, d)
		}
	}
	return snap, nil
}

// Close implements Source.
func (s *KRaftSource) Close() error { return nil }

// MetaProperties reads the properties of logDir's meta.properties (the file a Kafka broker
// writes in every log dir: cluster.id, node.id or broker.id, directory.id, version). A
// missing file is an error that matches fs.ErrNotExist.
func MetaProperties(fsys vfs.FS, logDir string) (map[string]string, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	path := filepath.Join(logDir, "meta.properties")
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return props, nil
}

// ClusterID reads the cluster.id of logDir's meta.properties: "" when the log dir has no
// meta.properties or it names no cluster.id.
func ClusterID(fsys vfs.FS, logDir string) (string, error) {
	props, err := MetaProperties(fsys, logDir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the cluster id: %w", err)
	}
	return props["cluster.id"], nil
}

// FromImage converts a replayed metadata log into a Snapshot for broker nodeID (-1: the
// cluster-wide broker defaults only).
func FromImage(im *kraft.Image, nodeID int32) (*Snapshot, error) {
	snap := &Snapshot{Origin: OriginKRaft, Topics: map[string]*Topic{}, BrokerDefaults: im.BrokerDefaults(nodeID),
		MetadataOffset: im.NextOffset - 1}
	var errs []error
	for name, t := range im.Topics {
		top := &Topic{Name: name, ID: t.ID, Overrides: copyMap(t.Configs)}
		for _, p := range t.PartitionIDs() {
			pp := t.Partitions[p]
			top.Partitions = append(top.Partitions, Partition{Partition: p, Leader: pp.Leader, LeaderEpoch: pp.LeaderEpoch,
				Replicas: append([]int32(nil), pp.Replicas...)})
		}
		c, err := effective(name, snap.BrokerDefaults, top.Overrides)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		top.Config = c
		snap.Topics[name] = top
	}
	for _, d := range im.Deleted {
		snap.Deleted = append(snap.Deleted, DeletedTopic{Name: d.Name, ID: d.ID, MetadataOffset: d.Offset, DeletedAtMs: d.Timestamp})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return snap, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// deletions remembers the topics a polling source saw, to report the ones that disappear
// or come back with another ID as deleted.
type deletions struct {
	mu      sync.Mutex
	seen    map[string]TopicID
	deleted []DeletedTopic
}

// observe records the live topics of snap, taken at now, and sets snap.Deleted to every
// deletion seen so far (a topic gone since the last snapshot, or whose ID changed:
// re-created), dated now when first seen. A topic in unsure (the source could not tell,
// e.g. a transient error answered for it) is never taken for deleted, nor, unless
// goneIsDeleted, a topic merely gone.
func (d *deletions) observe(snap *Snapshot, now time.Time, unsure map[string]bool, goneIsDeleted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]TopicID{}
	}
	if goneIsDeleted && len(unsure) == 0 && d.otherHistory(snap) {
		// Not one topic ID seen before is live: the cluster's metadata was
		// formatted again (the same cluster.id, new topic IDs) while the
		// source ran, not every topic deleted. Its topics are a new history,
		// of which nothing was deleted (as in TopicState proofs' witnesses).
		clear(d.seen)
	}
	for _, name := range sortedNames(d.seen) {
		old := d.seen[name]
		t, live := snap.Topics[name]
		switch {
		case !live && (unsure[name] || !goneIsDeleted):
			// not known to be deleted: keep its ID, so a re-creation is still seen
		case !live:
			d.deleted = append(d.deleted, DeletedTopic{Name: name, ID: old, MetadataOffset: -1, DeletedAtMs: now.UnixMilli()})
			delete(d.seen, name)
		case !old.IsZero() && !t.ID.IsZero() && t.ID != old:
			d.deleted = append(d.deleted, DeletedTopic{Name: name, ID: old, MetadataOffset: -1, DeletedAtMs: now.UnixMilli()})
		}
	}
	for name, t := range snap.Topics {
		if !t.ID.IsZero() || d.seen[name].IsZero() {
			d.seen[name] = t.ID
		}
	}
	snap.Deleted = append([]DeletedTopic(nil), d.deleted...)
}

// otherHistory reports whether snap holds none of the topic IDs seen before
// while some were seen: topic IDs are random, so such a snapshot is of
// another metadata history. A cluster that deleted every topic at once
// looks the same, and its deletions are then not reported (its remote data
// stays served, which only costs storage).
func (d *deletions) otherHistory(snap *Snapshot) bool {
	ids := map[TopicID]bool{}
	for _, id := range d.seen {
		if !id.IsZero() {
			ids[id] = true
		}
	}
	if len(ids) == 0 {
		return false
	}
	for _, t := range snap.Topics {
		if ids[t.ID] {
			return false
		}
	}
	return true
}

// missing lists the topics seen before that are neither in snap nor unsure.
func (d *deletions) missing(snap *Snapshot, unsure map[string]bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, name := range sortedNames(d.seen) {
		if _, live := snap.Topics[name]; !live && !unsure[name] {
			out = append(out, name)
		}
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	s := &Snapshot{Topics: map[string]*Topic{}}
	for k := range m {
		s.Topics[k] = nil
	}
	return s.Names()
}

// FallbackSource is the broker's view when neither a metadata log nor a bootstrap server is
// available: the partitions in the log dir, topic IDs from partition.metadata, Kafka's
// default configs, leaders unknown (-1). A topic whose ID changes between snapshots was
// re-created: its old ID is reported deleted. A topic whose partitions are gone from the
// log dir is not: a broker removes a partition's directory both when the topic is deleted
// and when the replica moves to other brokers, and the log dir alone cannot tell which.
type FallbackSource struct {
	view *localtier.BrokerView
	dels deletions
	// Now dates the deletions it sees (nil: time.Now).
	Now func() time.Time
}

// NewFallbackSource returns the fallback source over a broker log dir view.
func NewFallbackSource(view *localtier.BrokerView) *FallbackSource {
	return &FallbackSource{view: view}
}

// Snapshot implements Source.
func (s *FallbackSource) Snapshot(ctx context.Context) (*Snapshot, error) {
	parts, err := s.view.Partitions()
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Origin: OriginFallback, Topics: map[string]*Topic{}, MetadataOffset: -1}
	mixed := map[string]bool{}
	for _, bp := range parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id, err := s.view.TopicID(bp.Topic, bp.Partition)
		var unknown *localtier.UnknownTopicOrPartitionError
		if errors.As(err, &unknown) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("topic ID of %s-%d: %w", bp.Topic, bp.Partition, err)
		}
		t := snap.Topics[bp.Topic]
		if t == nil {
			t = &Topic{Name: bp.Topic, Overrides: map[string]string{}, Config: topicconfig.Defaults()}
			snap.Topics[bp.Topic] = t
		}
		switch {
		case id.IsZero() || mixed[bp.Topic]:
		case t.ID.IsZero():
			t.ID = id
		case t.ID != id:
			// Partitions that disagree: one is a stale directory of another
			// incarnation. Which is live cannot be told here, and taking
			// whichever sorts first would report the live ID deleted when
			// the set of partitions changes: the ID is unknown.
			t.ID = TopicID{}
			mixed[bp.Topic] = true
		}
		t.Partitions = append(t.Partitions, Partition{Partition: bp.Partition, Leader: -1, LeaderEpoch: -1})
	}
	for _, t := range snap.Topics {
		sortPartitions(t.Partitions)
	}
	s.dels.observe(snap, clock(s.Now), nil, false)
	return snap, nil
}

// Close implements Source.
func (s *FallbackSource) Close() error { return nil }

// AdminSource asks the cluster: Metadata (v10+, with topic IDs; a fresh request every
// Snapshot, never the client's cache) and DescribeConfigs of every topic (kadm). Deletions
// are the topics that disappear between snapshots or come back with another ID.
type AdminSource struct {
	cl   *kgo.Client
	adm  *kadm.Client
	own  bool
	dels deletions
	// Now dates the deletions it sees (nil: time.Now).
	Now func() time.Time
}

// NewAdminSource returns a source asking the cluster through cl (not closed by Close).
func NewAdminSource(cl *kgo.Client) *AdminSource {
	return &AdminSource{cl: cl, adm: kadm.NewClient(cl)}
}

// DialAdmin connects to bootstrap (a comma-separated host:port list) and checks the
// cluster answers; Close closes the client.
func DialAdmin(ctx context.Context, bootstrap string) (*AdminSource, error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(1), kgo.DialTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("bootstrap server %s: %w", bootstrap, err)
	}
	s := NewAdminSource(cl)
	s.own = true
	if _, err := s.metadata(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("bootstrap server %s: %w", bootstrap, err)
	}
	return s, nil
}

// Close implements Source.
func (s *AdminSource) Close() error {
	if s.own {
		s.cl.Close()
	}
	return nil
}

func (s *AdminSource) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // nil Topics: all topics
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if resp.Version < 10 {
		return nil, fmt.Errorf("metadata: the cluster answered version %d; topic IDs need 10+ (Kafka 2.8+)", resp.Version)
	}
	return resp, nil
}

// Snapshot implements Source.
func (s *AdminSource) Snapshot(ctx context.Context) (*Snapshot, error) {
	resp, err := s.metadata(ctx)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Origin: OriginAdmin, Topics: map[string]*Topic{}, MetadataOffset: -1}
	// Only UNKNOWN_TOPIC_OR_PARTITION says a topic is gone; a topic answered with another
	// error (leader not available, authorization, ...) is left out of this snapshot but
	// never taken for deleted.
	unsure := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			if kerr.ErrorForCode(t.ErrorCode) != kerr.UnknownTopicOrPartition {
				unsure[*t.Topic] = true
			}
			continue
		}
		top := &Topic{Name: *t.Topic, ID: TopicID(t.TopicID), Overrides: map[string]string{}}
		for _, p := range t.Partitions {
			top.Partitions = append(top.Partitions, Partition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: append([]int32(nil), p.Replicas...)})
		}
		sortPartitions(top.Partitions)
		snap.Topics[top.Name] = top
	}
	if len(snap.Topics) > 0 {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rcs, err := s.adm.DescribeTopicConfigs(dctx, snap.Names()...)
		if err != nil {
			return nil, fmt.Errorf("describe topic configs: %w", err)
		}
		var errs []error
		for _, rc := range rcs {
			t := snap.Topics[rc.Name]
			if t == nil {
				continue
			}
			if rc.Err != nil {
				delete(snap.Topics, rc.Name)
				if !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
					unsure[rc.Name] = true // not known to be deleted
				}
				continue
			}
			if err := t.describe(rc.Configs); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	if err := s.confirmGone(ctx, snap, unsure); err != nil {
		return nil, err
	}
	s.dels.observe(snap, clock(s.Now), unsure, true)
	return snap, nil
}

// confirmGone asks again, by name, for every topic seen before and missing from snap: Kafka
// leaves the topics a principal may not describe out of an all-topics Metadata answer, so
// only a topic the cluster answers UNKNOWN_TOPIC_OR_PARTITION for by name is deleted; the
// others go into unsure.
func (s *AdminSource) confirmGone(ctx context.Context, snap *Snapshot, unsure map[string]bool) error {
	gone := s.dels.missing(snap, unsure)
	if len(gone) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, name := range gone {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("metadata of topics gone from the listing: %w", err)
	}
	answered := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		answered[*t.Topic] = true
		if kerr.ErrorForCode(t.ErrorCode) != kerr.UnknownTopicOrPartition {
			unsure[*t.Topic] = true
		}
	}
	for _, name := range gone {
		if !answered[name] {
			unsure[name] = true
		}
	}
	return nil
}

func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

// describe sets t's Overrides (the configs set on the topic) and effective Config from a
// DescribeConfigs answer: the broker's effective value of each topic config, with
// broker-level values reported under broker names (log.retention.ms: kfake does) mapped to
// their topic configs.
func (t *Topic) describe(cs []kadm.Config) error {
	base, broker := map[string]string{}, map[string]string{}
	for _, c := range cs {
		if c.Value == nil {
			continue
		}
		switch {
		case c.Source == kmsg.ConfigSourceDynamicTopicConfig:
			t.Overrides[c.Key] = *c.Value
		case known[c.Key]:
			base[c.Key] = *c.Value
		default:
			broker[c.Key] = *c.Value
		}
	}
	for k, v := range TopicDefaults(broker) {
		base[k] = v
	}
	c, err := effectiveOver(t.Name, base, t.Overrides)
	if err != nil {
		return err
	}
	t.Config = c
	return nil
}

// Options configure Open.
type Options struct {
	FS     vfs.FS // nil: the OS filesystem
	LogDir string // the broker's log dir (sidecar.kafka_log_dir)
	// BootstrapServer, when set, makes the source the cluster's answers (AdminSource).
	BootstrapServer string
	// NodeID is the broker's node.id (its own broker-level configs apply in a KRaft log);
	// -1 when unknown.
	NodeID int32
}

// Open returns the best source available: AdminSource with a bootstrap server (it sees the
// broker's static configs too), else KRaftSource when the log dir holds a metadata log,
// else FallbackSource.
func Open(ctx context.Context, o Options) (Source, error) {
	fsys := o.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	if o.BootstrapServer != "" {
		return DialAdmin(ctx, o.BootstrapServer)
	}
	if fi, err := fsys.Stat(filepath.Join(o.LogDir, kraft.MetadataDir)); err == nil && fi.IsDir() {
		return &KRaftSource{FS: fsys, LogDir: o.LogDir, NodeID: o.NodeID}, nil
	}
	view, err := localtier.OpenBrokerView(fsys, o.LogDir)
	if err != nil {
		return nil, err
	}
	return NewFallbackSource(view), nil
}
