package remotetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// DefaultDeletedTopicRetention is how long a superseded lineage (a deleted
// or re-created topic's old data) stays in the bucket
// (sidecar.deleted_topic_retention).
const DefaultDeletedTopicRetention = 24 * time.Hour

// maxTopicCAS bounds the conditional-write retries of one topic object
// update: each retry means another writer changed it in between.
const maxTopicCAS = 16

// UpdateTopicState applies fn to the topic object (nil when there is none)
// and writes the result with a conditional PUT (if-absent, or if-match on
// the ETag read), re-reading and re-applying fn when another writer won.
// fn returns the new state and whether to write it. It returns the state
// stored (or the one read, when fn wrote nothing).
func UpdateTopicState(ctx context.Context, b objstore.Bucket, prefix, topic string,
	fn func(*manifest.TopicState) (*manifest.TopicState, bool, error)) (*manifest.TopicState, error) {
	key, err := manifest.TopicKey(prefix, topic)
	if err != nil {
		return nil, err
	}
	for attempt := range maxTopicCAS {
		if attempt > 0 {
			// Another writer won: back off a random while (growing), so
			// writers racing in lockstep do not keep colliding.
			d := time.Duration(rand.Int64N(int64(attempt)*int64(2*time.Millisecond) + 1))
			if err := ctxsleep.Sleep(ctx, d); err != nil {
				return nil, err
			}
		}
		cur, etag, err := remotelog.ReadTopicVersion(ctx, b, prefix, topic)
		if err != nil {
			return nil, err
		}
		next, write, err := fn(cur)
		if err != nil || !write {
			return cur, err
		}
		data, err := manifest.EncodeTopic(next)
		if err != nil {
			return nil, err
		}
		cond := objstore.IfMatch(etag)
		if cur == nil {
			cond = objstore.IfAbsent()
		}
		_, err = b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), cond)
		if objstore.IsPreconditionFailed(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write topic object %s: %w", key, err)
		}
		return next, nil
	}
	return nil, fmt.Errorf("write topic object %s: %d conditional writes lost to other writers", key, maxTopicCAS)
}

// MarkTopicDeleted records that the broker's metadata deleted topic: from
// then on no reader serves it, and its lineage is removed after the
// deleted-topic retention (RemoveExpiredLineages). A topic the bucket has
// no object for gets one: its name-only lineage of partitions partitions is
// what is deleted.
func MarkTopicDeleted(ctx context.Context, b objstore.Bucket, prefix, topic string, partitions int32, now time.Time) error {
	_, err := UpdateTopicState(ctx, b, prefix, topic, func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
		if s == nil {
			p, err := manifest.NormalizePrefix(prefix)
			if err != nil {
				return nil, false, err
			}
			ms := max(now.UnixMilli(), 1)
			return &manifest.TopicState{Prefix: p, Topic: topic, DeletedMs: ms, UpdatedMs: ms,
				Superseded: []manifest.TopicLineage{{NameOnlyKeys: true, Partitions: max(partitions, 0), SupersededMs: ms, Reason: manifest.ReasonDeleted}}}, true, nil
		}
		next, write := s.MarkDeleted(now.UnixMilli())
		return next, write, nil
	})
	if err != nil {
		return fmt.Errorf("mark topic %s deleted: %w", topic, err)
	}
	return nil
}

// LineageReport is what RemoveExpiredLineages did.
type LineageReport struct {
	Topics         int `json:"topics"`          // topic objects read
	Lineages       int `json:"lineages"`        // lineages removed
	DeletedObjects int `json:"deleted_objects"` // manifests and data objects deleted
	// Reconciled are the topics marked deleted by ReconcileDeleted.
	Reconciled int `json:"reconciled,omitempty"`
}

// LiveTopics is an authoritative view of a Kafka cluster's live topics:
// the whole state of its metadata, as a KRaft metadata log's image holds
// it, not a listing that may leave topics out. Only such a view proves a
// topic deleted by its absence.
type LiveTopics struct {
	// ClusterID is the cluster's ID (meta.properties' cluster.id); a view
	// without one proves nothing.
	ClusterID string
	// MetadataOffset is the offset in the cluster's metadata log of the
	// last record the view applied; -1 when unknown.
	MetadataOffset int64
	// IDs are the live topics' IDs by name (Kafka's string form); "" for a
	// live topic whose ID is not known (never taken for deleted).
	IDs map[string]string

	index     sync.Once
	held      map[string]struct{} // the IDs of IDs
	witnesses []string            // candidates, best first (witnessOrder)
}

// indexed builds, once, the set of topic IDs the view holds and its
// witness candidates: internal topics (__consumer_offsets,
// __transaction_state: created once in a cluster's life and seldom if ever
// deleted) first, by name, then the others by ID (a stable order, so the
// proofs one view records name the same witnesses). One more than a proof
// records, since a proof's own topic is never its witness.
func (v *LiveTopics) indexed() {
	v.index.Do(func() {
		v.held = make(map[string]struct{}, len(v.IDs))
		type cand struct{ name, id string }
		var cs []cand
		for name, id := range v.IDs {
			if manifest.ValidateTopicID(id) != nil {
				continue
			}
			v.held[id] = struct{}{}
			cs = append(cs, cand{name, id})
		}
		slices.SortFunc(cs, func(a, b cand) int {
			ai, bi := strings.HasPrefix(a.name, "__"), strings.HasPrefix(b.name, "__")
			switch {
			case ai && !bi:
				return -1
			case bi && !ai:
				return 1
			case ai:
				return strings.Compare(a.name, b.name)
			}
			return strings.Compare(a.id, b.id)
		})
		for _, c := range cs[:min(len(cs), manifest.MaxProofWitnesses+1)] {
			v.witnesses = append(v.witnesses, c.id)
		}
	})
}

// holds reports whether the view holds topic ID id live, under any name.
func (v *LiveTopics) holds(id string) bool {
	v.indexed()
	_, ok := v.held[id]
	return ok
}

// proof is what the view records on a lineage it holds live: nil when the
// view does not hold topic with id.
func (v *LiveTopics) proof(topic, id string) *manifest.LineageProof {
	if v == nil || v.ClusterID == "" || id == "" || v.IDs[topic] != id {
		return nil
	}
	v.indexed()
	p := &manifest.LineageProof{ClusterID: v.ClusterID, MetadataOffset: v.MetadataOffset}
	for _, w := range v.witnesses {
		if w != id && len(p.Witnesses) < manifest.MaxProofWitnesses {
			p.Witnesses = append(p.Witnesses, w)
		}
	}
	return p
}

// proofHolds is the Observation.ProofHolds of the view's proofs.
func (v *LiveTopics) proofHolds() func(string) bool {
	if v == nil {
		return nil
	}
	return v.holds
}

// Gone reports whether the view proves the current lineage of s deleted:
// its proof names the view's cluster, the view holds one of the proof's
// witnesses (so it is of the same metadata history: not a cluster
// formatted again with the same cluster.id, whose offsets start again at
// 0), and a metadata offset below the view's (the view is later than a
// metadata that held the lineage, so the lineage was deleted, or its name
// re-created, in between), and the view does not hold its topic ID under
// its name (absent, or another ID). A lineage without a proof (written by
// an older release, by tiered's own engine, or by a sidecar that knew no
// cluster ID), of another cluster, without a witness the view holds, or
// recorded from a metadata later than the view (this broker's metadata
// log lags) is never gone.
func (v *LiveTopics) Gone(s *manifest.TopicState) bool {
	if v == nil || v.ClusterID == "" || v.MetadataOffset < 0 || s == nil || s.Current == nil {
		return false
	}
	p, ok := s.Proof()
	if !ok || p.ClusterID != v.ClusterID || p.MetadataOffset < 0 || v.MetadataOffset <= p.MetadataOffset {
		return false
	}
	if !slices.ContainsFunc(p.Witnesses, func(w string) bool { return w != s.Current.TopicID && v.holds(w) }) {
		return false // another history, or every witness deleted too: cannot tell
	}
	id, live := v.IDs[s.Topic]
	if live && id == "" {
		return false // live under an unknown ID: cannot tell
	}
	return !live || id != s.Current.TopicID
}

// ReconcileDeleted marks deleted the topic objects whose current lineage
// the view proves gone (LiveTopics.Gone): deletions no logged record
// reports, made while no sidecar ran and covered by a metadata snapshot
// since. The check is made again inside the conditional write, on the
// object as it is then. It reports whether it marked topic.
func ReconcileDeleted(ctx context.Context, b objstore.Bucket, prefix, topic string, view *LiveTopics, now time.Time, logger *slog.Logger) (bool, error) {
	if view == nil {
		return false, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	marked := false
	var gone string
	_, err := UpdateTopicState(ctx, b, prefix, topic, func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
		marked = false
		if !view.Gone(s) {
			return s, false, nil
		}
		gone = s.Current.TopicID
		next, write := s.MarkDeleted(now.UnixMilli())
		marked = write
		return next, write, nil
	})
	if err != nil {
		return false, fmt.Errorf("mark topic %s deleted: %w", topic, err)
	}
	if marked {
		logger.Warn("topic deleted by the broker while no sidecar ran (its metadata no longer holds the lineage): its remote data is no longer served",
			"topic", topic, "topic_id", gone, "cluster_id", view.ClusterID, "metadata_offset", view.MetadataOffset, "live_topic_id", view.IDs[topic])
	}
	return marked, nil
}

// RemoveExpiredLineages removes every superseded lineage whose retention
// has passed (0: at once; negative: never): for each, RemoveLineage, then
// the lineage leaves the topic object. It lists the topic objects (like GC,
// it is a maintenance pass, not a read path). Safe with several processes
// at once: every step is idempotent.
func RemoveExpiredLineages(ctx context.Context, b objstore.Bucket, prefix string, retention time.Duration, now time.Time, logger *slog.Logger) (LineageReport, error) {
	return removeLineages(ctx, b, prefix, retention, now, logger, nil)
}

// removeLineages is RemoveExpiredLineages that, with a view, first marks
// deleted each topic the view proves gone (ReconcileDeleted), on the same
// listing and reads of the topic objects.
func removeLineages(ctx context.Context, b objstore.Bucket, prefix string, retention time.Duration, now time.Time, logger *slog.Logger, view *LiveTopics) (LineageReport, error) {
	var rep LineageReport
	if retention < 0 && view == nil {
		return rep, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p, err := manifest.NormalizePrefix(prefix)
	if err != nil {
		return rep, err
	}
	lp := "topics/"
	if p != "" {
		lp = p + "/" + lp
	}
	var topics []string
	err = b.List(ctx, lp, func(o objstore.ObjectInfo) error {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, lp), ".json")
		if ok && manifest.ValidateTopic(name) == nil {
			topics = append(topics, name)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("list topic objects: %w", err)
	}
	var errs []error
	for _, topic := range topics {
		rep.Topics++
		s, err := remotelog.ReadTopic(ctx, b, p, topic)
		if err != nil || s == nil {
			errs = append(errs, err)
			continue
		}
		if view.Gone(s) {
			marked, err := ReconcileDeleted(ctx, b, p, topic, view, now, logger)
			if err != nil {
				errs = append(errs, err)
			} else if marked {
				rep.Reconciled++
			}
		}
		if retention < 0 {
			continue
		}
		for _, l := range s.Expired(retention.Milliseconds(), now.UnixMilli()) {
			n, err := RemoveLineage(ctx, b, p, topic, l)
			rep.DeletedObjects += n
			if err != nil {
				errs = append(errs, err)
				continue
			}
			removed := false
			_, err = UpdateTopicState(ctx, b, p, topic, func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
				if s == nil {
					return nil, false, nil
				}
				// Kept as removed, never dropped: a stale log dir of its
				// topic ID must still be refused (ObserveTopic).
				next, ok := s.MarkRemoved(l.KeyID(), now.UnixMilli())
				removed = ok
				return next, ok, nil
			})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !removed {
				continue // another process finished it first
			}
			rep.Lineages++
			logger.Info("removed superseded topic lineage", "topic", topic, "topic_id", l.TopicID, "reason", l.Reason,
				"superseded_ms", l.SupersededMs, "objects", n)
		}
	}
	return rep, errors.Join(errs...)
}

// RemoveLineage deletes one lineage of a topic: for each of its partitions
// the root manifest first (readers stop finding it), then the objects in
// its sub-manifest and data directories (a LIST of the lineage's own
// directories, so nothing of another lineage is touched). Objects already
// gone are not errors. It returns how many objects it deleted.
func RemoveLineage(ctx context.Context, b objstore.Bucket, prefix, topic string, l manifest.TopicLineage) (int, error) {
	prefix, err := manifest.NormalizePrefix(prefix)
	if err != nil {
		return 0, fmt.Errorf("remove lineage %s of %s: %w", l.TopicID, topic, err)
	}
	parts := l.Partitions
	var deleted int
	del := func(key string) error {
		err := b.Delete(ctx, key)
		if err == nil {
			deleted++
		}
		if err != nil && !objstore.IsNotFound(err) {
			return fmt.Errorf("remove lineage %s of %s: %w", l.TopicID, topic, err)
		}
		return nil
	}
	for p := int32(0); ; p++ {
		root, err := manifest.ManifestKeyID(prefix, topic, l.KeyID(), p)
		if err != nil {
			return deleted, err
		}
		if p >= parts {
			// Past the partitions the lineage records: a foreign
			// name-only lineage is superseded with the count of the
			// topic that replaced it, which may have fewer partitions.
			// Its directories are its own: go on while roots exist.
			if _, err := b.Attributes(ctx, root); objstore.IsNotFound(err) {
				break
			} else if err != nil {
				return deleted, fmt.Errorf("remove lineage %s of %s: %w", l.TopicID, topic, err)
			}
		}
		if err := del(root); err != nil {
			return deleted, err
		}
		dk, err := manifest.DataKeysID(prefix, topic, l.KeyID(), p, 0, "00000000")
		if err != nil {
			return deleted, err
		}
		for _, dir := range []string{path.Dir(root) + "/sub/", path.Dir(dk.Log) + "/"} {
			var keys []string
			err := b.List(ctx, dir, func(o objstore.ObjectInfo) error {
				// Only keys of this lineage's directory, never a deeper or
				// foreign one (a deployment whose prefix lies inside it).
				if k, err := manifest.ParseKey(o.Key); err == nil && k.Prefix == prefix && k.TopicID == l.KeyID() && k.Partition == p && k.Topic == topic {
					keys = append(keys, o.Key)
				}
				return nil
			})
			if err != nil {
				return deleted, fmt.Errorf("remove lineage %s of %s: list %s: %w", l.TopicID, topic, dir, err)
			}
			for _, k := range keys {
				if err := del(k); err != nil {
					return deleted, err
				}
			}
		}
	}
	return deleted, nil
}

// resolveLineages decides, topic by topic, which lineage each partition of
// a pass is written to (Partition.keyID), updating the topic objects
// (ObserveTopic: adoption of a name-only lineage on upgrade, a new lineage
// on re-creation). A partition of a superseded lineage, or one without a
// topic ID under a topic that has one, is dropped from the pass with a
// WARN: its data must never mix into the served lineage. A topic object
// that cannot be read or written drops its topic's partitions (the error
// is returned); the other topics go on.
func (u *Uploader) resolveLineages(ctx context.Context, parts []Partition, live *LiveTopics) (kept []Partition, refused int, err error) {
	type group struct {
		topic, id string
	}
	var order []group
	members := map[group][]int{}
	for i, p := range parts {
		g := group{p.Topic, p.TopicID}
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	keep := make([]bool, len(parts))
	var errs []error
	for _, g := range order {
		idx := members[g]
		obs := manifest.Observation{TopicID: g.id, NowMs: u.opts.Now().UnixMilli(), Proof: live.proof(g.topic, g.id), ProofHolds: live.proofHolds()}
		for _, i := range idx {
			obs.Partitions = max(obs.Partitions, parts[i].Partition+1)
			if parts[i].Configs != nil {
				obs.Configs = parts[i].Configs
			}
		}
		var keyID string
		err = u.retry(ctx, func() error {
			return u.observe(ctx, g.topic, parts, idx, obs, &keyID)
		})
		switch {
		case errors.Is(err, manifest.ErrSupersededLineage) || errors.Is(err, manifest.ErrNoTopicID):
			u.logger.Warn("partitions not uploaded: not the topic's current lineage", "topic", g.topic, "topic_id", g.id,
				"partitions", len(idx), "err", err)
			refused += len(idx)
			continue
		case err != nil:
			u.metrics.errors.WithLabelValues(ErrKindManifest).Inc()
			errs = append(errs, fmt.Errorf("topic %s: %w", g.topic, err))
			continue
		}
		for _, i := range idx {
			parts[i].keyID = keyID
			keep[i] = true
		}
	}
	out := parts[:0:0]
	for i, p := range parts {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out, refused, errors.Join(errs...)
}

// nameOnlyLineage reports whether any of the partitions has a manifest in
// the name-only lineage (a bucket written before topic IDs), and whether
// that lineage is foreign: a manifest ending past its partition's high
// watermark holds offsets this incarnation of the topic never had.
func (u *Uploader) nameOnlyLineage(ctx context.Context, topic string, parts []Partition, idx []int) (exists, foreign bool, err error) {
	for _, i := range idx {
		m, _, err := u.store.load(ctx, topic, parts[i].Partition, 0)
		if err != nil {
			return false, false, fmt.Errorf("look for the name-only manifest of %s-%d: %w", topic, parts[i].Partition, err)
		}
		if m.Generation == 0 {
			continue // none
		}
		exists = true
		if m.NextOffset() > parts[i].HighWatermark {
			foreign = true
		}
	}
	return exists, foreign, nil
}

// observe applies one pass's observation of a topic to its topic object
// and sets *keyID to the lineage its partitions are written to.
func (u *Uploader) observe(ctx context.Context, topic string, parts []Partition, idx []int, obs manifest.Observation, keyID *string) error {
	_, err := UpdateTopicState(ctx, u.bkt, u.store.prefix, topic, func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
		o := obs
		if s == nil && o.TopicID != "" {
			exists, foreign, err := u.nameOnlyLineage(ctx, topic, parts, idx)
			if err != nil {
				return nil, false, err
			}
			// A topic ID tiered's own engine gave at creation never wrote
			// the name-only lineage: whatever its offsets, it is another
			// incarnation's (a data dir lost and started anew).
			foreign = foreign || slices.ContainsFunc(idx, func(i int) bool { return parts[i].ownsID })
			o.NameOnlyExists, o.NameOnlyForeign = exists, exists && foreign
		}
		next, k, write, err := manifest.ObserveTopic(u.store.prefix, topic, s, o)
		*keyID = k
		if err == nil && write && s != nil && s.Current != nil && next.Current != nil && s.Current.TopicID != next.Current.TopicID {
			u.logger.Warn("topic re-created: a new lineage starts; the old one is no longer served",
				"topic", topic, "old_topic_id", s.Current.TopicID, "topic_id", next.Current.TopicID)
		} else if err == nil && write && s == nil && o.NameOnlyForeign {
			u.logger.Warn("the bucket's name-only lineage is another incarnation of the topic (it holds offsets the partitions never reached, or the topic ID was given when this data dir created the topic): superseded, not served",
				"topic", topic, "topic_id", o.TopicID)
		} else if err == nil && write && s == nil && o.NameOnlyExists {
			u.logger.Info("topic id adopts the bucket's name-only lineage", "topic", topic, "topic_id", o.TopicID)
		}
		return next, write, err
	})
	return err
}

// retry runs fn with the uploader's retry policy until it succeeds, fails
// permanently or ctx ends.
func (u *Uploader) retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || permanent(err) || attempt >= u.opts.Retry.Attempts || errors.Is(err, manifest.ErrSupersededLineage) || errors.Is(err, manifest.ErrNoTopicID) {
			return err
		}
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return serr
		}
	}
}

// DeletedTopic is a topic the broker's metadata deleted: its name and the
// ID it had (Kafka's string form).
type DeletedTopic struct {
	Name    string
	TopicID string
}

// MarkDeletedTopics marks each deleted topic whose ID is its topic object's
// current one deleted (MarkTopicDeleted's state change); a deletion of an
// ID the object does not serve (an older incarnation, one already marked,
// a topic the bucket never saw an ID for) changes nothing. It returns the
// deletions it is done with (marked, or found not current), which need no
// second look.
func MarkDeletedTopics(ctx context.Context, b objstore.Bucket, prefix string, deleted []DeletedTopic, now time.Time, logger *slog.Logger) (done []DeletedTopic, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, d := range deleted {
		if d.TopicID == "" || manifest.ValidateTopic(d.Name) != nil {
			continue // no ID: nothing names which lineage was deleted
		}
		marked := false
		_, err := UpdateTopicState(ctx, b, prefix, d.Name, func(s *manifest.TopicState) (*manifest.TopicState, bool, error) {
			marked = false
			if s == nil || s.Current == nil || s.Current.TopicID != d.TopicID {
				return s, false, nil
			}
			next, write := s.MarkDeleted(now.UnixMilli())
			marked = write
			return next, write, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("mark topic %s deleted: %w", d.Name, err))
			continue
		}
		if marked {
			logger.Warn("topic deleted by the broker: its remote data is no longer served", "topic", d.Name, "topic_id", d.TopicID)
		}
		done = append(done, d)
	}
	return done, errors.Join(errs...)
}

// applyDeletions runs MarkDeletedTopics on the deletions Options.DeletedTopics
// reports that no earlier pass finished.
func (u *Uploader) applyDeletions(ctx context.Context) error {
	all, err := u.opts.DeletedTopics(ctx)
	if err != nil {
		return fmt.Errorf("read the broker's deleted topics: %w", err)
	}
	u.mu.Lock()
	var todo []DeletedTopic
	for _, d := range all {
		if !u.deletionsDone[d] {
			todo = append(todo, d)
		}
	}
	u.mu.Unlock()
	done, err := MarkDeletedTopics(ctx, u.bkt, u.store.prefix, todo, u.opts.Now(), u.logger)
	u.mu.Lock()
	if u.deletionsDone == nil {
		u.deletionsDone = map[DeletedTopic]bool{}
	}
	for _, d := range done {
		u.deletionsDone[d] = true
	}
	u.mu.Unlock()
	return err
}

// ServedLineage is the lineage of topic that readers serve: keyID for
// manifest.ManifestKeyID ("" = name-only, also for a topic without a topic
// object); ok is false for a deleted topic. Remote retention and other
// per-partition maintenance in the sidecar work on this lineage.
func ServedLineage(ctx context.Context, b objstore.Bucket, prefix, topic string) (keyID string, ok bool, err error) {
	s, err := remotelog.ReadTopic(ctx, b, prefix, topic)
	if err != nil {
		return "", false, err
	}
	keyID, _, ok = s.Serving()
	return keyID, ok, nil
}
