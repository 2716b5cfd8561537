package remotetier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

// DefaultGCGrace is how old an object no manifest references must be before
// garbage collection deletes it, and before bucket verify counts it as a
// failure: long enough that an upload in flight (data written, manifest not
// yet committed) is never taken for garbage.
const DefaultGCGrace = time.Hour

// DefaultVerifyConcurrency is how many objects verify checksums at once.
const DefaultVerifyConcurrency = 4

// maxForeignListed caps the foreign keys a report names (all are counted).
const maxForeignListed = 100

// ProblemKind classifies what verify found wrong.
type ProblemKind string

// Problem kinds. Every one of them fails the check.
const (
	// ProblemMissing: a manifest references an object that does not exist.
	ProblemMissing ProblemKind = "missing"
	// ProblemSize: the object's size differs from the manifest's.
	ProblemSize ProblemKind = "size_mismatch"
	// ProblemChecksum: the object's checksum differs from the manifest's.
	ProblemChecksum ProblemKind = "checksum_mismatch"
	// ProblemCorruptManifest: a root or sub-manifest fails validation or
	// does not match its reference.
	ProblemCorruptManifest ProblemKind = "corrupt_manifest"
	// ProblemUnsupportedVersion: a manifest written by a newer tiered.
	ProblemUnsupportedVersion ProblemKind = "unsupported_version"
	// ProblemLog: a segment's .log does not hold what its manifest entry
	// says: a batch fails its framing, CRC or header checks, its offsets
	// fall outside the segment or do not follow the batch before, the
	// first or last offset or the record count differ from the manifest's.
	ProblemLog ProblemKind = "log_mismatch"
)

// VerifyOptions configure VerifyBucket.
type VerifyOptions struct {
	// Grace is the age from which an orphan fails the check (see
	// DefaultGCGrace). It is used as given: zero fails every orphan.
	Grace time.Duration
	// Now is the clock orphan ages are measured with (default time.Now).
	Now func() time.Time
	// Concurrency is how many objects are checksummed at once (default
	// DefaultVerifyConcurrency).
	Concurrency int
}

// DefaultVerifyOptions returns options with the garbage collector's grace
// period.
func DefaultVerifyOptions() VerifyOptions {
	return VerifyOptions{Grace: DefaultGCGrace}
}

// VerifyReport is what VerifyBucket found under the bucket's scope.
type VerifyReport struct {
	Grace      time.Duration       `json:"-"`
	Partitions []VerifiedPartition `json:"partitions"`
	// Objects and Bytes count the referenced objects checked and the
	// bytes checksummed.
	Objects  int             `json:"objects"`
	Bytes    int64           `json:"bytes"`
	Problems []VerifyProblem `json:"problems"`
	// Orphans are objects of a partition's directories that no manifest
	// references: uploads in flight or not yet collected. Only those past
	// the grace period fail the check.
	Orphans []Orphan `json:"orphans"`
	// Foreign are keys (at most 100 named, all counted) that are not of
	// tiered's layout. They are reported, never a failure, never deleted.
	Foreign      []string `json:"foreign"`
	ForeignCount int      `json:"foreign_count"`
}

// VerifiedPartition summarises one partition found under the scope.
type VerifiedPartition struct {
	Prefix     string `json:"prefix"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	TopicID    string `json:"topic_id,omitempty"` // the lineage; "" = name-only
	HasRoot    bool   `json:"has_manifest"`
	Generation int64  `json:"generation"`
	Segments   int    `json:"segments"`
	SubCount   int    `json:"sub_manifests"`
	// Incomplete is set when a manifest could not be read, so its
	// references, and therefore its orphans, are unknown.
	Incomplete bool `json:"incomplete"`
}

// VerifyProblem is one failed check.
type VerifyProblem struct {
	Kind      ProblemKind `json:"kind"`
	Key       string      `json:"key"`
	Topic     string      `json:"topic"`
	Partition int32       `json:"partition"`
	Detail    string      `json:"detail"`
}

func (p VerifyProblem) String() string {
	return fmt.Sprintf("%s: %s (%s-%d): %s", p.Kind, p.Key, p.Topic, p.Partition, p.Detail)
}

// Orphan is an object no manifest references.
type Orphan struct {
	Key          string        `json:"key"`
	Topic        string        `json:"topic"`
	Partition    int32         `json:"partition"`
	Size         int64         `json:"size"`
	LastModified time.Time     `json:"last_modified"`
	Age          time.Duration `json:"-"`
	AgeSeconds   float64       `json:"age_seconds"`
	PastGrace    bool          `json:"past_grace"`
}

// OK reports whether the check passed: no problem, and no orphan older than
// the grace period.
func (r *VerifyReport) OK() bool {
	if len(r.Problems) > 0 {
		return false
	}
	for _, o := range r.Orphans {
		if o.PastGrace {
			return false
		}
	}
	return true
}

type partitionID struct {
	prefix, topic string
	partition     int32
	topicID       string // the lineage
}

// VerifyBucket checks every partition under b (the whole scope of b, which
// is a bucket URL's prefix when b comes from objstore.Open, including
// partitions written through a longer prefix): each root
// manifest and sealed sub-manifest decodes and matches its reference; every
// object a manifest references exists with the recorded size and checksum
// (streamed through a digest, never held in memory); every other object of
// a partition's directories is an orphan, failing the check only when older
// than opts.Grace. This is one of the two places that LIST (with garbage
// collection). Memory grows with the objects of one partition, not of the
// bucket. Errors reaching the store are returned; what is wrong with the
// data is in the report.
func VerifyBucket(ctx context.Context, b objstore.BucketReader, opts VerifyOptions) (*VerifyReport, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultVerifyConcurrency
	}
	rep := &VerifyReport{Grace: opts.Grace, Problems: []VerifyProblem{}, Orphans: []Orphan{}, Foreign: []string{}, Partitions: []VerifiedPartition{}}

	// Pass 1: which partitions exist, and which keys are foreign.
	parts := map[partitionID]bool{} // → has a root manifest
	err := b.List(ctx, "", func(o objstore.ObjectInfo) error {
		k, err := manifest.ParseKey(o.Key)
		if _, _, ok := manifest.ParseTopicKey(o.Key); err != nil && ok {
			return nil // a topic object: not a partition's
		}
		if err != nil {
			rep.ForeignCount++
			if len(rep.Foreign) < maxForeignListed {
				rep.Foreign = append(rep.Foreign, o.Key)
			}
			return nil
		}
		id := partitionID{k.Prefix, k.Topic, k.Partition, k.TopicID}
		parts[id] = parts[id] || k.Type == manifest.KeyRoot
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list bucket: %w", err)
	}
	ids := make([]partitionID, 0, len(parts))
	for id := range parts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, c := ids[i], ids[j]
		if a.prefix != c.prefix {
			return a.prefix < c.prefix
		}
		if a.topic != c.topic {
			return a.topic < c.topic
		}
		if a.partition != c.partition {
			return a.partition < c.partition
		}
		return a.topicID < c.topicID
	})

	// Pass 2: one partition at a time.
	v := &verifier{b: b, opts: opts, rep: rep}
	for _, id := range ids {
		if err := v.partition(ctx, id, parts[id]); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

type verifier struct {
	b    objstore.BucketReader
	opts VerifyOptions

	mu  sync.Mutex // guards rep during the checksum fan-out
	rep *VerifyReport
}

func (v *verifier) problem(id partitionID, kind ProblemKind, key, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Problems = append(v.rep.Problems, VerifyProblem{Kind: kind, Key: key, Topic: id.topic, Partition: id.partition, Detail: fmt.Sprintf(format, args...)})
}

// manifestProblem records a manifest that cannot be used, or returns err
// when it is not about the manifest's content.
func (v *verifier) manifestProblem(id partitionID, key string, err error) error {
	var cm *manifest.CorruptManifestError
	var uv *manifest.UnsupportedVersionError
	switch {
	case errors.As(err, &uv):
		v.problem(id, ProblemUnsupportedVersion, key, "%v", err)
	case errors.As(err, &cm):
		v.problem(id, ProblemCorruptManifest, key, "%s", cm.Reason)
	case objstore.IsNotFound(err):
		v.problem(id, ProblemMissing, key, "sub-manifest referenced by the root does not exist")
	default:
		return err
	}
	return nil
}

// loadRoot reads the root manifest at key (under id.prefix of the bucket
// verified). Keys in a manifest are relative to the bucket URL its writer
// used: a manifest written through s3://b/team-a names "data/...", one
// written with an explicit prefix on s3://b names "team-a/data/...". When
// the scope verified is above the writer's, the first kind is decoded
// relative to id.prefix; base is what turns its keys into keys of v.b.
func (v *verifier) loadRoot(ctx context.Context, id partitionID, key string) (m *manifest.Manifest, base string, err error) {
	rc, err := v.b.Get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	data, err := manifest.ReadLimited(key, rc)
	if err != nil {
		return nil, "", err
	}
	m, err = manifest.DecodeRoot(key, data)
	if err == nil || id.prefix == "" {
		return m, "", err
	}
	rel, _ := manifest.ManifestKeyID("", id.topic, id.topicID, id.partition)
	if mr, rerr := manifest.DecodeRoot(rel, data); rerr == nil {
		return mr, id.prefix + "/", nil
	}
	return nil, "", err
}

func (v *verifier) partition(ctx context.Context, id partitionID, hasRoot bool) error {
	pr := VerifiedPartition{Prefix: id.prefix, Topic: id.topic, Partition: id.partition, TopicID: id.topicID, HasRoot: hasRoot}
	rootKey, err := manifest.ManifestKeyID(id.prefix, id.topic, id.topicID, id.partition)
	if err != nil {
		return err
	}
	keys, err := manifest.DataKeysID(id.prefix, id.topic, id.topicID, id.partition, 0, "00000000")
	if err != nil {
		return err
	}
	dirs := []string{path.Dir(keys.Log) + "/", path.Dir(rootKey) + "/"}

	// Referenced objects: key → what the manifest recorded. Sub-manifests
	// are checked by LoadSub (size and SHA-256) as they are loaded.
	refs := map[string]objectRef{}
	checked := map[string]bool{}
	var root *manifest.Manifest // the root read, if any (resealable)
	var rootBase string         // what turns root's keys into keys of v.b
	if hasRoot {
		m, base, err := v.loadRoot(ctx, id, rootKey)
		switch {
		case objstore.IsNotFound(err):
			// Deleted since the listing: every object is an orphan.
			pr.HasRoot = false
		case err != nil:
			if err := v.manifestProblem(id, rootKey, err); err != nil {
				return fmt.Errorf("read manifest %s: %w", rootKey, err)
			}
			pr.Incomplete = true
		default:
			root, rootBase = m, base
			pr.Generation = m.Generation
			pr.SubCount = len(m.Sealed)
			inner := remotelog.BucketResolver(v.b)
			res := manifest.ResolverFunc(func(ctx context.Context, key string, size int64) ([]byte, error) {
				return inner.Load(ctx, base+key, size)
			})
			add := func(s manifest.Segment) {
				pr.Segments++
				for _, o := range s.Objects() {
					isLog := o.Key == s.Log.Key
					o.Key = base + o.Key
					r := refs[o.Key]
					r.key, r.size = o.Key, max(r.size, o.Offset+o.Size)
					r.sections = append(r.sections, o)
					if isLog {
						r.seg = &s
					}
					refs[o.Key] = r
				}
			}
			for i, ref := range m.Sealed {
				key := base + ref.Key
				refs[key] = objectRef{key: key, size: ref.Size}
				sub, err := m.LoadSub(ctx, res, i)
				checked[key] = true // LoadSub checks size and SHA-256
				if err != nil {
					if err := v.manifestProblem(id, key, err); err != nil {
						return fmt.Errorf("read sub-manifest %s: %w", key, err)
					}
					pr.Incomplete = true
					continue
				}
				for _, s := range sub.Segments {
					add(s)
				}
			}
			for _, s := range m.Segments {
				add(s)
			}
		}
	}

	// The partition's objects, checked against the references.
	var jobs []objectRef
	seen := map[string]bool{}
	now := v.opts.Now()
	for _, dir := range dirs {
		err := v.b.List(ctx, dir, func(o objstore.ObjectInfo) error {
			if o.Key == rootKey {
				return nil
			}
			k, err := manifest.ParseKey(o.Key)
			if err != nil || k.Prefix != id.prefix || k.Topic != id.topic || k.Partition != id.partition {
				return nil // foreign: counted in pass 1
			}
			if ref, ok := refs[o.Key]; ok {
				seen[o.Key] = true
				switch {
				case checked[o.Key]:
					// A sub-manifest: LoadSub checked it.
				case o.Size != ref.size:
					v.problem(id, ProblemSize, o.Key, "%d bytes, the manifest recorded %d", o.Size, ref.size)
				default:
					jobs = append(jobs, ref)
				}
				return nil
			}
			if pr.Incomplete {
				return nil // references unknown: cannot tell an orphan
			}
			age := now.Sub(o.LastModified)
			// A sub-manifest the next commit may seal again is kept by GC
			// (resealable): listed, never past its grace.
			past := age >= v.opts.Grace && (root == nil || !resealable(root, k))
			if past && root != nil && k.Type == manifest.KeySub {
				// Nor one holding only committed segments (reusableSub).
				keep, err := reusableSub(ctx, remotelog.BucketResolver(v.b), o, func(key string) bool {
					_, ok := refs[rootBase+key]
					return ok
				})
				if err != nil {
					return err
				}
				past = !keep
			}
			v.rep.Orphans = append(v.rep.Orphans, Orphan{Key: o.Key, Topic: id.topic, Partition: id.partition, Size: o.Size,
				LastModified: o.LastModified, Age: age, AgeSeconds: age.Seconds(), PastGrace: past})
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
	}
	missing := make([]string, 0)
	for k := range refs {
		if !seen[k] && !checked[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		v.problem(id, ProblemMissing, k, "referenced by the manifest, not in the bucket")
	}
	if err := v.checksums(ctx, id, jobs); err != nil {
		return err
	}
	v.rep.Partitions = append(v.rep.Partitions, pr)
	return nil
}

// objectRef is what the manifest records of one object: its size and the
// checksummed sections it is made of, back to back from offset 0 (one for
// a whole object, the indexes of a segment's indexes object).
type objectRef struct {
	key      string
	size     int64
	sections []manifest.Object
	seg      *manifest.Segment // the segment whose .log this is, nil for other objects
}

// checksums streams every object in jobs through a digest per section,
// opts.Concurrency at a time.
func (v *verifier) checksums(ctx context.Context, id partitionID, jobs []objectRef) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan objectRef)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for range min(v.opts.Concurrency, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for o := range ch {
				if err := v.checksum(ctx, id, o, buf); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
feed:
	for _, o := range jobs {
		select {
		case ch <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func (v *verifier) checksum(ctx context.Context, id partitionID, o objectRef, buf []byte) error {
	rc, err := v.b.Get(ctx, o.key)
	if objstore.IsNotFound(err) {
		v.problem(id, ProblemMissing, o.key, "deleted while being verified")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", o.key, err)
	}
	defer rc.Close()
	var r io.Reader = rc
	var walk *logWalker
	if o.seg != nil {
		// The segment's batches are checked as the bytes stream by.
		walk = newLogWalker(o.key, *o.seg)
		r = io.TeeReader(rc, walk)
	}
	var n int64
	for _, sec := range o.sections {
		d, err := manifest.NewDigest(sec.Checksum.Algorithm())
		if err != nil {
			v.problem(id, ProblemChecksum, o.key, "%v", err)
			return nil
		}
		got, err := io.CopyBuffer(d, io.LimitReader(r, sec.Size), buf)
		n += got
		if err != nil {
			return fmt.Errorf("read %s: %w", o.key, err)
		}
		what := ""
		if sec.Section() {
			what = fmt.Sprintf("section [%d, %d): ", sec.Offset, sec.Offset+sec.Size)
		}
		if got < sec.Size {
			break // reported below, by size
		}
		if sum := d.Checksum(); sum != sec.Checksum {
			v.problem(id, ProblemChecksum, o.key, "%schecksum %s, the manifest recorded %s", what, sum, sec.Checksum)
		}
	}
	rest, err := io.CopyBuffer(io.Discard, r, buf)
	n += rest
	if err != nil {
		return fmt.Errorf("read %s: %w", o.key, err)
	}
	if walk != nil {
		if detail := walk.finish(); detail != "" {
			v.problem(id, ProblemLog, o.key, "%s", detail)
		}
	}
	v.mu.Lock()
	v.rep.Objects++
	v.rep.Bytes += n
	v.mu.Unlock()
	if n != o.size {
		v.problem(id, ProblemSize, o.key, "read %d bytes, the manifest recorded %d", n, o.size)
	}
	return nil
}

// logWalker checks a segment's .log as verify streams it (an io.Writer
// behind a TeeReader), holding one batch at a time: every batch's framing,
// CRC and header, its offsets through a record.Chain over the segment's
// range, and at the end the first and last offsets and the record count
// against the manifest's. A compacted segment may start after its base
// offset and end before its last offset.
type logWalker struct {
	key     string
	seg     manifest.Segment
	chain   record.Chain
	buf     []byte
	pos     int64 // object position of buf[0]
	first   int64 // base offset of the first batch, -1 before it
	records int64 // manifest.UnknownCount once a legacy message was seen
	problem string
}

func newLogWalker(key string, seg manifest.Segment) *logWalker {
	return &logWalker{key: key, seg: seg, chain: record.NewChain(seg.BaseOffset, seg.LastOffset), first: -1}
}

func (w *logWalker) Write(p []byte) (int, error) {
	if w.problem != "" {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	at := 0
	for len(w.buf)-at >= record.LogOverhead {
		rest := w.buf[at:]
		size := int64(record.LogOverhead) + int64(int32(binary.BigEndian.Uint32(rest[8:])))
		if size <= record.LogOverhead || w.pos+size > w.seg.Log.Size {
			w.problem = (&record.CorruptError{File: w.key, Pos: w.pos, Offset: record.Batch(rest).BaseOffset(), Reason: fmt.Sprintf(
				"batch of %d bytes runs past the end of the %d-byte object", size, w.seg.Log.Size)}).Error()
			break
		}
		if int64(len(rest)) < size {
			break
		}
		it := record.NewIter(rest[:size])
		it.Verify, it.Chain = true, &w.chain
		b, ok := it.Next()
		if !ok {
			err := it.Err()
			if err == nil {
				err = &record.CorruptError{Offset: -1, Reason: "incomplete batch"}
			}
			w.problem = record.WithFile(err, w.key, w.pos).Error()
			break
		}
		if w.first < 0 {
			w.first = b.BaseOffset()
		}
		switch {
		case b.IsLegacy():
			w.records = manifest.UnknownCount
		case w.records != manifest.UnknownCount:
			w.records += int64(b.RecordCount())
		}
		at += int(size)
		w.pos += size
	}
	w.buf = append(w.buf[:0], w.buf[at:]...)
	return len(p), nil
}

// finish is the problem found, "" when the segment holds what the
// manifest says.
func (w *logWalker) finish() string {
	switch {
	case w.problem != "":
		return w.problem
	case len(w.buf) > 0:
		return fmt.Sprintf("%d bytes at position %d are not a whole batch", len(w.buf), w.pos)
	case w.chain.Checked() == 0:
		return "no batch"
	case !w.seg.Compacted && w.first != w.seg.BaseOffset:
		return fmt.Sprintf("the first batch starts at offset %d, the manifest says the segment starts at %d", w.first, w.seg.BaseOffset)
	case !w.seg.Compacted && w.chain.Prev() != w.seg.LastOffset:
		return fmt.Sprintf("the last batch ends at offset %d, the manifest says the segment ends at %d", w.chain.Prev(), w.seg.LastOffset)
	case w.seg.RecordCount != manifest.UnknownCount && w.records != manifest.UnknownCount && w.records != w.seg.RecordCount:
		return fmt.Sprintf("the batches hold %d records, the manifest says %d", w.records, w.seg.RecordCount)
	}
	return ""
}
