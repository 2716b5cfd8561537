package remotetier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"time"

	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// GCOptions configure GC.
type GCOptions struct {
	// Prefix limits collection to keys under it (default: the whole bucket,
	// which is a bucket URL's prefix when the bucket comes from objstore.Open).
	Prefix string
	// Grace is the age an unreferenced object must reach before it is
	// deleted (0: DefaultGCGrace). An upload in flight is younger.
	Grace time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	Logger *slog.Logger
}

// GCReport is what GC did.
type GCReport struct {
	Partitions int `json:"partitions"`
	// Deleted are the orphans deleted (dry run: deletable).
	Deleted      []Orphan `json:"deleted"`
	DeletedBytes int64    `json:"deleted_bytes"`
	// Young counts orphans kept because they are within the grace period.
	Young int `json:"young"`
	// Skipped lists partitions left alone because their manifest could not
	// be used (corrupt, newer version): nothing is deleted on its word.
	Skipped []string `json:"skipped"`
}

// GC deletes garbage: objects under partitions' data and sub-manifest
// directories that no root manifest references (directly or through a
// sub-manifest) and that are older than the grace period. They are the
// objects of upload attempts that lost a race or crashed before their
// commit, and those a commit unreferenced but whose deletion did not
// happen; and, in a lineage its topic object records as removed, the
// root manifest too (a commit that was in flight at the removal wrote it
// again). Foreign keys (not of tiered's layout) are never touched. GC and
// bucket verify are the only code that lists. A partition whose manifest
// is corrupt or of a newer version is skipped and reported. Memory grows
// with the partitions and with one partition's objects.
func GC(ctx context.Context, b objstore.Bucket, opts GCOptions) (GCReport, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGCGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	prefix, err := manifest.NormalizePrefix(opts.Prefix)
	if err != nil {
		return GCReport{}, err
	}
	rep := GCReport{Deleted: []Orphan{}, Skipped: []string{}}
	type pid struct {
		prefix, topic string
		partition     int32
		topicID       string // the lineage
	}
	parts := map[pid]bool{}
	listPrefix := ""
	if prefix != "" {
		listPrefix = prefix + "/"
	}
	err = b.List(ctx, listPrefix, func(o objstore.ObjectInfo) error {
		k, err := manifest.ParseKey(o.Key)
		if err != nil || k.Prefix != prefix && !underPrefix(k.Prefix, prefix) {
			return nil
		}
		parts[pid{k.Prefix, k.Topic, k.Partition, k.TopicID}] = true
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("gc: list: %w", err)
	}
	ids := make([]pid, 0, len(parts))
	for id := range parts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].prefix != ids[j].prefix {
			return ids[i].prefix < ids[j].prefix
		}
		if ids[i].topic != ids[j].topic {
			return ids[i].topic < ids[j].topic
		}
		if ids[i].partition != ids[j].partition {
			return ids[i].partition < ids[j].partition
		}
		return ids[i].topicID < ids[j].topicID
	})
	now := opts.Now()
	var errs []error
	// The topic objects read, by prefix and topic: a lineage they record
	// as removed holds only garbage.
	topics := map[[2]string]*manifest.TopicState{}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Partitions++
		store, err := newManifestStore(b, id.prefix)
		if err != nil {
			return rep, err
		}
		tk := [2]string{id.prefix, id.topic}
		ts, seen := topics[tk]
		if !seen {
			// Read once a pass. Unreadable, it only hides removed
			// lineages: the partitions' own orphans are collected as
			// before, and the error says what was not checked.
			if ts, err = remotelog.ReadTopic(ctx, b, id.prefix, id.topic); err != nil {
				errs = append(errs, fmt.Errorf("gc %s: removed lineages not collected: %w", id.topic, err))
				ts = nil
			}
			topics[tk] = ts
		}
		if ts.Removed(id.topicID) {
			// A commit in flight when the lineage was removed wrote its
			// root again: nobody removes it any more, so GC does, root
			// first (then its objects, from this pass on).
			if err := gcRemovedRoot(ctx, b, id.prefix, id.topic, id.topicID, id.partition, now, opts, &rep); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		m, _, err := store.loadID(ctx, id.topic, id.topicID, id.partition, 0)
		var live map[string]bool
		if err == nil {
			var keys []string
			keys, err = m.ReferencedKeys(ctx, store.subs)
			live = make(map[string]bool, len(keys)+1)
			for _, k := range keys {
				live[k] = true
			}
			live[m.Key()] = true
		}
		var cme *manifest.CorruptManifestError
		var uve *manifest.UnsupportedVersionError
		if errors.As(err, &cme) || errors.As(err, &uve) || objstore.IsNotFound(err) {
			// A sub-manifest missing or corrupt: the references are unknown.
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s-%d: %v", id.topic, id.partition, err))
			logger.Warn("gc: partition skipped: its manifest cannot be used", "topic", id.topic, "partition", id.partition, "err", err)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("gc %s-%d: %w", id.topic, id.partition, err))
			continue
		}
		root, err := manifest.ManifestKeyID(id.prefix, id.topic, id.topicID, id.partition)
		if err != nil {
			return rep, err
		}
		dk, err := manifest.DataKeysID(id.prefix, id.topic, id.topicID, id.partition, 0, "00000000")
		if err != nil {
			return rep, err
		}
		dir, dataDir := path.Dir(root), path.Dir(dk.Log)
		for _, scope := range []string{dataDir + "/", dir + "/sub/"} {
			var victims []objstore.ObjectInfo
			err := b.List(ctx, scope, func(o objstore.ObjectInfo) error {
				k, err := manifest.ParseKey(o.Key)
				if err != nil || live[o.Key] || k.Type == manifest.KeyRoot || resealable(m, k) {
					return nil
				}
				if (pid{k.Prefix, k.Topic, k.Partition, k.TopicID}) != id {
					// Another partition's key under this one's folder: a
					// deployment whose prefix lies inside it. Its own
					// manifest decides (as verify checks each key's owner).
					return nil
				}
				if now.Sub(o.LastModified) < opts.Grace {
					rep.Young++
					return nil
				}
				victims = append(victims, o)
				return nil
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("gc %s-%d: list: %w", id.topic, id.partition, err))
				continue
			}
			for _, o := range victims {
				age := now.Sub(o.LastModified)
				if k, _ := manifest.ParseKey(o.Key); k.Type == manifest.KeySub {
					keep, err := reusableSub(ctx, store.subs, o, func(key string) bool { return live[key] })
					if err != nil {
						errs = append(errs, fmt.Errorf("gc %s-%d: %w", id.topic, id.partition, err))
						continue
					}
					if keep {
						continue
					}
				}
				if !opts.DryRun {
					if err := b.Delete(ctx, o.Key); err != nil {
						errs = append(errs, fmt.Errorf("gc: %w", err))
						continue
					}
				}
				rep.Deleted = append(rep.Deleted, Orphan{Key: o.Key, Topic: id.topic, Partition: id.partition, Size: o.Size,
					LastModified: o.LastModified, Age: age, AgeSeconds: age.Seconds(), PastGrace: true})
				rep.DeletedBytes += o.Size
			}
		}
	}
	return rep, errors.Join(errs...)
}

// gcRemovedRoot deletes the root manifest of a partition of a removed
// lineage once it is older than the grace period; a younger one is left
// (a Young orphan) for a later collection.
func gcRemovedRoot(ctx context.Context, b objstore.Bucket, prefix, topic, keyID string, partition int32, now time.Time, opts GCOptions, rep *GCReport) error {
	root, err := manifest.ManifestKeyID(prefix, topic, keyID, partition)
	if err != nil {
		return err
	}
	a, err := b.Attributes(ctx, root)
	if objstore.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gc %s-%d: %w", topic, partition, err)
	}
	age := now.Sub(a.LastModified)
	if age < opts.Grace {
		rep.Young++
		return nil
	}
	if !opts.DryRun {
		if err := b.Delete(ctx, root); err != nil && !objstore.IsNotFound(err) {
			return fmt.Errorf("gc: %w", err)
		}
	}
	rep.Deleted = append(rep.Deleted, Orphan{Key: root, Topic: topic, Partition: partition, Size: a.Size,
		LastModified: a.LastModified, Age: age, AgeSeconds: age.Seconds(), PastGrace: true})
	rep.DeletedBytes += a.Size
	return nil
}

// resealable reports whether k is a sub-manifest over offsets that the
// root m still lists inline. It is left by a commit that wrote it and then
// failed to write the root (a crash, a refused write): the next commit
// seals the same segments into the same object, its key naming its
// content, and finds it there however old it is, so it is not garbage
// while they are inline. Once they leave the inline segments (sealed,
// expired, replaced by compaction) no commit writes that content again.
func resealable(m *manifest.Manifest, k manifest.Key) bool {
	if k.Type != manifest.KeySub {
		return false
	}
	for _, s := range m.Segments {
		if s.BaseOffset <= k.LastOffset && s.LastOffset >= k.BaseOffset {
			return true
		}
	}
	return false
}

// reusableSub reports whether the sub-manifest object o holds only segments
// that the root references (live). A commit may then produce the same
// content again — retention rewriting the sub-manifest that straddles its
// new log start, a replace re-sealing the segments after its range — and,
// finding the object there (its key names its content), reference it
// however old it is. So it is not garbage while they stay committed: a GC
// that read the root before that commit would delete it from under the
// new root. An object already gone, or not a valid sub-manifest (no commit
// names it: its key would not match its content), is not kept.
func reusableSub(ctx context.Context, r manifest.Resolver, o objstore.ObjectInfo, live func(string) bool) (bool, error) {
	data, err := r.Load(ctx, o.Key, o.Size)
	if objstore.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read unreferenced sub-manifest: %w", err)
	}
	sub, err := manifest.DecodeSub(o.Key, data)
	var cme *manifest.CorruptManifestError
	if errors.As(err, &cme) {
		return false, nil
	}
	if err != nil {
		return true, nil // a newer version: what it holds is unknown
	}
	for _, s := range sub.Segments {
		for _, k := range s.Keys() {
			if !live(k) {
				return false, nil
			}
		}
	}
	return true, nil
}

func underPrefix(p, prefix string) bool {
	return prefix == "" || len(p) > len(prefix) && p[:len(prefix)] == prefix && p[len(prefix)] == '/'
}
