package remotetier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/topicconfig"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
)

// ErrSegmentGone reports a segment that was deleted, replaced or changed
// between listing and the end of its upload (the broker's retention or
// cleaner, or tiered's own). The uploader skips it, never commits a
// half-read copy, and looks again on the next pass.
var ErrSegmentGone = localtier.ErrSegmentGone

// DefaultIndexIntervalBytes is Kafka's index.interval.bytes default, used to
// build the indexes of a segment whose source has none.
const DefaultIndexIntervalBytes = 4096

// maxIndexFileBytes bounds an index file read into memory (Kafka's
// segment.index.bytes is an int; its default is 10 MiB).
const maxIndexFileBytes = 64 << 20

// Source is where an Uploader finds partitions and their rolled segments:
// tiered's own log dir (LocalSource) or a Kafka broker's (BrokerSource).
type Source interface {
	// Partitions lists the partitions to upload from, each with its rolled
	// segments that lie wholly below its high watermark. It is called once
	// per pass, so partitions appear and disappear between passes. A
	// partition it found but could not list (its segments, leader epochs
	// or topic ID unreadable) does not stop the others: they are returned
	// with a ListErrors naming it.
	Partitions(ctx context.Context) ([]Partition, error)
	// Open opens one segment Partitions listed. A segment that is no longer
	// the one listed is ErrSegmentGone.
	Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error)
}

// PartitionListError is a partition a Source found but could not list.
type PartitionListError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *PartitionListError) Error() string {
	return fmt.Sprintf("list partition %s-%d: %v", e.Topic, e.Partition, e.Err)
}

func (e *PartitionListError) Unwrap() error { return e.Err }

// ListErrors is what Partitions returns, with the partitions it did list,
// when some partitions could not be listed: a corrupt segment or
// checkpoint in one partition leaves the others uploading, and the pass
// reports the partitions left out.
type ListErrors []*PartitionListError

func (l ListErrors) Error() string { return errors.Join(l.Unwrap()...).Error() }

// Unwrap lets errors.Is and errors.As see each partition's error.
func (l ListErrors) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Partition is one partition as a Source sees it at the start of a pass.
type Partition struct {
	Topic     string
	Partition int32
	// HighWatermark: every offset below it is committed in the source (the
	// broker's replication-offset-checkpoint; the local log's last stable
	// offset). Nothing at or above it is ever uploaded.
	HighWatermark int64
	// LogStartOffset of the source log.
	LogStartOffset int64
	// Segments are the rolled, non-empty segments ending at or below
	// HighWatermark, oldest first.
	Segments []SegmentMeta
	// LeaderEpochs from the partition's leader-epoch-checkpoint; empty when
	// unknown (then the batches' own epochs are recorded).
	LeaderEpochs []manifest.EpochEntry
	// Compacted is set when a log cleaner may rewrite segments after they
	// were uploaded; CleanedUpTo is its checkpoint (offsets below it were
	// cleaned). Cleaned segments replace their committed ranges.
	Compacted   bool
	CleanedUpTo int64
	// Emptied are the rolled segments of a Compacted partition that hold
	// no batch, wholly below CleanedUpTo and HighWatermark (Size 0,
	// NextOffset = BaseOffset): the cleaner dropped every record of
	// [BaseOffset, NextBase). Not in Segments (there is nothing to
	// upload); the uploader removes the committed segments inside such a
	// range, which would otherwise serve the records the cleaner dropped
	// (and a deleted key again once its tombstone is gone).
	Emptied []SegmentMeta
	// IndexIntervalBytes is index.interval.bytes, for indexes the uploader
	// has to build.
	IndexIntervalBytes int64
	// SourceRetentionMs and SourceRetentionBytes are the source's own
	// retention for the topic (the broker's retention.ms and
	// retention.bytes): how long data not yet uploaded lasts there. -1 is
	// no limit (tiered's own log keeps what is not uploaded).
	SourceRetentionMs, SourceRetentionBytes int64
	// Source is every segment of the source log, the active one and those
	// below its log start included: what the source's retention.bytes is
	// compared with, and what of the log past the remote tier's end the
	// remote retention.bytes counts.
	Source []SourceSegment
	// Led is set when the source knows this broker leads the partition
	// (BrokerSource with Leads): its log is the partition's whole log.
	Led bool
	// TopicID is the partition's topic ID in Kafka's string form, from
	// partition.metadata; "" when the log dir has none (brokers before 2.8,
	// topics tiered's own engine created before it wrote topic IDs): the
	// name-only lineage.
	TopicID string
	// Configs are topic configs to record in the topic object (nil: leave
	// them as they are).
	Configs map[string]string

	// keyID is the lineage the uploader writes the partition to
	// (resolveLineages).
	keyID string
	// ownsID is set by LocalSource: tiered's own engine gave TopicID at
	// random when it created the topic, and never wrote a name-only
	// lineage under it, so a name-only lineage the bucket holds is
	// another incarnation's, superseded rather than adopted whatever its
	// offsets (a broker's ID may be new to a bucket its own partitions
	// filled without IDs before an upgrade: adopted then).
	ownsID bool
}

// SourceSegment is one segment of the source log: its base offset, the
// offset past its last batch, and its size.
type SourceSegment struct {
	BaseOffset, NextOffset, Size int64
}

// unlisted are the source's segments that Segments does not list: the
// active one, those above the high watermark, and those the listing
// skipped (empty ones, those wholly below a DeleteRecords log start, every
// one while the high watermark is stale). Both lists are in offset order.
func (p Partition) unlisted() []SourceSegment {
	var out []SourceSegment
	i := 0
	for _, s := range p.Source {
		for i < len(p.Segments) && p.Segments[i].BaseOffset < s.BaseOffset {
			i++
		}
		if i < len(p.Segments) && p.Segments[i].BaseOffset == s.BaseOffset {
			continue
		}
		out = append(out, s)
	}
	return out
}

// SegmentMeta describes one segment as listed.
type SegmentMeta struct {
	BaseOffset int64
	// NextOffset is the offset after the last batch.
	NextOffset int64
	// NextBase is the next segment's base offset: the segment answers for
	// offsets [BaseOffset, NextBase) (after cleaning NextOffset may be lower).
	// NextOffset when a segment between may have been missed (BrokerSource:
	// the next one listed is AfterGap).
	NextBase     int64
	Size         int64
	MaxTimestamp int64
}

// LastOffset is NextOffset - 1.
func (s SegmentMeta) LastOffset() int64 { return s.NextOffset - 1 }

// SegmentReader gives access to one segment: its .log twice — streamed once
// (Read: exactly Size bytes, then io.EOF) for the uploader to check every
// batch, then by position (LogReaderAt) for the object store to send in
// parts without buffering — and its index files. Index methods return
// ok=false when the source has no such file; the uploader then builds .index
// and .timeindex from the log as it streams it (a missing .txnindex means
// none).
type SegmentReader interface {
	io.Reader
	Size() int64
	// LogReaderAt returns the .log for reads by position, once Read reached
	// io.EOF; it is the same file the stream read, or the call fails with
	// ErrSegmentGone.
	LogReaderAt() (io.ReaderAt, error)
	// Unchanged reports ErrSegmentGone when the file LogReaderAt reads
	// changed size since it was opened.
	Unchanged() error
	OffsetIndex() (data []byte, ok bool, err error)
	TimeIndex() (data []byte, ok bool, err error)
	TxnIndex() (data []byte, ok bool, err error)
	Close() error
}

// pinnedFile is a segment's .log opened by the uploader itself, for reads by
// position after the stream checked the same file.
type pinnedFile struct {
	fs   vfs.FS
	path string
	f    vfs.File
	fi   os.FileInfo
	size int64
}

func openPinned(fsys vfs.FS, path string, size int64) (*pinnedFile, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", path, ErrSegmentGone)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	return &pinnedFile{fs: fsys, path: path, f: f, fi: fi, size: size}, nil
}

// check fails with ErrSegmentGone unless the pinned file has the size
// listed and is still the file at its path.
func (p *pinnedFile) check() error {
	if err := p.unchanged(); err != nil {
		return err
	}
	cur, err := p.fs.Stat(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s was deleted: %w", p.path, ErrSegmentGone)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", p.path, err)
	}
	if !sameFile(p.fi, cur) {
		return fmt.Errorf("%s was replaced: %w", p.path, ErrSegmentGone)
	}
	return nil
}

// unchanged checks the size only: a segment deleted after it was checked
// is still read whole through the open file.
func (p *pinnedFile) unchanged() error {
	fi, err := p.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", p.path, err)
	}
	if fi.Size() != p.size {
		return fmt.Errorf("%s is %d bytes, listed with %d: %w", p.path, fi.Size(), p.size, ErrSegmentGone)
	}
	return nil
}

func sameFile(a, b os.FileInfo) bool {
	if a.Sys() != nil && b.Sys() != nil {
		return os.SameFile(a, b)
	}
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func tp(topic string, partition int32) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: topic, Partition: partition}
}

func toManifestEpochs(es []checkpoint.EpochEntry) []manifest.EpochEntry {
	out := make([]manifest.EpochEntry, 0, len(es))
	for _, e := range es {
		out = append(out, manifest.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out
}

// readSmallFile reads an index file whole; ok is false if it does not exist.
func readSmallFile(fsys vfs.FS, path string) ([]byte, bool, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Size() > maxIndexFileBytes {
		return nil, false, &index.CorruptIndexError{File: path, Reason: fmt.Sprintf("file is %d bytes, more than an index may have", fi.Size())}
	}
	data := make([]byte, fi.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data[:n], true, nil
}

// LocalSource offers the rolled segments of tiered's own log dir, for the
// topics with remote.storage.enable=true. The high watermark is the log's
// last stable offset (the log end offset without open transactions).
// Segment logs are read through Log.ScanSegment, which fails when the
// compactor or retention replaces the segment meanwhile; the .index and
// .timeindex are built from the log as it streams (the engine writes index
// entries lazily, so the files may lag; the rule is the engine's own, so the
// result is what the engine writes), the .txnindex is read from disk.
type LocalSource struct {
	dir *localtier.LogDir
	fs  vfs.FS
}

// NewLocalSource returns a source over dir, reading files through fsys
// (nil: the OS filesystem).
func NewLocalSource(dir *localtier.LogDir, fsys vfs.FS) *LocalSource {
	if fsys == nil {
		fsys = vfs.Default
	}
	return &LocalSource{dir: dir, fs: fsys}
}

// Partitions implements Source.
func (s *LocalSource) Partitions(ctx context.Context) ([]Partition, error) {
	cleaned, err := s.dir.ReadCleanerCheckpoint()
	if err != nil {
		return nil, err
	}
	var out []Partition
	var failed ListErrors
	for _, pl := range s.dir.RemotePartitions(nil) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, err := s.partition(pl.Log, pl.Topic, pl.Partition, pl.Log.Config(), cleaned)
		if err != nil {
			failed = append(failed, &PartitionListError{Topic: pl.Topic, Partition: pl.Partition, Err: err})
			continue
		}
		if !pl.TopicID.IsZero() {
			// Given at random when this data dir created the topic: no
			// name-only lineage in the bucket is this topic's.
			p.TopicID, p.ownsID = pl.TopicID.String(), true
		}
		out = append(out, p)
	}
	return out, failed.orNil()
}

// orNil is l as an error, nil when empty.
func (l ListErrors) orNil() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (s *LocalSource) partition(l *localtier.Log, topic string, partition int32, cfg topicconfig.Config, cleaned map[checkpoint.TopicPartition]int64) (Partition, error) {
	p := Partition{Topic: topic, Partition: partition, HighWatermark: l.LastStableOffset(),
		LogStartOffset: l.LogStartOffset(), Compacted: cfg.CleanupPolicy.Compact,
		CleanedUpTo: cleaned[tp(topic, partition)], IndexIntervalBytes: cfg.IndexIntervalBytes,
		SourceRetentionMs: -1, SourceRetentionBytes: -1}
	epochs, err := checkpoint.ReadLeaderEpochs(s.fs, filepath.Join(l.Dir(), checkpoint.LeaderEpochFile))
	if err != nil {
		return Partition{}, fmt.Errorf("read leader epochs of %s-%d: %w", topic, partition, err)
	}
	p.LeaderEpochs = toManifestEpochs(epochs)
	segs := l.Segments()
	if rolledPastRecoveryPoint(segs, p.HighWatermark, l.RecoveryPoint()) {
		// Rolls fsync, but a log opened after a crash starts at its
		// checkpointed recovery point, which can be older than its rolled
		// segments (an older tiered's rolls did not fsync): make them
		// durable before they are offered, or a power loss could leave the
		// bucket ahead of the log, which would then hand out those offsets
		// again.
		if err := l.Flush(); err != nil {
			return Partition{}, fmt.Errorf("flush %s-%d before its upload: %w", topic, partition, err)
		}
	}
	for _, sg := range segs {
		p.Source = append(p.Source, SourceSegment{BaseOffset: sg.BaseOffset, NextOffset: sg.NextOffset, Size: sg.Size})
	}
	for i, sg := range segs {
		if sg.Active || i+1 >= len(segs) {
			break
		}
		if sg.NextOffset > p.HighWatermark {
			break
		}
		if sg.Size == 0 || sg.NextOffset <= sg.BaseOffset {
			p.addEmptied(sg.BaseOffset, sg.Size, segs[i+1].BaseOffset)
			continue
		}
		p.Segments = append(p.Segments, SegmentMeta{BaseOffset: sg.BaseOffset, NextOffset: sg.NextOffset,
			NextBase: segs[i+1].BaseOffset, Size: sg.Size, MaxTimestamp: sg.MaxTimestamp})
	}
	return p, nil
}

// addEmptied lists a rolled segment without batches, answering for
// [base, nextBase), in Emptied when the log cleaner has been over the
// range (the partition is compacted and nextBase is at or below both its
// cleaner checkpoint and its high watermark, and above its log start):
// no record of the range is left at the source, for good (offsets below
// the high watermark are never written again, and cleaning only removes
// records).
func (p *Partition) addEmptied(base, size, nextBase int64) {
	if !p.Compacted || size != 0 || nextBase <= base || nextBase > p.CleanedUpTo || nextBase > p.HighWatermark ||
		nextBase <= p.LogStartOffset {
		return
	}
	p.Emptied = append(p.Emptied, SegmentMeta{BaseOffset: base, NextOffset: base, NextBase: nextBase, MaxTimestamp: -1})
}

// rolledPastRecoveryPoint reports whether a rolled segment wholly below
// hw (one partition would offer for upload) ends past the recovery point.
func rolledPastRecoveryPoint(segs []localtier.SegmentInfo, hw, recoveryPoint int64) bool {
	for i, sg := range segs {
		if sg.Active || i+1 >= len(segs) || sg.NextOffset > hw {
			return false
		}
		if sg.NextOffset > recoveryPoint {
			return true
		}
	}
	return false
}

// Open implements Source.
func (s *LocalSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	l, err := s.dir.Partition(p.Topic, p.Partition)
	if err != nil {
		return nil, err
	}
	cs, err := liveCleanerSegment(l, seg)
	if err != nil {
		return nil, err
	}
	txn, hasTxn, err := readSmallFile(s.fs, localtier.SegmentPath(l.Dir(), seg.BaseOffset, localtier.TxnIndexSuffix))
	if err != nil {
		return nil, err
	}
	pin, err := openPinned(s.fs, localtier.SegmentPath(l.Dir(), seg.BaseOffset, localtier.LogSuffix), seg.Size)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	r := &localReader{pr: pr, size: seg.Size, txn: txn, hasTxn: hasTxn, pin: pin, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		err := l.ScanSegment(cs, cs.BaseOffset, false, func(_ int64, b record.Batch) error {
			_, err := pw.Write(b)
			return err
		})
		if errors.Is(err, localtier.ErrSegmentChanged) {
			err = fmt.Errorf("segment %d of %s: %w", seg.BaseOffset, l.Dir(), ErrSegmentGone)
		}
		if err == nil {
			// The scan read the segment that was live when it started;
			// make sure it still is, unchanged, now that it ended.
			_, err = liveCleanerSegment(l, seg)
		}
		pw.CloseWithError(err)
	}()
	return r, nil
}

// liveCleanerSegment finds seg in the log as it is now, or ErrSegmentGone.
func liveCleanerSegment(l *localtier.Log, seg SegmentMeta) (localtier.CleanerSegment, error) {
	for _, cs := range l.CleanerView().Segments {
		if cs.BaseOffset == seg.BaseOffset {
			if cs.Active || cs.Size != seg.Size || cs.NextOffset != seg.NextOffset {
				break
			}
			return cs, nil
		}
	}
	return localtier.CleanerSegment{}, fmt.Errorf("segment %d of %s changed since it was listed: %w", seg.BaseOffset, l.Dir(), ErrSegmentGone)
}

type localReader struct {
	pr     *io.PipeReader
	size   int64
	txn    []byte
	hasTxn bool
	pin    *pinnedFile
	done   chan struct{}
	once   sync.Once
}

func (r *localReader) LogReaderAt() (io.ReaderAt, error) {
	if err := r.pin.check(); err != nil {
		return nil, err
	}
	return r.pin.f, nil
}

func (r *localReader) Unchanged() error { return r.pin.unchanged() }

func (r *localReader) Read(p []byte) (int, error)                  { return r.pr.Read(p) }
func (r *localReader) Size() int64                                 { return r.size }
func (r *localReader) OffsetIndex() ([]byte, bool, error)          { return nil, false, nil }
func (r *localReader) TimeIndex() ([]byte, bool, error)            { return nil, false, nil }
func (r *localReader) TxnIndex() (data []byte, ok bool, err error) { return r.txn, r.hasTxn, nil }

func (r *localReader) Close() error {
	var err error
	r.once.Do(func() {
		r.pr.CloseWithError(errors.New("segment reader closed"))
		<-r.done
		err = r.pin.f.Close()
	})
	return err
}

// BrokerSource offers the rolled segments of a Kafka broker's log dir below
// each partition's high watermark from replication-offset-checkpoint. It
// only reads the directory (localtier.BrokerView); nothing is ever written
// there. A partition absent from the checkpoint has no known high watermark
// and is left alone (the KRaft metadata log, a partition just created).
type BrokerSource struct {
	view *localtier.BrokerView
	fs   vfs.FS
	// Leads, when set, limits uploads to the partitions it returns (those
	// this broker leads, asked from the cluster). nil, or a nil map
	// returned (leadership unknown), uploads every partition with a high
	// watermark.
	Leads func(ctx context.Context) (map[checkpoint.TopicPartition]bool, error)
	// Retention, when set, gives the broker's retention.ms and
	// retention.bytes of a topic (from its metadata); nil assumes Kafka's
	// defaults (7 days, no size limit).
	Retention func(topic string) (ms, bytes int64)
	// Tiered, when set, is the per-topic policy (remotetier/policy): partitions of a topic
	// it returns false for are never listed, so never uploaded. nil lists every topic.
	Tiered func(topic string) bool
	// Compacted, when set, reports the topics whose cleanup.policy has
	// compact (from the broker's metadata). Their partitions are Compacted
	// even when the cleaner-offset-checkpoint does not name them yet: a
	// replica that copied its leader's cleaned log holds the cleaner's
	// offset gaps before its own cleaner first runs, and they are no loss.
	// nil: the checkpoint alone decides.
	Compacted func(topic string) bool
	// TopicID, when set, is the topic's ID in the broker's metadata ("" or
	// !ok when it does not know one). A partition directory holding
	// another ID is not the topic's: a stray left by a deletion the broker
	// has not cleaned up yet (Kafka's stray logs), or a re-creation the
	// metadata read has not seen yet. It is not listed, so nothing of it is
	// uploaded into the lineage its partition.metadata names. nil: the
	// directory's ID alone decides.
	TopicID func(topic string) (id string, ok bool)
}

// NewBrokerSource returns a source over a broker log dir view; fsys (nil:
// the OS filesystem) reads the cleaner checkpoint.
func NewBrokerSource(view *localtier.BrokerView, fsys vfs.FS) *BrokerSource {
	if fsys == nil {
		fsys = vfs.Default
	}
	return &BrokerSource{view: view, fs: fsys}
}

// Partitions implements Source.
func (s *BrokerSource) Partitions(ctx context.Context) ([]Partition, error) {
	hws, err := s.view.HighWatermarks()
	if err != nil {
		return nil, fmt.Errorf("read high watermarks: %w", err)
	}
	starts, err := s.view.LogStartOffsets()
	if err != nil {
		return nil, fmt.Errorf("read log start offsets: %w", err)
	}
	cleaned, err := checkpoint.ReadOffsets(s.fs, filepath.Join(s.view.Dir(), checkpoint.CleanerOffsetFile))
	if err != nil {
		return nil, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	var leads map[checkpoint.TopicPartition]bool
	if s.Leads != nil {
		if leads, err = s.Leads(ctx); err != nil {
			return nil, fmt.Errorf("ask which partitions this broker leads: %w", err)
		}
	}
	bps, err := s.view.Partitions()
	if err != nil {
		return nil, err
	}
	var out []Partition
	var failed ListErrors
	for _, bp := range bps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.Tiered != nil && !s.Tiered(bp.Topic) {
			continue
		}
		key := tp(bp.Topic, bp.Partition)
		hw, ok := hws[key]
		if !ok || (leads != nil && !leads[key]) {
			continue
		}
		p, err := s.partition(bp, hw, starts[key], cleaned)
		var unknown *localtier.UnknownTopicOrPartitionError
		if errors.As(err, &unknown) {
			continue // deleted since the listing
		}
		if err != nil {
			failed = append(failed, &PartitionListError{Topic: bp.Topic, Partition: bp.Partition, Err: err})
			continue
		}
		p.Led = leads != nil
		out = append(out, p)
	}
	return out, failed.orNil()
}

func (s *BrokerSource) partition(bp localtier.BrokerPartition, hw, logStart int64, cleaned map[checkpoint.TopicPartition]int64) (Partition, error) {
	key := tp(bp.Topic, bp.Partition)
	cleanedUpTo, compacted := cleaned[key]
	compacted = compacted || s.Compacted != nil && s.Compacted(bp.Topic)
	p := Partition{Topic: bp.Topic, Partition: bp.Partition, HighWatermark: hw, LogStartOffset: logStart,
		Compacted: compacted, CleanedUpTo: cleanedUpTo, IndexIntervalBytes: DefaultIndexIntervalBytes,
		SourceRetentionMs: topicconfig.DefaultRetentionMs, SourceRetentionBytes: topicconfig.DefaultRetentionBytes}
	if s.Retention != nil {
		p.SourceRetentionMs, p.SourceRetentionBytes = s.Retention(bp.Topic)
	}
	id, err := s.view.TopicID(bp.Topic, bp.Partition)
	if err != nil {
		return Partition{}, fmt.Errorf("read topic id of %s-%d: %w", bp.Topic, bp.Partition, err)
	}
	p.TopicID = id.StringOrEmpty()
	if s.TopicID != nil && p.TopicID != "" {
		if cur, ok := s.TopicID(bp.Topic); ok && cur != "" && cur != p.TopicID {
			return Partition{}, &localtier.UnknownTopicOrPartitionError{Topic: bp.Topic, Partition: bp.Partition}
		}
	}
	epochs, err := s.view.LeaderEpochs(bp.Topic, bp.Partition)
	if err != nil {
		return Partition{}, fmt.Errorf("read leader epochs of %s-%d: %w", bp.Topic, bp.Partition, err)
	}
	p.LeaderEpochs = toManifestEpochs(epochs)
	segs, err := s.view.Segments(bp.Topic, bp.Partition)
	if err != nil {
		return Partition{}, err
	}
	// The topic may have been deleted and re-created (a new directory of
	// the same name, another topic ID) since its ID was read: then these
	// segments are not that ID's, and the partition waits for the next pass.
	if again, err := s.view.TopicID(bp.Topic, bp.Partition); err != nil || again != id {
		return Partition{}, errors.Join(&localtier.UnknownTopicOrPartitionError{Topic: bp.Topic, Partition: bp.Partition}, err)
	}
	for _, sg := range segs {
		p.Source = append(p.Source, SourceSegment{BaseOffset: sg.BaseOffset, NextOffset: sg.NextOffset, Size: sg.Size})
	}
	// A high watermark past the log's end is not this log's: the
	// checkpoint (by name, written every few seconds) still holds a deleted
	// incarnation's of a topic re-created since, or the log was truncated
	// below it. Nothing is known committed until the broker writes it again.
	staleHW := len(segs) > 0 && hw > segs[len(segs)-1].NextOffset
	for i, sg := range segs {
		if staleHW || sg.Active || i+1 >= len(segs) || sg.NextOffset > hw {
			break
		}
		// A segment wholly below the log start (a DeleteRecords moved it
		// past the segment; the broker deletes the file at its next
		// retention check) is deleted already for Kafka: never uploaded,
		// as Kafka's own tiering copies nothing below the log start.
		if sg.Size == 0 || sg.NextOffset <= sg.BaseOffset || sg.NextOffset <= logStart {
			// An empty segment answers for the offsets up to the next
			// one only when nothing between them was missed: a segment
			// gone mid-listing, or being swapped in or deleted, may still
			// hold them.
			if !segs[i+1].AfterGap {
				p.addEmptied(sg.BaseOffset, sg.Size, segs[i+1].BaseOffset)
			}
			continue
		}
		// Likewise a segment answers for the offsets past its last batch
		// (which its cleaner may have removed) only when nothing was
		// missed before the next one: otherwise its cleaned copy would
		// replace the committed copy of the missed segment's records.
		nextBase := segs[i+1].BaseOffset
		if segs[i+1].AfterGap {
			nextBase = sg.NextOffset
		}
		p.Segments = append(p.Segments, SegmentMeta{BaseOffset: sg.BaseOffset, NextOffset: sg.NextOffset,
			NextBase: nextBase, Size: sg.Size, MaxTimestamp: sg.MaxTimestamp})
	}
	if len(segs) > 0 && logStart < segs[0].BaseOffset {
		p.LogStartOffset = segs[0].BaseOffset
	}
	return p, nil
}

// Open implements Source.
func (s *BrokerSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	r, err := s.view.OpenSegment(p.Topic, p.Partition, seg.BaseOffset)
	if errors.Is(err, localtier.ErrActiveSegment) {
		return nil, fmt.Errorf("segment %d of %s-%d: %w", seg.BaseOffset, p.Topic, p.Partition, ErrSegmentGone)
	}
	if err != nil {
		return nil, err
	}
	if r.Size() != seg.Size {
		r.Close()
		return nil, fmt.Errorf("segment %d of %s-%d changed size from %d to %d since it was listed: %w",
			seg.BaseOffset, p.Topic, p.Partition, seg.Size, r.Size(), ErrSegmentGone)
	}
	pin, err := openPinned(s.fs, r.Segment().LogPath, r.Size())
	if err != nil {
		r.Close()
		return nil, err
	}
	// The files are open: if the partition directory still holds the
	// topic ID listed, they are that ID's (a deleted topic's directory is
	// renamed away and never comes back). Another ID is a topic deleted
	// and re-created by the same name since the listing: its segments
	// must not go into the listed ID's lineage.
	id, err := s.view.TopicID(p.Topic, p.Partition)
	if err == nil && id.String() != p.TopicID && !(id.IsZero() && p.TopicID == "") {
		err = fmt.Errorf("segment %d of %s-%d: the partition directory now holds topic id %q, listed with %q (the topic was re-created): %w",
			seg.BaseOffset, p.Topic, p.Partition, id.String(), p.TopicID, ErrSegmentGone)
	}
	var unknown *localtier.UnknownTopicOrPartitionError
	if errors.As(err, &unknown) {
		err = fmt.Errorf("segment %d of %s-%d: %w", seg.BaseOffset, p.Topic, p.Partition, ErrSegmentGone)
	}
	if err != nil {
		r.Close()
		pin.f.Close()
		return nil, err
	}
	return &brokerReader{r: r, pin: pin}, nil
}

// brokerReader streams through the view's BrokerSegmentReader (which checks
// at its end that the file it read is still the one at the path) and reads
// by position through its own descriptor of that file.
type brokerReader struct {
	r   *localtier.BrokerSegmentReader
	pin *pinnedFile
}

func (b *brokerReader) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *brokerReader) Size() int64                { return b.r.Size() }
func (b *brokerReader) Close() error               { return errors.Join(b.r.Close(), b.pin.f.Close()) }
func (b *brokerReader) Unchanged() error           { return b.pin.unchanged() }

func (b *brokerReader) LogReaderAt() (io.ReaderAt, error) {
	if err := b.pin.check(); err != nil {
		return nil, err
	}
	return b.pin.f, nil
}

func (b *brokerReader) OffsetIndex() ([]byte, bool, error) {
	if !b.r.Segment().HasIndex {
		return nil, false, nil
	}
	data, err := b.r.OffsetIndex()
	return data, err == nil, err
}

func (b *brokerReader) TimeIndex() ([]byte, bool, error) {
	if !b.r.Segment().HasTimeIndex {
		return nil, false, nil
	}
	data, err := b.r.TimeIndex()
	return data, err == nil, err
}

func (b *brokerReader) TxnIndex() ([]byte, bool, error) {
	if !b.r.Segment().HasTxnIndex {
		return nil, false, nil
	}
	data, err := b.r.TxnIndex()
	return data, err == nil, err
}
