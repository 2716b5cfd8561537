package remotetier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tiered/tiered/internal/x/ctxsleep"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// uploadTasks uploads tasks concurrently (bounded by the uploader's gates)
// and returns the longest prefix, in order, that was stored; the objects of
// later successes are deleted (never committed).
func (u *Uploader) uploadTasks(ctx context.Context, p Partition, tasks []task, pr *PartitionReport) ([]uploaded, error) {
	results := make([]uploaded, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = u.uploadWithRetry(ctx, p, t)
		}()
	}
	wg.Wait()
	n := 0
	for n < len(tasks) && errs[n] == nil {
		n++
	}
	for i := n; i < len(tasks); i++ {
		if errs[i] == nil && !results[i].drop {
			u.deleteKeys(ctx, results[i].seg.Keys())
		}
	}
	var err error
	for i := n; i < len(tasks); i++ {
		if errs[i] != nil {
			if errors.Is(errs[i], ErrSegmentGone) {
				pr.SegmentsGone++
				u.metrics.gone.Inc()
				u.logger.Info("segment went away during upload; skipped", "topic", p.Topic, "partition", p.Partition,
					"base_offset", tasks[i].seg.BaseOffset, "err", errs[i])
				continue
			}
			if err == nil {
				err = errs[i]
			}
		}
	}
	return results[:n], err
}

func (u *Uploader) uploadWithRetry(ctx context.Context, p Partition, t task) (uploaded, error) {
	if t.drop {
		return uploaded{task: t, started: u.opts.Now()}, nil // nothing to store
	}
	for attempt := 1; ; attempt++ {
		up, err := u.uploadSegment(ctx, p, t)
		if err == nil {
			return up, nil
		}
		var ce *CutError
		switch {
		case errors.As(err, &ce):
			u.metrics.errors.WithLabelValues(ErrKindConflict).Inc()
		case errors.Is(err, ErrSegmentGone), ctx.Err() != nil:
		case permanent(err):
			u.metrics.errors.WithLabelValues(ErrKindCorrupt).Inc()
		case errors.Is(err, errSource):
			u.metrics.errors.WithLabelValues(ErrKindSource).Inc()
		default:
			u.metrics.errors.WithLabelValues(ErrKindUpload).Inc()
		}
		if permanent(err) || attempt >= u.opts.Retry.Attempts {
			return uploaded{}, err
		}
		u.logger.Debug("segment upload failed; retrying", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "attempt", attempt, "err", err)
		if serr := ctxsleep.Sleep(ctx, u.opts.Retry.backoff(attempt)); serr != nil {
			return uploaded{}, serr
		}
	}
}

// errSource marks errors of the source (local or broker files).
var errSource = errors.New("source")

type sourceError struct{ err error }

func (e *sourceError) Error() string   { return e.err.Error() }
func (e *sourceError) Unwrap() []error { return []error{errSource, e.err} }

// uploadSegment stores one attempt of one segment: its .log is read once
// and checked (check), then stored with the indexes (storeChecked). The
// check takes a slot of checkGate and keeps it until a slot of gate is free
// for the store, so up to Concurrency segments are checked ahead of the
// Concurrency being stored: a segment is ready to send as soon as an upload
// ends, instead of the object store waiting while it is read.
func (u *Uploader) uploadSegment(ctx context.Context, p Partition, t task) (uploaded, error) {
	if err := acquire(ctx, u.checkGate); err != nil {
		return uploaded{}, err
	}
	c, err := u.check(ctx, p, t)
	if err != nil {
		<-u.checkGate
		return uploaded{}, err
	}
	err = acquire(ctx, u.gate)
	<-u.checkGate
	if err != nil {
		c.rd.Close()
		return uploaded{}, err
	}
	defer func() { <-u.gate }()
	return u.storeChecked(ctx, c)
}

// acquire takes a slot of gate, or fails when ctx ends first.
func acquire(ctx context.Context, gate chan struct{}) error {
	select {
	case gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkedSegment is a segment whose .log was read and checked, open and
// ready to store (storeChecked).
type checkedSegment struct {
	t       task
	rd      SegmentReader
	keys    manifest.SegmentKeys
	started time.Time
	// sums and n: the block checksums and size of the .log bytes checked.
	sums                    *crcBlocks
	n                       int64
	seg                     manifest.Segment // all but the objects
	offIdx, timeIdx, txnIdx []byte           // txnIdx empty: no .txnindex
	txns                    map[int64]txnEffect
}

// check opens one attempt of one segment and reads its .log once,
// sequentially, checking every batch and taking its checksums (whole and
// per block) and statistics (and building indexes). On success the
// segment stays open for storeChecked.
func (u *Uploader) check(ctx context.Context, p Partition, t task) (_ *checkedSegment, err error) {
	started := u.opts.Now()
	attempt := manifest.NewAttemptID()
	keys, err := manifest.DataKeysID(u.store.prefix, p.Topic, p.keyID, p.Partition, t.cut, attempt)
	if err != nil {
		return nil, err
	}
	rd, err := u.src.Open(ctx, p, t.seg)
	if err != nil {
		if errors.Is(err, ErrSegmentGone) {
			return nil, err
		}
		return nil, &sourceError{fmt.Errorf("open segment %d: %w", t.seg.BaseOffset, err)}
	}
	defer func() {
		if err != nil {
			rd.Close()
		}
	}()
	offIdx, hasOff, err := rd.OffsetIndex()
	if err != nil {
		u.logger.Warn("offset index is bad; rebuilding it from the log", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "err", err)
		hasOff = false
	}
	timeIdx, hasTime, err := rd.TimeIndex()
	if err != nil {
		u.logger.Warn("time index is bad; rebuilding it from the log", "topic", p.Topic, "partition", p.Partition,
			"base_offset", t.seg.BaseOffset, "err", err)
		hasTime = false
	}
	txnIdx, hasTxn, err := rd.TxnIndex()
	if err != nil {
		return nil, err
	}
	if !hasTxn {
		txnIdx = nil
	}
	cutting := t.cut > t.seg.BaseOffset
	build := !hasOff || !hasTime || cutting
	interval := int64(-1)
	if build {
		interval = p.IndexIntervalBytes
		if interval < 0 {
			interval = DefaultIndexIntervalBytes
		}
	}
	name := fmt.Sprintf("%s-%d/%020d.log", p.Topic, p.Partition, t.seg.BaseOffset)
	ls := newLogStream(&sourceReader{r: rd}, name, t.seg.BaseOffset, t.cut, interval)
	// The offsets between the cut and the next batch of a compacted
	// partition are the cleaner's (after a leader change, its segments need
	// not start where the committed ones end).
	ls.cleaned = p.Compacted
	sums := &crcBlocks{}
	n, err := io.Copy(sums, ls)
	if err != nil {
		if !errors.Is(err, ErrSegmentGone) && !errors.Is(err, errSource) && !permanent(err) {
			err = &sourceError{err}
		}
		return nil, fmt.Errorf("read segment %d: %w", t.seg.BaseOffset, err)
	}
	stats := ls.stats
	if stats.Batches == 0 {
		return nil, fmt.Errorf("segment %d: %w", t.seg.BaseOffset, ErrSegmentGone)
	}
	if stats.LastOffset >= p.HighWatermark {
		return nil, fmt.Errorf("segment %d holds offset %d at or above the high watermark %d: %w", t.seg.BaseOffset, stats.LastOffset, p.HighWatermark, ErrSegmentGone)
	}
	if stats.LastOffset != t.seg.LastOffset() {
		return nil, fmt.Errorf("segment %d ends at offset %d, listed as ending at %d: %w", t.seg.BaseOffset, stats.LastOffset, t.seg.LastOffset(), ErrSegmentGone)
	}
	if build {
		bOff, bTime, err := ls.indexes()
		if err != nil {
			return nil, err
		}
		if !hasOff || cutting {
			offIdx = bOff
		}
		if !hasTime || cutting {
			timeIdx = bTime
		}
	}
	if hasTxn && cutting {
		txns, err := index.DecodeAbortedTxns(txnIdx, t.seg.BaseOffset)
		if err != nil {
			return nil, err
		}
		var keep []index.AbortedTxn
		for _, a := range txns {
			if a.LastOffset >= t.cut {
				keep = append(keep, a)
			}
		}
		if txnIdx, err = index.EncodeAbortedTxns(keep, t.cut); err != nil {
			return nil, err
		}
	}
	seg := manifest.Segment{
		BaseOffset: t.cut, LastOffset: stats.LastOffset, RecordCount: stats.Records,
		MinTimestamp: stats.MinTimestamp, MaxTimestamp: stats.MaxTimestamp,
		// A copy whose first batch starts past its base holds a cleaner's
		// hole (a cut of a compacted partition's segment past the batch at
		// the cut, gone with an earlier leader's cleaning, though the
		// source's own cleaner has not been over it): readers and verify
		// take it for compacted, not for a mismatch.
		Compacted: t.compacted || stats.FirstOffset > t.cut, Uploader: u.opts.UploaderID, AttemptID: attempt,
	}
	if len(p.LeaderEpochs) > 0 {
		seg.LeaderEpochs = manifest.EpochsForSegment(p.LeaderEpochs, t.cut, stats.LastOffset)
	} else {
		seg.LeaderEpochs = stats.Epochs
	}
	return &checkedSegment{t: t, rd: rd, keys: keys, started: started, sums: sums, n: n, seg: seg,
		offIdx: offIdx, timeIdx: timeIdx, txnIdx: txnIdx, txns: stats.Txns}, nil
}

// storeChecked stores a checked segment: the very bytes checked, from the same
// file, by position (the object store then sends it in parts without
// buffering, whatever the segment size), and the indexes beside it; then
// closes it. On failure it deletes what it stored (the attempt's keys are
// its own and never committed).
func (u *Uploader) storeChecked(ctx context.Context, c *checkedSegment) (up uploaded, err error) {
	defer c.rd.Close()
	var stored []string
	defer func() {
		if err != nil && len(stored) > 0 {
			u.deleteKeys(context.WithoutCancel(ctx), stored)
		}
	}()
	rd, seg, n, keys := c.rd, c.seg, c.n, c.keys
	ra, err := rd.LogReaderAt()
	if err != nil {
		return up, err
	}
	var mu sync.Mutex
	var total int64
	put := func(key string, r io.Reader, size int64) (int64, error) {
		a, err := u.bkt.Put(ctx, key, r, size, objstore.Condition{})
		mu.Lock()
		defer mu.Unlock()
		stored = append(stored, key) // even on error: it may have been written
		if err != nil {
			return 0, fmt.Errorf("upload %s: %w", key, err)
		}
		total += a.Size
		u.metrics.uploadedBytes.Add(float64(a.Size))
		return a.Size, nil
	}
	// The indexes go in one object, back to back (manifest.FileIndexes):
	// one small request per segment instead of two or three. With
	// ManifestVersion 1, each goes in its own object.
	type small struct {
		key  string
		data []byte
	}
	var smalls []small
	combined := u.opts.ManifestVersion >= 2
	indexes := make([]byte, 0, len(c.offIdx)+len(c.timeIdx)+len(c.txnIdx))
	index := func(key string, data []byte) manifest.Object {
		sum := manifest.CRC32CChecksum(crc32.Checksum(data, castagnoli))
		if !combined {
			smalls = append(smalls, small{key, data})
			return manifest.Object{Key: key, Size: int64(len(data)), Checksum: sum}
		}
		o := manifest.Object{Key: keys.Indexes, Offset: int64(len(indexes)), Size: int64(len(data)), Checksum: sum}
		indexes = append(indexes, data...)
		return o
	}
	seg.Index = index(keys.Index, c.offIdx)
	seg.TimeIndex = index(keys.TimeIndex, c.timeIdx)
	if len(c.txnIdx) > 0 {
		txn := index(keys.TxnIndex, c.txnIdx)
		seg.TxnIndex = &txn
	}
	if combined {
		smalls = []small{{keys.Indexes, indexes}}
	}
	var g errgroup.Group
	g.Go(func() error {
		whole, _ := c.sums.sum(0, n)
		body := checkedSection{SectionReader: io.NewSectionReader(u.throttleAt(ctx, ra), rd.Size()-n, n), sums: c.sums}
		size, err := put(keys.Log, body, n)
		seg.Log = manifest.Object{Key: keys.Log, Size: size, Checksum: manifest.CRC32CChecksum(whole)}
		return err
	})
	for _, sm := range smalls {
		g.Go(func() error {
			if err := u.wait(ctx, len(sm.data)); err != nil {
				return err
			}
			_, err := put(sm.key, bytes.NewReader(sm.data), int64(len(sm.data)))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return up, err
	}
	if err := rd.Unchanged(); err != nil {
		return up, err
	}
	seg.UploadTimeMs = u.opts.Now().UnixMilli()
	if err := seg.Validate(); err != nil {
		return up, fmt.Errorf("segment %d: %w", c.t.seg.BaseOffset, err)
	}
	return uploaded{task: c.t, seg: seg, bytes: total, started: c.started, txns: c.txns}, nil
}

// sourceReader marks the source's read errors.
type sourceReader struct{ r io.Reader }

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrSegmentGone) {
		err = &sourceError{err}
	}
	return n, err
}

// throttleAt limits reads through ra to the uploader's byte rate.
func (u *Uploader) throttleAt(ctx context.Context, ra io.ReaderAt) io.ReaderAt {
	if u.limiter == nil {
		return ra
	}
	return &throttledAt{ra: ra, ctx: ctx, u: u}
}

type throttledAt struct {
	ra  io.ReaderAt
	ctx context.Context
	u   *Uploader
}

func (t *throttledAt) ReadAt(p []byte, off int64) (int, error) {
	if err := t.u.wait(t.ctx, len(p)); err != nil {
		return 0, err
	}
	return t.ra.ReadAt(p, off)
}

func (u *Uploader) wait(ctx context.Context, n int) error {
	if u.limiter == nil {
		return nil
	}
	for n > 0 {
		k := min(n, u.limiter.Burst())
		if err := u.limiter.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// deleteKeys deletes objects nothing references, best effort: a failure
// leaves an orphan for garbage collection.
func (u *Uploader) deleteKeys(ctx context.Context, keys []string) {
	for _, k := range keys {
		if err := u.bkt.Delete(ctx, k); err != nil {
			u.metrics.errors.WithLabelValues(ErrKindDelete).Inc()
			u.logger.Debug("delete unreferenced object failed; left to garbage collection", "key", k, "err", err)
			continue
		}
		u.metrics.deleted.Inc()
	}
}
