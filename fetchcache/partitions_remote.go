package fetchcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/errgroup"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// Defaults of RemoteCatalogOptions.
const (
	// DefaultRemoteTopicsTTL is how long a listing of the manifests prefix
	// (topic discovery) is reused.
	DefaultRemoteTopicsTTL = 30 * time.Second
	// DefaultRemoteManifestTTL is how long a partition's root manifest is
	// trusted for its offsets before it is re-read; a read past the end
	// re-reads it at once (at most every DefaultRemoteMinRefresh).
	DefaultRemoteManifestTTL = 5 * time.Second
	// DefaultRemoteMinRefresh spaces manifest re-reads of one partition.
	DefaultRemoteMinRefresh = 250 * time.Millisecond
	// DefaultRemoteUnknownTTL is how long a partition without a manifest is
	// remembered as unknown, so unknown names do not cost a GET each.
	DefaultRemoteUnknownTTL = 5 * time.Second
	// DefaultRemoteUnknownEntries bounds how many unknown partitions are
	// remembered; the least recently asked-for is forgotten first, so
	// hostile names cannot reset what legitimate misses are remembered by.
	// With topic names of up to 249 bytes it costs at most about 25 MiB.
	DefaultRemoteUnknownEntries = 65536
	// DefaultRemoteIndexCacheBytes bounds the parsed index objects of all
	// open partitions together (one remotelog.IndexCache the catalog's
	// logs share), so that the per-partition state of a replay of many
	// partitions stays within the fetch process's memory headroom.
	DefaultRemoteIndexCacheBytes = 16 << 20
)

// RemoteCatalogOptions configures NewRemoteCatalog. Zero fields take the
// defaults.
type RemoteCatalogOptions struct {
	// Prefix is the key prefix inside the bucket ("" when the bucket is
	// already scoped to the URL's prefix).
	Prefix      string
	TopicsTTL   time.Duration
	ManifestTTL time.Duration
	MinRefresh  time.Duration
	UnknownTTL  time.Duration
	// UnknownEntries bounds the remembered unknown partitions (an LRU).
	UnknownEntries int
	// Reader tunes every partition's remotelog.RemoteLog; IndexCacheBytes
	// bounds the index cache all of them share (default
	// DefaultRemoteIndexCacheBytes), unless Reader.IndexCache names one.
	Reader remotelog.ReaderOptions
	Now    func() time.Time
}

// RemoteCatalog serves the partitions committed to a bucket (fetch mode)
// through remotelog.RemoteLog: reads follow the manifests and never list.
// Topic discovery (Topics, Kafka Metadata for all topics) lists the
// manifests prefix, cached for TopicsTTL; Partition needs no listing.
type RemoteCatalog struct {
	b      objstore.BucketReader
	prefix string
	o      RemoteCatalogOptions

	mu       sync.Mutex
	topics   []TopicInfo
	listedAt time.Time
	listing  chan struct{} // closed when the running listing finishes
	// parts holds the open partitions by slot: one per partition by name,
	// and one pinned (to the lineage in its key), which a partition pinned
	// to another lineage replaces, so a topic created again many times does
	// not keep an open log for each of its lineages.
	parts   map[remoteKey]*remotePartition
	unknown *simplelru.LRU[remoteKey, time.Time] // until when each is taken as missing
}

// remoteKey names an open partition: by name (Partition), or pinned to
// one lineage of its topic (LineagePartition).
type remoteKey struct {
	topic     string
	partition int32
	pinned    bool
	lineage   string // the pinned lineage's topic ID
}

// slot is k's place in RemoteCatalog.parts: k without its lineage.
func (k remoteKey) slot() remoteKey {
	k.lineage = ""
	return k
}

// NewRemoteCatalog returns a catalog over b, which should be the caching
// bucket (chunkcache.NewCachingBucket) so data reads go through the chunk cache.
func NewRemoteCatalog(b objstore.BucketReader, o RemoteCatalogOptions) (*RemoteCatalog, error) {
	prefix, err := manifest.NormalizePrefix(o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("remote catalog: %w", err)
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	setDur(&o.TopicsTTL, DefaultRemoteTopicsTTL)
	setDur(&o.ManifestTTL, DefaultRemoteManifestTTL)
	setDur(&o.MinRefresh, DefaultRemoteMinRefresh)
	setDur(&o.UnknownTTL, DefaultRemoteUnknownTTL)
	if o.UnknownEntries <= 0 {
		o.UnknownEntries = DefaultRemoteUnknownEntries
	}
	if o.Reader.IndexCacheBytes <= 0 {
		o.Reader.IndexCacheBytes = DefaultRemoteIndexCacheBytes
	}
	if o.Reader.IndexCache == nil {
		o.Reader.IndexCache = remotelog.NewIndexCache(o.Reader.IndexCacheBytes)
	}
	if o.Reader.Topics == nil {
		o.Reader.Topics = remotelog.NewTopicCache(0, 0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	unknown, err := simplelru.NewLRU[remoteKey, time.Time](o.UnknownEntries, nil)
	if err != nil {
		return nil, fmt.Errorf("remote catalog: %w", err)
	}
	return &RemoteCatalog{b: b, prefix: prefix, o: o, parts: map[remoteKey]*remotePartition{}, unknown: unknown}, nil
}

// Topics lists the topics that have at least one root manifest under the
// prefix, from a listing at most TopicsTTL old.
func (c *RemoteCatalog) Topics(ctx context.Context) ([]TopicInfo, error) {
	for {
		c.mu.Lock()
		if c.listing == nil && !c.listedAt.IsZero() && c.o.Now().Sub(c.listedAt) < c.o.TopicsTTL {
			t := c.topics
			c.mu.Unlock()
			return t, nil
		}
		if wait := c.listing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.listing = done
		c.mu.Unlock()

		topics, err := c.list(ctx)
		c.mu.Lock()
		c.listing = nil
		if err == nil {
			c.topics, c.listedAt = topics, c.o.Now()
		}
		c.mu.Unlock()
		close(done)
		return topics, err
	}
}

// list reads the manifests prefix and collects every root manifest's
// topic and partition in the lineage its topic object serves (the
// name-only lineage for a topic without one; none for a deleted topic).
// Keys that do not parse are not ours and are skipped.
func (c *RemoteCatalog) list(ctx context.Context) ([]TopicInfo, error) {
	served, err := c.servedLineages(ctx)
	if err != nil {
		return nil, err
	}
	lp := "manifests/"
	if c.prefix != "" {
		lp = path.Join(c.prefix, "manifests") + "/"
	}
	byTopic := map[string][]int32{}
	err = c.b.List(ctx, lp, func(oi objstore.ObjectInfo) error {
		k, err := manifest.ParseKey(oi.Key)
		if err != nil || k.Type != manifest.KeyRoot || k.Prefix != c.prefix {
			return nil
		}
		if l, ok := served[k.Topic]; ok && (l.deleted || l.keyID != k.TopicID) || !ok && k.TopicID != "" {
			return nil // another lineage, or a deleted topic
		}
		byTopic[k.Topic] = append(byTopic[k.Topic], k.Partition)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list manifests under %q: %w", lp, err)
	}
	out := make([]TopicInfo, 0, len(byTopic))
	for t, ps := range byTopic {
		slices.Sort(ps)
		out = append(out, TopicInfo{Name: t, ID: served[t].topicID, Partitions: slices.Compact(ps)})
	}
	slices.SortFunc(out, func(a, b TopicInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// unlistedTopicID is the current topic ID of a topic the cached listing
// lacks, from its topic object (one GET, shared through the topic cache):
// a listing is reused for TopicsTTL, and a topic first uploaded since is
// served already (Partition reads its manifest). A topic whose object
// serves a lineage with a topic ID is served under it; one without an
// object (no IDs, or never known) or marked deleted is taken as not
// served, as the listing took it.
func (c *RemoteCatalog) unlistedTopicID(ctx context.Context, topic string) (string, bool, error) {
	if manifest.ValidateTopic(topic) != nil {
		return "", false, nil
	}
	_, topicID, err := c.o.Reader.Topics.Resolve(ctx, c.b, c.prefix, topic)
	switch {
	case errors.Is(err, remotelog.ErrTopicDeleted):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return topicID, topicID != "", nil
}

// knownStale reports whether the topic's topic object lists topicID among
// its superseded lineages and serves another (CatalogTopicIDs.KnownStale);
// false for a topic without one, or an ID it does not list.
func (c *RemoteCatalog) knownStale(ctx context.Context, topic, topicID string) (bool, error) {
	if manifest.ValidateTopic(topic) != nil {
		return false, nil
	}
	current, deleted, superseded, err := c.o.Reader.Topics.Superseded(ctx, c.b, c.prefix, topic)
	if err != nil {
		return false, err
	}
	return (deleted || current != topicID) && slices.Contains(superseded, topicID), nil
}

// servedLineage is what a topic object says readers serve.
type servedLineage struct {
	keyID, topicID string
	deleted        bool
}

// servedLineages lists the topic objects and reads each one.
func (c *RemoteCatalog) servedLineages(ctx context.Context) (map[string]servedLineage, error) {
	lp := "topics/"
	if c.prefix != "" {
		lp = path.Join(c.prefix, "topics") + "/"
	}
	var topics []string
	err := c.b.List(ctx, lp, func(oi objstore.ObjectInfo) error {
		if p, t, ok := manifest.ParseTopicKey(oi.Key); ok && p == c.prefix {
			topics = append(topics, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list topic objects under %q: %w", lp, err)
	}
	out := make(map[string]servedLineage, len(topics))
	for _, t := range topics {
		keyID, topicID, err := remotelog.ResolveTopic(ctx, c.b, c.prefix, t)
		switch {
		case errors.Is(err, remotelog.ErrTopicDeleted):
			out[t] = servedLineage{deleted: true}
		case err != nil:
			return nil, err
		default:
			out[t] = servedLineage{keyID: keyID, topicID: topicID}
		}
	}
	return out, nil
}

// Partition opens (once) the partition's remote log by reading its root
// manifest. No manifest is an *UnknownTopicOrPartitionError, remembered
// for UnknownTTL.
func (c *RemoteCatalog) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	return c.partition(ctx, remoteKey{topic: topic, partition: partition}, 0)
}

// LineagePartition is Partition pinned to the lineage of topicID ("" for
// a topic without topic IDs; remotelog.OpenRemoteLogLineage): it serves
// that lineage only while the topic's topic object serves it, and is an
// *UnknownTopicOrPartitionError otherwise. partitions is how many
// partitions the topic has, as its caller knows them (0: unknown): a
// listing of offsets checks their ends alongside (checkEnds) without a
// listing of the bucket. Serve's combined catalog reads
// its local topics' own lineages so: a lineage another data dir makes
// current over the same bucket holds another incarnation's records. That
// answer is remembered for MinRefresh only, not UnknownTTL: the topic's
// own uploader makes its lineage current at its first pass.
func (c *RemoteCatalog) LineagePartition(ctx context.Context, topic string, partition int32, topicID string, partitions int32) (Partition, error) {
	return c.partition(ctx, remoteKey{topic: topic, partition: partition, pinned: true, lineage: topicID}, partitions)
}

func (c *RemoteCatalog) partition(ctx context.Context, k remoteKey, partitions int32) (Partition, error) {
	topic, partition := k.topic, k.partition
	if partition < 0 || manifest.ValidateTopic(topic) != nil {
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	c.mu.Lock()
	if p, ok := c.parts[k.slot()]; ok && p.key == k {
		c.mu.Unlock()
		return p, nil
	}
	if until, ok := c.unknown.Get(k); ok && c.o.Now().Before(until) {
		c.mu.Unlock()
		return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
	}
	c.mu.Unlock()

	var l *remotelog.RemoteLog
	var err error
	if k.pinned {
		l, err = remotelog.OpenRemoteLogLineage(ctx, c.b, c.prefix, topic, partition, k.lineage, c.o.Reader)
	} else {
		l, err = remotelog.OpenRemoteLog(ctx, c.b, c.prefix, topic, partition, c.o.Reader)
	}
	if err != nil {
		var ue *remotelog.UnknownTopicOrPartitionError
		if errors.As(err, &ue) {
			ttl := c.o.UnknownTTL
			if ue.OtherLineage {
				ttl = c.o.MinRefresh
			}
			c.mu.Lock()
			c.unknown.Add(k, c.o.Now().Add(ttl)) // the oldest entry goes when full
			c.mu.Unlock()
			return nil, &UnknownTopicOrPartitionError{Topic: topic, Partition: partition}
		}
		return nil, fmt.Errorf("open remote partition %s-%d: %w", topic, partition, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.parts[k.slot()]; ok && p.key == k { // a concurrent open won
		return p, nil
	}
	c.unknown.Remove(k)
	p := &remotePartition{log: l, c: c, key: k, partitions: partitions, refreshedAt: c.o.Now()}
	c.parts[k.slot()] = p // in place of another lineage's
	return p, nil
}

// remotePartition adapts a *remotelog.RemoteLog to Partition and
// SegmentLister.
type remotePartition struct {
	log *remotelog.RemoteLog
	c   *RemoteCatalog
	key remoteKey // its key (c.parts holds it at key.slot())
	// partitions is how many partitions its topic has, as the opener
	// knew them (LineagePartition; 0: unknown, the listing tells).
	partitions int32

	mu          sync.Mutex // serialises refreshes
	refreshedAt time.Time
	// gone is set when a refresh found the partition unknown (its topic
	// deleted, or its manifest gone): nothing cached is served after it.
	gone atomic.Bool
}

// refresh re-reads the root manifest when it is older than ttl, at most
// every MinRefresh.
func (p *remotePartition) refresh(ctx context.Context, ttl time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.c.o.Now()
	if now.Sub(p.refreshedAt) < max(ttl, p.c.o.MinRefresh) {
		return nil
	}
	if err := p.reread(ctx); err != nil {
		return err
	}
	p.refreshedAt = p.c.o.Now()
	return nil
}

// reread re-reads the manifest (and the topic object). A lineage that
// changed (the topic re-created) makes the next Topics list afresh, so
// Metadata's topic IDs follow the data served.
func (p *remotePartition) reread(ctx context.Context) error {
	before := p.log.TopicID()
	if _, err := p.log.Refresh(ctx); err != nil {
		return p.refreshFailed(err)
	}
	if p.log.TopicID() != before {
		p.c.invalidateTopics()
	}
	return nil
}

// invalidateTopics makes the next Topics call list the bucket.
func (c *RemoteCatalog) invalidateTopics() {
	c.mu.Lock()
	c.listedAt = time.Time{}
	c.mu.Unlock()
}

// refreshFailed maps a refresh's error; an unknown partition is gone: it
// leaves the catalog (a re-created topic is opened afresh) and serves
// nothing more.
func (p *remotePartition) refreshFailed(err error) error {
	err = p.mapErr(err)
	var ue *UnknownTopicOrPartitionError
	if errors.As(err, &ue) {
		p.gone.Store(true)
		p.c.mu.Lock()
		if p.c.parts[p.key.slot()] == p {
			delete(p.c.parts, p.key.slot())
		}
		p.c.mu.Unlock()
		p.c.invalidateTopics()
	}
	return err
}

// checkGone is the error of a partition found gone.
func (p *remotePartition) checkGone() error {
	if p.gone.Load() {
		return &UnknownTopicOrPartitionError{Topic: p.log.Topic(), Partition: p.log.Partition()}
	}
	return nil
}

// forceRefresh re-reads the root manifest now, or, when soon is set,
// unless it was read within MinRefresh; reread says whether it did.
func (p *remotePartition) forceRefresh(ctx context.Context, soon bool) (reread bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if soon && p.c.o.Now().Sub(p.refreshedAt) < p.c.o.MinRefresh {
		return false, nil
	}
	if err := p.reread(ctx); err != nil {
		return false, err
	}
	p.refreshedAt = p.c.o.Now()
	return true, nil
}

func (p *remotePartition) mapErr(err error) error {
	var ue *remotelog.UnknownTopicOrPartitionError
	if errors.As(err, &ue) {
		return &UnknownTopicOrPartitionError{Topic: ue.Topic, Partition: ue.Partition}
	}
	var oe *manifest.OffsetOutOfRangeError
	if errors.As(err, &oe) {
		return &OffsetOutOfRangeError{Offset: oe.Offset, LogStart: oe.Start, LogEnd: oe.Next, Where: WhereBucket}
	}
	return err
}

// Offsets reports the manifest's offsets, re-reading it when older than
// ManifestTTL. The last stable offset is the first offset of the earliest
// transaction open at the end of the committed log (its marker not yet
// uploaded), or the log end. The log end is reported only once the
// final segment's bytes were found to end there (remotelog's CheckEnd,
// once per final segment): a manifest claiming more is corrupt data.
func (p *remotePartition) Offsets(ctx context.Context) (Offsets, error) {
	if err := p.checkGone(); err != nil {
		return Offsets{}, err
	}
	if err := p.refresh(ctx, p.c.o.ManifestTTL); err != nil {
		return Offsets{}, err
	}
	if !p.log.EndChecked() && listingOffsets(ctx) {
		p.c.checkEnds(ctx, p)
	}
	// The offsets come from the manifest whose end was checked, not from
	// one a concurrent refresh may have loaded since.
	m, err := p.log.CheckEnd(ctx)
	if err != nil {
		return Offsets{}, p.mapErr(fmt.Errorf("check the end of %s-%d: %w", p.log.Topic(), p.log.Partition(), err))
	}
	return offsetsOf(m), nil
}

// offsetsOf are the offsets manifest m says: its log start, end and last
// stable offset.
func offsetsOf(m *manifest.Manifest) Offsets {
	return Offsets{LogStart: m.LogStartOffset, LogEnd: m.NextOffset(), LastStable: m.LastStableOffset()}
}

// knownOffsets are the offsets of the manifest last read, without
// re-reading it (a stale log start is never above the real one); false
// once the partition was found gone.
func (p *remotePartition) knownOffsets() (Offsets, bool) {
	m := p.log.Manifest()
	if p.checkGone() != nil || m == nil {
		return Offsets{}, false
	}
	return offsetsOf(m), true
}

// End checks of a topic's partitions run side by side (checkEnds): at most
// endCheckParallel at a time, for at most endCheckPartitions partitions.
const (
	endCheckParallel   = 16
	endCheckPartitions = 256
)

// offsetsListing marks a context whose Offsets calls come from a client
// listing offsets (Kafka ListOffsets), which lists every partition it
// reads, one per request.
type offsetsListing struct{}

// WithOffsetsListing returns ctx marked so that a remote partition's
// Offsets, when its end is not checked yet, checks the ends of its
// topic's other partitions alongside (checkEnds). A Fetch does not mark
// its contexts: a consumer of one partition should not wait for the
// others'.
func WithOffsetsListing(ctx context.Context) context.Context {
	return context.WithValue(ctx, offsetsListing{}, true)
}

func listingOffsets(ctx context.Context) bool {
	v, _ := ctx.Value(offsetsListing{}).(bool)
	return v
}

// checkEnds runs the end check of p (remotelog CheckEnd, one store round
// trip, two when the final segment's tail cannot confirm its end alone)
// side by side with those of the next partitions of its topic (by
// the last topic listing, up to endCheckPartitions, wrapping) whose end is
// not checked yet, and returns when all are done. A client lists the
// offsets of every partition before it reads them, and librdkafka asks one
// partition per request, each waiting for the one before: checked one by
// one, the partitions of a 128-partition topic would cost 256 round trips
// in a row before the first Fetch; side by side they cost about one
// partition's. Only a listing does this (WithOffsetsListing). Errors of
// the other partitions are theirs to report when they are asked for; p's
// own check follows in Offsets.
func (c *RemoteCatalog) checkEnds(ctx context.Context, p *remotePartition) {
	topic, own := p.log.Topic(), p.log.Partition()
	c.mu.Lock()
	var parts []int32
	if !c.listedAt.IsZero() {
		for _, t := range c.topics {
			if t.Name == topic {
				parts = t.Partitions
			}
		}
	}
	c.mu.Unlock()
	if parts == nil && p.partitions > 0 {
		parts = make([]int32, p.partitions)
		for i := range parts {
			parts[i] = int32(i)
		}
	}
	at, _ := slices.BinarySearch(parts, own)
	var g errgroup.Group
	g.SetLimit(endCheckParallel)
	g.Go(func() error {
		_, _ = p.log.CheckEnd(ctx)
		return nil
	})
	for i := 0; i < len(parts) && i < endCheckPartitions; i++ {
		n := parts[(at+i)%len(parts)]
		if n == own {
			continue
		}
		g.Go(func() error {
			sp, err := c.partition(ctx, remoteKey{topic: topic, partition: n, pinned: p.key.pinned, lineage: p.key.lineage}, p.partitions)
			if err != nil {
				return nil
			}
			if rp, ok := sp.(*remotePartition); ok && rp.checkGone() == nil && !rp.log.EndChecked() {
				_, _ = rp.log.CheckEnd(ctx)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// Read serves whole batches through the manifest; an offset past the end
// of the manifest read so far re-reads it once before answering
// OFFSET_OUT_OF_RANGE.
func (p *remotePartition) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	if err := p.checkGone(); err != nil {
		return nil, err
	}
	if offset > p.log.LogEndOffset() {
		if err := p.refresh(ctx, 0); err != nil {
			return nil, err
		}
	}
	res, err := p.log.Read(ctx, offset, maxBytes)
	if err != nil {
		return nil, p.mapErr(err)
	}
	return res.Data, nil
}

// ReadView is Read as the cached chunk memory the batches lie in
// (remotelog.RemoteLog.ReadView), for a response that writes them without
// a copy (SharedReader).
func (p *remotePartition) ReadView(ctx context.Context, offset int64, maxBytes int) (View, error) {
	// As Read: past the manifest's end, re-read it first.
	if err := p.checkGone(); err != nil {
		return View{}, err
	}
	if offset > p.log.LogEndOffset() {
		if err := p.refresh(ctx, 0); err != nil {
			return View{}, err
		}
	}
	v, err := p.log.ReadView(ctx, offset, maxBytes)
	if err != nil {
		return View{}, p.mapErr(err)
	}
	out := View{Parts: v.Parts, Len: v.Len, Next: v.NextOffset}
	if v.Len > 0 {
		out.served = func(kept int, next int64) { p.log.Served(v, kept, next) }
	}
	return out, nil
}

func (p *remotePartition) OffsetForTimestamp(ctx context.Context, ts int64) (int64, int64, bool, error) {
	if err := p.checkGone(); err != nil {
		return 0, 0, false, err
	}
	off, t, found, err := p.log.OffsetForTimestamp(ctx, ts)
	return off, t, found, p.mapErr(err)
}

func (p *remotePartition) AbortedTxns(ctx context.Context, from, to int64) ([]AbortedTxn, error) {
	txns, err := p.log.AbortedTxns(ctx, from, to)
	if err != nil {
		return nil, p.mapErr(err)
	}
	out := make([]AbortedTxn, len(txns))
	for i, t := range txns {
		out[i] = AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset}
	}
	slices.SortStableFunc(out, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, nil
}

// Segments lists the committed segments: the inline ones individually and
// each sealed sub-manifest as one entry spanning its segments (reading
// sub-manifests for a description is not worth their GETs).
func (p *remotePartition) Segments(ctx context.Context) ([]SegmentInfo, error) {
	m := p.log.Manifest()
	out := make([]SegmentInfo, 0, len(m.Sealed)+len(m.Segments))
	for _, s := range m.Sealed {
		out = append(out, SegmentInfo{BaseOffset: s.BaseOffset, NextOffset: s.LastOffset + 1, SizeBytes: s.LogBytes, MaxTimestamp: s.MaxTimestamp, Tier: "remote", SegmentCount: s.Segments})
	}
	for _, s := range m.Segments {
		out = append(out, SegmentInfo{BaseOffset: s.BaseOffset, NextOffset: s.NextOffset(), SizeBytes: s.Size(), MaxTimestamp: s.MaxTimestamp, Tier: "remote"})
	}
	return out, nil
}
